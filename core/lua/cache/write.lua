-- cached/write: a rebuild stores what its loader produced, fenced: only
-- while it still holds the rebuild lock under the token it was granted,
-- never over an entry written under a newer token, and never after an
-- invalidation that came while it ran. Idempotent: sent again after a lost
-- reply, it stores the same entry again (same token) or answers 1.
-- (common.lua and cache/lib.lua are prepended.)
-- KEYS[1] the entry  P:{KEY}:cached
-- KEYS[2] the rebuild lock  P:{KEY}:rebuild
-- KEYS[3] the last rebuild failure  P:{KEY}:cached:failed
-- KEYS[4] the entry's channel  P:{KEY}:cached:news
-- ARGV[1] owner id of the rebuild lock's holding
-- ARGV[2] its fencing token
-- ARGV[3] the value ('' with ARGV[5] '1')
-- ARGV[4] its format (the face's encoding, opaque here)
-- ARGV[5] '1': a negative entry (the loader found nothing), else '0'
-- ARGV[6] how long it stays fresh, ms (jittered by the caller)
-- ARGV[7] how long it is kept, ms (fresh plus the stale window)
-- ARGV[8] how long the rebuild took, ms
-- ARGV[9] publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- returns 1 stored (and 'written <token>' published);
--         -1 refused: the rebuild lock is not held under that token (the
--            lease ended, or another rebuild holds it);
--         -2 refused: the entry was invalidated while this rebuild ran;
--         -3 refused: the entry was written under a newer token;
--         -4 refused: KEYS[1] is someone else's data
local fence = tonumber(ARGV[2])
if not entry_or_none(KEYS[1]) then
  return -4
end
local stored = tonumber(redis.call('HGET', KEYS[1], 'fence'))
local owner, held = rebuild_holding(KEYS[2])
if owner ~= ARGV[1] or held ~= fence then
  -- Sent again after a lost reply, a write that landed finds the entry it
  -- wrote (the lock may be released by then): answer as the first time.
  if stored == fence then
    return 1
  end
  return -1
end
if tonumber(redis.call('HGET', KEYS[2], 'invalidated')) == fence then
  return -2
end
if stored and stored > fence then
  return -3
end
local now = now_ms()
redis.call('DEL', KEYS[1])
local fields = {'format', ARGV[4], 'fence', ARGV[2], 'fresh', tostring(now + tonumber(ARGV[6])),
  'took', ARGV[8]}
if ARGV[5] == '1' then
  table.insert(fields, 'none')
  table.insert(fields, '1')
else
  table.insert(fields, 'value')
  table.insert(fields, ARGV[3])
end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('PEXPIRE', KEYS[1], ARGV[7])
if failure(KEYS[3]) then
  redis.call('DEL', KEYS[3])
end
redis.call(ARGV[9], KEYS[4], 'written ' .. ARGV[2])
return 1
