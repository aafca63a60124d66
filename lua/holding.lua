-- holding: whether an owner holds a lock, for the scripts that act only for
-- the holder (prepended to release.lua and extend.lua when the core loads
-- them; it does nothing on its own).

-- nil when `owner` holds the lock at `key`; otherwise -1 when the lock is gone
-- (its lease ended), -2 when someone else holds it (a key of another type, say
-- a plain SET NX lock of older code, counts as someone else's).
local function not_held_by(key, owner)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then
    return -1
  end
  if kind ~= 'hash' or redis.call('HGET', key, 'owner') ~= owner then
    return -2
  end
  return nil
end
