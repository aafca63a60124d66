-- release: undo one acquisition by this owner. The last one hands the lock
-- straight to the first live waiter in line (fair mode) and tells it on its
-- waiter channel, or frees the lock and announces it to all waiters.
-- (holding.lua and queue.lua are prepended: held_count, queue_head,
-- queue_pop, take.)
-- KEYS[1] lock hash  P:{NAME}
-- KEYS[2] release channel  P:{NAME}:released
-- KEYS[3] fence counter  P:{NAME}:fence
-- KEYS[4] waiting line  P:{NAME}:queue
-- KEYS[5] their leases  P:{NAME}:leases
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds, restored on the holding that remains after a
--         nested release
-- ARGV[3] publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4] waiter channel prefix P:{NAME}:w:
-- ARGV[5] NUMSUB, or SHARDNUMSUB on Redis Cluster
-- returns the re-entry count left (0: the lock was handed over or freed),
--         -1 when the lock is gone (its lease ended),
--         -2 when someone else holds it (never touched)
local count, refused = held_count(KEYS[1], ARGV[1])
if not count then
  return refused
end
if count > 1 then
  count = redis.call('HINCRBY', KEYS[1], 'count', -1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return count
end
-- The last acquisition: the holding ends here (a handoff writes a new one).
local head = queue_head(KEYS[4], KEYS[5], ARGV[4], ARGV[5])
if head then
  local lease = redis.call('HGET', KEYS[5], head)
  queue_pop(KEYS[4], KEYS[5], head)
  local fence = take(KEYS[1], KEYS[3], head, lease)
  local client = string.match(head, '^[^:]*')
  redis.call(ARGV[3], ARGV[4] .. client, 'handoff ' .. fence .. ' ' .. head)
  return 0
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[3], KEYS[2], 'released')
return 0
