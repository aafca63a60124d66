-- cached/lib: functions the cache scripts share (prepended to each of
-- lua/cached/*.lua when the core loads them; it does nothing on its own).
--
-- A cache entry  P:{KEY}:cached  is a hash:
--   value   the bytes the loader produced (absent when it produced none)
--   format  how the face that wrote it encoded them (bytes, text, json, ...)
--   fence   the fencing token of the rebuild that wrote it
--   fresh   when it turns stale, in the server's ms (TIME)
--   took    how long that rebuild took, in ms (for early refresh)
--   none    '1' when the loader found nothing (a negative entry)
-- Its PEXPIRE is the end of its stale window (its fresh time when it has
-- none).

-- The server's clock in ms. Effects replication (the default from Redis 5
-- on) lets a script write after reading TIME.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The type of `key` ('none' when it does not exist).
local function type_of(key)
  return redis.call('TYPE', key)['ok']
end
