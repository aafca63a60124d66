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
-- KEYS[7] forced-release mark  P:{NAME}:forced  'owner:fence' of a holding an
--         operator freed without handing it over, for the rest of its lease
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
-- ARGV[8] '1': an operator's forced release, sent as the holder (with its
--         token) by `rlock unlock --force`; the holding it ends is marked,
--         so that the holder's own release is refused (-3), not taken for
--         its own earlier send; absent or '0': the holder's own
-- returns the re-entry count left (0: the lock was handed over or freed, by
--           this request or, when it is sent again, by its first send),
--         -1 when the lock is gone (its lease ended),
--         -2 when someone else holds it (never touched),
--         -3 when an operator's forced release ended this holding
local forced = ARGV[8] == '1'
local count, refused, previous = held_count(KEYS[1], ARGV[1], ARGV[7])
if not count then
  if ARGV[7] and ARGV[7] ~= '0' then
    local holding = ARGV[1] .. ':' .. ARGV[7]
    local mark = 'forced:' .. holding
    if previous == (forced and mark or holding) then
      -- This very release handed the lock over already (it is sent again).
      return 0
    end
    if previous == mark then
      return -3
    end
    -- Freed, and perhaps taken by another since: the mark still says so.
    if KEYS[7] and redis.call('TYPE', KEYS[7])['ok'] == 'string'
        and redis.call('GET', KEYS[7]) == holding then
      if forced then
        return 0
      end
      return -3
    end
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
    if forced then
      previous = 'forced:' .. previous
    end
    queue_pop(KEYS[4], KEYS[5], head)
    take(KEYS[1], head, fence, lease, previous)
    local client = string.match(head, '^[^:]*')
    redis.call(ARGV[3], ARGV[4] .. client, string.format('handoff %d %s', fence, head))
    return 0
  end
end
if forced and KEYS[7] then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then
    redis.call('SET', KEYS[7], ARGV[1] .. ':' .. tostring(redis.call('HGET', KEYS[1], 'fence')),
      'PX', left)
  end
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[3], KEYS[2], 'released')
return 0
