-- dequeue: a waiter leaves the line (it timed out or was cancelled).
-- Idempotent: sent again, it answers as the first time.
-- KEYS[1] lock hash  P:{NAME}
-- KEYS[2] waiting line  P:{NAME}:queue
-- KEYS[3] their leases  P:{NAME}:leases
-- ARGV[1] owner id
-- returns the fencing token when the lock was handed to this owner meanwhile
--         (the caller must pass it on with release.lua), else 0
-- (a line key holding another type has no entry to take out)
redis.pcall('LREM', KEYS[2], 0, ARGV[1])
redis.pcall('HDEL', KEYS[3], ARGV[1], 'since:' .. ARGV[1])
-- An emptied line takes its leases hash with it (see queue.lua).
if redis.call('TYPE', KEYS[2])['ok'] == 'none' and redis.call('TYPE', KEYS[3])['ok'] == 'hash' then
  redis.call('DEL', KEYS[3])
end
if redis.call('TYPE', KEYS[1])['ok'] == 'hash' and redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  return tonumber(redis.call('HGET', KEYS[1], 'fence'))
end
return 0
