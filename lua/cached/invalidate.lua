-- cached/invalidate: deletes a cache entry so the next read rebuilds it. A
-- rebuild in progress (it read the database before this) is marked on its
-- holding of the rebuild lock, by its token, so its write is refused
-- (write.lua): a value older than the invalidation never lands after it.
-- Rebuilds that start later hold newer tokens and are not marked; the mark
-- goes with that holding.
-- (cached/lib.lua is prepended: now_ms, type_of.)
-- KEYS[1] the entry  P:{KEY}:cached
-- KEYS[2] the rebuild lock  P:{KEY}:rebuild
-- KEYS[3] the last rebuild failure  P:{KEY}:cached:failed
-- returns 1 an entry was deleted, 0 there was none;
--         -1, -3: KEYS[1] or KEYS[3] holds a value of another type (left
--         alone, and nothing else done)
local t1, t3 = type_of(KEYS[1]), type_of(KEYS[3])
if t1 ~= 'none' and t1 ~= 'hash' then
  return -1
end
if t3 ~= 'none' and t3 ~= 'string' then
  return -3
end
if type_of(KEYS[2]) == 'hash' then
  local fence = redis.call('HGET', KEYS[2], 'fence')
  if fence then
    redis.call('HSET', KEYS[2], 'invalidated', fence)
  end
end
redis.call('DEL', KEYS[3])
return redis.call('DEL', KEYS[1])
