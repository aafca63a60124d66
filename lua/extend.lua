-- extend: reset the lease of a lock this owner holds.
-- KEYS[1] lock hash  P:{NAME}
-- ARGV[1] owner id
-- ARGV[2] new lease in milliseconds
-- returns 1 when extended,
--         -1 when the lock is gone (its lease ended),
--         -2 when someone else holds it (never touched)
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return -1
end
if kind ~= 'hash' or redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return -2
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
