-- cache/lib: functions the cache scripts share (prepended, after
-- common.lua, to each of cache/*.lua when the core loads them; it does
-- nothing on its own).
--
-- A cache entry  P:{KEY}:cached  is a hash:
--   value   the bytes the loader produced (absent when it produced none)
--   format  how the face that wrote it encoded them (bytes, text, json, ...)
--   fence   the fencing token of the rebuild that wrote it
--   fresh   when it turns stale, in the server's ms (TIME)
--   took    how long that rebuild took, in ms (for early refresh)
--   none    '1' when the loader found nothing (a negative entry)
-- Its PEXPIRE is the end of its stale window (its fresh time when it has
-- none). A key of these names that does not have this shape (another type,
-- a hash without a fence, a failure that is not "<token> <message>") is
-- someone else's data: reported, never overwritten.

-- The type of `key` ('none' when it does not exist).
local function type_of(key)
  return redis.call('TYPE', key)['ok']
end

-- Whether `key` is absent or an entry (a hash with a numeric fence).
local function entry_or_none(key)
  local t = type_of(key)
  return t == 'none' or (t == 'hash' and tonumber(redis.call('HGET', key, 'fence')) ~= nil)
end

-- The rebuild lock's holding: its owner and token (nil, nil: free), or
-- false when the key is someone else's (another type, or a hash that is no
-- mutex holding).
local function rebuild_holding(key)
  local t = type_of(key)
  if t == 'none' then
    return nil, nil
  end
  if t ~= 'hash' then
    return false
  end
  local h = redis.call('HMGET', key, 'owner', 'fence')
  local fence = tonumber(h[2])
  if not h[1] or not fence then
    return false
  end
  return h[1], fence
end

-- The last failed rebuild: its token and message (0, '': none), or false
-- when the key is someone else's.
local function failure(key)
  local t = type_of(key)
  if t == 'none' then
    return 0, ''
  end
  if t ~= 'string' then
    return false
  end
  local f = redis.call('GET', key)
  local sp = string.find(f, ' ', 1, true)
  local fence = sp and tonumber(string.sub(f, 1, sp - 1))
  if not fence then
    return false
  end
  return fence, string.sub(f, sp + 1)
end
