-- dequeue: a waiter of a read-write lock or semaphore leaves the line (it
-- timed out or was cancelled). Whoever waited behind it and fits now is
-- served (a large request leaving frees the way for smaller ones).
-- Idempotent: sent again, it answers as the first time.
-- (common.lua, mutex/queue.lua and many/lib.lua are prepended.)
-- KEYS as many/acquire.lua's
-- ARGV[1] owner id
-- ARGV[2] PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[3] waiter channel prefix B:w:
-- ARGV[4] NUMSUB, or SHARDNUMSUB on Redis Cluster
-- returns the fencing token when this owner was handed a share meanwhile
--         (the caller must pass it on: release.lua with that token), else 0
local k = { holders = KEYS[1], untils = KEYS[2], fence = KEYS[3], queue = KEYS[4], leases = KEYS[5] }
local owner = ARGV[1]
redis.pcall('LREM', k.queue, 0, owner)
redis.pcall('HDEL', k.leases, owner)
local kinds = { redis.call('TYPE', k.holders)['ok'], redis.call('TYPE', k.untils)['ok'] }
if (kinds[1] ~= 'hash' and kinds[1] ~= 'none') or (kinds[2] ~= 'zset' and kinds[2] ~= 'none') then
  return 0
end
if torn(k) then
  return 0
end
local now = now_ms()
reap(k.holders, k.untils, now)
serve_line(k, ARGV[3], ARGV[4], ARGV[2], now)
keep_alive(k.holders, k.untils, now)
local _, fence = holding_of(k.holders, owner)
return fence or 0
