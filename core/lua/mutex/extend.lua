-- extend: reset the lease of a lock this owner holds.
-- (common.lua and holding.lua are prepended: now_ms, held_count.)
-- KEYS[1] lock hash  P:{NAME}
-- KEYS[2] forced-release marks  P:{NAME}:forced  (see release.lua)
-- ARGV[1] owner id
-- ARGV[2] new lease in milliseconds
-- ARGV[3] (optional) the fencing token of the holding to extend; absent or
--         "0": whichever holding this owner has
-- returns 1 when extended,
--         -1 when the lock is gone (its lease ended),
--         -2 when someone else holds it (never touched),
--         -3 when an operator's forced release ended this holding (named by
--            its token): the lock handed on with it, or its mark still runs
local held, refused, previous = held_count(KEYS[1], ARGV[1], ARGV[3])
if not held then
  local fence = ARGV[3]
  if fence and fence ~= '0' then
    local holding = ARGV[1] .. ':' .. fence
    if previous == 'forced:' .. holding then
      return -3
    end
    if KEYS[2] and redis.call('TYPE', KEYS[2])['ok'] == 'hash' then
      local mark = tonumber(redis.call('HGET', KEYS[2], holding))
      if mark and mark > now_ms() then
        return -3
      end
    end
  end
  return refused
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
