-- cached/read: one read of a cache entry, and what a caller needs to decide
-- whether to use it, wait for a rebuild, or rebuild: one round trip on a hit.
-- (cached/lib.lua is prepended: now_ms, type_of.)
-- KEYS[1] the entry  P:{KEY}:cached
-- KEYS[2] the rebuild lock  P:{KEY}:rebuild  (a mutex hash, see acquire.lua)
-- KEYS[3] the last rebuild failure  P:{KEY}:cached:failed
-- returns {state, value, format, fence, fresh_ms, took_ms, lock_fence,
--          lock_pttl, failed_fence, failed_message}
--   state 0: no entry; 1: an entry with a value; 2: a negative entry (the
--         loader found nothing); -1, -2, -3: KEYS[state * -1] holds a value
--         of another type (someone else's data: never read as an entry,
--         never overwritten)
--   fresh_ms  how long the entry stays fresh (<= 0: stale by that much)
--   lock_fence  the fencing token of the rebuild in progress (0: none)
--   lock_pttl   its remaining lease in ms (-2: none; -1: no expiry)
--   failed_fence, failed_message  the last failed rebuild (0, '' : none)
for i = 1, 3 do
  local t = type_of(KEYS[i])
  local want = (i == 3) and 'string' or 'hash'
  if t ~= 'none' and t ~= want then
    return {-i, false, '', 0, 0, 0, 0, -2, 0, ''}
  end
end
local state, value, format, fence, fresh_ms, took = 0, false, '', 0, 0, 0
local e = redis.call('HMGET', KEYS[1], 'value', 'format', 'fence', 'fresh', 'took', 'none')
if e[3] then
  state = (e[6] == '1') and 2 or 1
  value = e[1] or ''
  format = e[2] or ''
  fence = tonumber(e[3]) or 0
  fresh_ms = (tonumber(e[4]) or 0) - now_ms()
  took = tonumber(e[5]) or 0
end
local lock_fence, lock_pttl = 0, -2
local holder = redis.call('HGET', KEYS[2], 'fence')
if holder then
  lock_fence = tonumber(holder) or 0
  lock_pttl = redis.call('PTTL', KEYS[2])
end
local failed_fence, failed_message = 0, ''
local f = redis.call('GET', KEYS[3])
if f then
  local sp = string.find(f, ' ', 1, true)
  if sp then
    failed_fence = tonumber(string.sub(f, 1, sp - 1)) or 0
    failed_message = string.sub(f, sp + 1)
  end
end
return {state, value, format, fence, fresh_ms, took, lock_fence, lock_pttl,
  failed_fence, failed_message}
