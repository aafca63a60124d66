-- cached/read: one read of a cache entry, and what a caller needs to decide
-- whether to use it, wait for a rebuild, or rebuild: one round trip on a hit.
-- (common.lua and cache/lib.lua are prepended.)
-- KEYS[1] the entry  P:{KEY}:cached
-- KEYS[2] the rebuild lock  P:{KEY}:rebuild  (a mutex hash, see mutex/acquire.lua)
-- KEYS[3] the last rebuild failure  P:{KEY}:cached:failed
-- returns {state, value, format, fence, fresh_ms, took_ms, lock_fence,
--          lock_pttl, failed_fence, failed_message}
--   state 0: no entry; 1: an entry with a value; 2: a negative entry (the
--         loader found nothing); -1, -2, -3: KEYS[-state] is someone else's
--         data (never read as ours, never overwritten)
--   fresh_ms  how long the entry stays fresh (<= 0: stale by that much)
--   lock_fence  the fencing token of the rebuild in progress (0: none)
--   lock_pttl   its remaining lease in ms (-2: none; -1: no expiry)
--   failed_fence, failed_message  the last failed rebuild (0, '': none)
local function foreign(i)
  return {-i, false, '', 0, 0, 0, 0, -2, 0, ''}
end
if not entry_or_none(KEYS[1]) then
  return foreign(1)
end
local owner, lock_fence = rebuild_holding(KEYS[2])
if owner == false then
  return foreign(2)
end
local failed_fence, failed_message = failure(KEYS[3])
if failed_fence == false then
  return foreign(3)
end
local state, value, format, fence, fresh_ms, took = 0, false, '', 0, 0, 0
local e = redis.call('HMGET', KEYS[1], 'value', 'format', 'fence', 'fresh', 'took', 'none')
if e[3] then
  state = (e[6] == '1') and 2 or 1
  value = e[1] or ''
  format = e[2] or ''
  fence = tonumber(e[3])
  fresh_ms = (tonumber(e[4]) or 0) - now_ms()
  took = tonumber(e[5]) or 0
end
local lock_pttl = -2
if lock_fence then
  lock_pttl = redis.call('PTTL', KEYS[2])
else
  lock_fence = 0
end
return {state, value, format, fence, fresh_ms, took, lock_fence, lock_pttl,
  failed_fence, failed_message}
