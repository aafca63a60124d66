-- holding: whether an owner holds a lock, for the scripts that act only for
-- the holder (prepended to release.lua and extend.lua when the core loads
-- them; it does nothing on its own).

-- The re-entry count of `owner`'s holding of the lock at `key` (of the
-- holding with fencing token `fence`, unless that is '0' or nil); or nil and
-- why not: -1 when the lock is gone (its lease ended), -2 when someone else
-- holds it (a key of another type, say a plain SET NX lock of older code,
-- counts as someone else's, and so does another holding of the same owner),
-- then with -2 the holding that handed the lock to its holder ('owner:fence').
-- One read answers the common case; HMGET on a key that is no hash fails
-- with WRONGTYPE, which means that refusal, and any other failure (an ACL
-- without HMGET, say) is the script's error.
local function held_count(key, owner, fence)
  local got = redis.pcall('HMGET', key, 'owner', 'count', 'fence', 'previous')
  if got['err'] then
    if string.sub(got['err'], 1, 9) ~= 'WRONGTYPE' then
      error(got)
    end
    return nil, -2
  end
  if got[1] == owner and (fence == nil or fence == '0' or got[3] == fence) then
    return tonumber(got[2]) or 1
  end
  if not got[1] and redis.call('EXISTS', key) == 0 then
    return nil, -1
  end
  return nil, -2, got[4]
end
