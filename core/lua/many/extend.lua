-- extend: reset the lease of a read-write lock's or semaphore's share this
-- owner holds. (common.lua, mutex/queue.lua and many/lib.lua are
-- prepended.)
-- KEYS[1] holders  B
-- KEYS[2] leases   B:until
-- ARGV[1] owner id
-- ARGV[2] new lease in milliseconds
-- ARGV[3] (optional) the fencing token of the holding to extend; absent or
--         "0": whichever this owner holds
-- returns 1 when extended, -1 when this owner holds nothing (its lease
--         ended), -2 when it holds under another token (or a key holds
--         another type)
local holders, untils, owner = KEYS[1], KEYS[2], ARGV[1]
local value = redis.pcall('HGET', holders, owner)
if type(value) == 'table' and value['err'] then
  return -2
end
local ends = redis.pcall('ZSCORE', untils, owner)
if type(ends) == 'table' and ends['err'] then
  return -2
end
local now = now_ms()
if not value or not ends or tonumber(ends) <= now then
  -- gone, or ended and not reaped yet (the next acquire or release does)
  return -1
end
local _, fence = holding_of(holders, owner)
if ARGV[3] and ARGV[3] ~= '0' and string.format('%d', fence or 0) ~= ARGV[3] then
  return -2
end
set_until(untils, owner, now, tonumber(ARGV[2]))
keep_alive(holders, untils, now)
return 1
