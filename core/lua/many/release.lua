-- release: undo one acquisition of a read-write lock's or semaphore's share
-- by this owner. The last one gives the share back and hands what is free to
-- the waiters at the head of the line (many/lib.lua's serve_line).
-- (common.lua, mutex/queue.lua and many/lib.lua are prepended.)
-- KEYS as many/acquire.lua's
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds, kept by the holding that remains after a
--         nested release
-- ARGV[3] PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4] waiter channel prefix B:w:
-- ARGV[5] NUMSUB, or SHARDNUMSUB on Redis Cluster
-- ARGV[6] the re-entry count this owner believes it holds before this
--         request (as for the mutex's release.lua; "-1": unknown)
-- ARGV[7] the fencing token of the holding to release ("0": whichever)
-- returns the re-entry count left (0: given back, by this request or, when
--           it is sent again, by its first send),
--         -1 when this owner holds nothing (its lease ended, or one of B
--           and B:until is gone without the other: see many/lib.lua's torn),
--         -2 when it holds under another token, or a key holds another type
local k = { holders = KEYS[1], untils = KEYS[2], fence = KEYS[3], queue = KEYS[4], leases = KEYS[5] }
local owner = ARGV[1]
local probe = redis.pcall('ZSCORE', k.untils, owner)
if type(probe) == 'table' and probe['err'] then
  return -2
end
probe = redis.pcall('HGET', k.holders, owner)
if type(probe) == 'table' and probe['err'] then
  return -2
end
if torn(k) then
  -- Its lease's record is gone (evicted): nothing is written until the key
  -- left expires, and the holding counts as ended.
  return -1
end
local function serve(now)
  serve_line(k, ARGV[4], ARGV[5], ARGV[3], now)
end
local now = now_ms()
if reap(k.holders, k.untils, now) > 0 then
  -- What leases that ended freed goes to the line, whatever this answers.
  serve(now)
  keep_alive(k.holders, k.untils, now)
end
local count, fence, permits = holding_of(k.holders, owner)
if not count then
  return -1
end
if ARGV[7] ~= '0' and string.format('%d', fence) ~= ARGV[7] then
  return -2
end
local answer
count, answer = release_count(count, tonumber(ARGV[6]) or -1)
if not count then
  return answer
end
if count > 1 then
  put(k.holders, owner, count - 1, fence, permits)
  set_until(k.untils, owner, now, tonumber(ARGV[2]))
  keep_alive(k.holders, k.untils, now)
  return count - 1
end
drop(k.holders, k.untils, owner, permits)
serve(now)
keep_alive(k.holders, k.untils, now)
return 0
