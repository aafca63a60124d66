-- release: undo one acquisition by this owner. The last one hands the lock
-- straight to the first live waiter in line and tells it on its waiter
-- channel, or frees the lock and announces it to all waiters.
-- (holding.lua and queue.lua are prepended: held_count, queue_head,
-- queue_pop, next_fence, take, release_count.)
-- KEYS[1] lock hash  P:{NAME}
-- KEYS[2] release channel  P:{NAME}:released
-- KEYS[3] fence counter  P:fence{T} of the slot of P:{NAME} (see acquire.lua)
-- KEYS[4] waiting line  P:{NAME}:queue
-- KEYS[5] their leases  P:{NAME}:leases
-- KEYS[6] legacy fence counter  P:{NAME}:fence  (see acquire.lua), folded in
--         when the lock is handed over
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds, restored on the holding that remains after a
--         nested release
-- ARGV[3] publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4] waiter channel prefix P:{NAME}:w:
-- ARGV[5] NUMSUB, or SHARDNUMSUB on Redis Cluster
-- ARGV[6] the re-entry count this owner believes it holds before this
--         request, sent as is on every send of one request: a count below
--         it means this release was applied already (its reply was lost),
--         and it is answered again, not applied twice; a count above it is
--         taken as it ("-1": unknown, the count as Redis has it).
-- ARGV[7] the fencing token of the holding to release; "0": whichever
--         holding this owner has (a grant to a waiter that left is passed on
--         with its token, so no later holding of that owner is touched)
-- returns the re-entry count left (0: the lock was handed over or freed, by
--           this request or, when it is sent again, by its first send),
--         -1 when the lock is gone (its lease ended),
--         -2 when someone else holds it (never touched)
local count, refused, previous = held_count(KEYS[1], ARGV[1], ARGV[7])
if not count then
  if previous and ARGV[7] ~= '0' and previous == ARGV[1] .. ':' .. ARGV[7] then
    -- This very release handed the lock over already (it is sent again).
    return 0
  end
  return refused
end
local answer
count, answer = release_count(count, tonumber(ARGV[6]) or -1)
if not count then
  return answer
end
if count > 1 then
  redis.call('HSET', KEYS[1], 'count', count - 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return count - 1
end
-- The last acquisition: the holding ends here (a handoff writes a new one).
-- Everything a handoff needs is read before its first write.
local head, lease = queue_head(KEYS[4], KEYS[5], ARGV[4], ARGV[5])
if head then
  local fence = next_fence(KEYS[3], KEYS[6])
  if fence then
    local previous = ARGV[1] .. ':' .. tostring(redis.call('HGET', KEYS[1], 'fence'))
    queue_pop(KEYS[4], KEYS[5], head)
    take(KEYS[1], head, fence, lease, previous)
    local client = string.match(head, '^[^:]*')
    redis.call(ARGV[3], ARGV[4] .. client, string.format('handoff %d %s', fence, head))
    return 0
  end
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[3], KEYS[2], 'released')
return 0
