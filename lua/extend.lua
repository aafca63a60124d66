-- extend: reset the lease of a lock this owner holds.
-- (holding.lua is prepended: held_count.)
-- KEYS[1] lock hash  P:{NAME}
-- ARGV[1] owner id
-- ARGV[2] new lease in milliseconds
-- ARGV[3] (optional) the fencing token of the holding to extend; absent or
--         "0": whichever holding this owner has
-- returns 1 when extended,
--         -1 when the lock is gone (its lease ended),
--         -2 when someone else holds it (never touched)
local held, refused = held_count(KEYS[1], ARGV[1], ARGV[3])
if not held then
  return refused
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
