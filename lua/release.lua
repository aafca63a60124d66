-- release: undo one acquisition by this owner; the last one frees the lock and
-- announces it to waiters.
-- KEYS[1] lock hash  P:{NAME}
-- KEYS[2] release channel  P:{NAME}:released
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds, restored on the holding that remains after a
--         nested release
-- ARGV[3] publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- returns the re-entry count left (0: the lock is free and waiters were told),
--         -1 when the lock is gone (its lease ended),
--         -2 when someone else holds it (never touched)
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return -1
end
if kind ~= 'hash' or redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return -2
end
local count = redis.call('HINCRBY', KEYS[1], 'count', -1)
if count > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return count
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[3], KEYS[2], 'released')
return 0
