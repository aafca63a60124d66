-- cached/invalidate: deletes a cache entry so the next read rebuilds it. A
-- rebuild in progress (it read the database before this) is marked on its
-- holding of the rebuild lock, by its token, so its write is refused
-- (write.lua): a value older than the invalidation never lands after it.
-- Rebuilds that start later hold newer tokens and are not marked; the mark
-- goes with that holding. Sent again after a lost reply, it deletes nothing
-- more (and answers 0).
-- (common.lua and cache/lib.lua are prepended.)
-- KEYS[1] the entry  P:{KEY}:cached
-- KEYS[2] the rebuild lock  P:{KEY}:rebuild
-- KEYS[3] the last rebuild failure  P:{KEY}:cached:failed
-- returns 1 an entry was deleted, 0 there was none;
--         -1, -2, -3: KEYS[-n] is someone else's data (left alone, and
--         nothing else done)
if not entry_or_none(KEYS[1]) then
  return -1
end
local owner, fence = rebuild_holding(KEYS[2])
if owner == false then
  return -2
end
if failure(KEYS[3]) == false then
  return -3
end
if fence then
  redis.call('HSET', KEYS[2], 'invalidated', fence)
end
redis.call('DEL', KEYS[3])
return redis.call('DEL', KEYS[1])
