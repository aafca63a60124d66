-- acquire: take the lock, or re-enter it when this owner already holds it.
-- KEYS[1] lock hash  P:{NAME}        fields owner, count, fence; PEXPIRE = lease
-- KEYS[2] fence counter P:{NAME}:fence   INCR once per fresh acquisition, never expires
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- ARGV[3] "-1" normally; on a retry after a reply was lost, the re-entry count the
--         caller held before the lost request: a count above it means that request
--         was applied already and must not be counted twice
-- returns {1, fence, count} when held by ARGV[1] afterwards,
--         {0, pttl} otherwise (pttl -1: the key has no expiry)
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'count', 1, 'fence', fence)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, fence, 1}
end
-- a key of another type (a plain SET NX lock of older code) is someone else's lock
if kind == 'hash' and redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  local count = tonumber(redis.call('HGET', KEYS[1], 'count'))
  local before = tonumber(ARGV[3])
  if before < 0 or count <= before then
    count = redis.call('HINCRBY', KEYS[1], 'count', 1)
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'fence')), count}
end
return {0, redis.call('PTTL', KEYS[1])}
