-- acquire: take a share of a read-write lock or semaphore (a read, the write,
-- or permits), or re-enter the one this owner holds.
-- (common.lua, mutex/queue.lua and many/lib.lua are prepended.)
-- KEYS[1] holders  B            (see many/lib.lua)
-- KEYS[2] leases   B:until
-- KEYS[3] fence counter  P:fence{T} of the slot of B (as for the mutex)
-- KEYS[4] waiting line   B:queue
-- KEYS[5] what each waiter asked for  B:leases
-- ARGV[1] owner id ('/r' or '/w' at its end for a read-write lock)
-- ARGV[2] lease in milliseconds
-- ARGV[3] the re-entry count this owner believes it holds before this
--         request (as for the mutex's acquire.lua; "-1": count a re-entry)
-- ARGV[4] "1": join the waiting line when it cannot hold now
-- ARGV[5] waiter channel prefix B:w:
-- ARGV[6] NUMSUB, or SHARDNUMSUB on Redis Cluster
-- ARGV[7] PUBLISH, or SPUBLISH on Redis Cluster (leases that ended free
--         permits, which go to the line first)
-- ARGV[8] permits asked (a semaphore; 0 for a read-write lock)
-- ARGV[9] the semaphore's size (0 for a read-write lock)
-- ARGV[10] "1": fair, nobody passes a waiter in line; "0": a newcomer that
--         fits holds at once, except a reader while a writer waits in line
--         and a semaphore holder taking what the head of the line waits for
-- ARGV[11..] owners of this client that left the line unconfirmed: taken
--         out of it first (see drop_left in mutex/queue.lua)
-- returns {1, fence, count} when held by ARGV[1] afterwards;
--         {0, retry_ms, queued, bad, issued} otherwise, as the mutex's
--         (retry_ms: until the earliest lease of a holder ends);
--         {2, size} when the semaphore's stored size is another;
--         {3, permits} when this owner holds another number of permits.
local k = { holders = KEYS[1], untils = KEYS[2], fence = KEYS[3], queue = KEYS[4], leases = KEYS[5] }
local owner, lease = ARGV[1], tonumber(ARGV[2])
local permits, size = tonumber(ARGV[8]), tonumber(ARGV[9])
local prefix, numsub, publish = ARGV[5], ARGV[6], ARGV[7]
drop_left(k.queue, k.leases, 11)
-- Keys of another type (written by something else) stop the lock being
-- taken, and nothing is written.
local probe = redis.pcall('HGET', k.holders, owner)
if type(probe) == 'table' and probe['err'] then
  return {0, 20, 0, 1, 0}
end
probe = redis.pcall('ZSCORE', k.untils, owner)
if type(probe) == 'table' and probe['err'] then
  return {0, 20, 0, 2, 0}
end
local blind = torn(k)
if blind then
  return {0, blind, 0, 0, 0}
end
local waiting = 0
local bad = 0
if line_usable(k) then
  waiting = redis.call('LLEN', k.queue)
elseif redis.call('TYPE', k.leases)['ok'] == 'hash' or redis.call('TYPE', k.leases)['ok'] == 'none' then
  bad = 4
else
  bad = 5
end
local now = now_ms()
reap(k.holders, k.untils, now)
if waiting > 0 then
  -- What leases that ended freed goes to the line before any newcomer.
  serve_line(k, prefix, numsub, publish, now)
  waiting = redis.call('LLEN', k.queue)
end
-- Another size than the holders' is refused, to a holder re-entering too.
if size > 0 then
  local stored = stored_size(k.holders)
  if stored and stored ~= size then
    return {2, stored}
  end
end
local count, fence, held = holding_of(k.holders, owner)
if count then
  -- A re-entry, or a share the line handed this owner (then its message
  -- is on its way, and this is no new acquisition).
  if side_of(owner) == 's' and held ~= permits then
    return {3, held}
  end
  if re_entered(count, tonumber(ARGV[3])) then
    count = count + 1
    put(k.holders, owner, count, fence, held)
  end
  set_until(k.untils, owner, now, lease)
  keep_alive(k.holders, k.untils, now)
  return {1, fence, count}
end
local side = side_of(owner)
-- The writer reading: nobody waiting may come between it and itself.
local writes = side == 'r' and redis.call('HEXISTS', k.holders, other_side(owner, 'w')) == 1
local passes = writes
  or waiting == 0
  or (ARGV[10] ~= '1' and not (side == 'r' and writer_waiting(k.queue))
      and not (side == 's' and delays_head(k, permits)))
if passes and fits(k.holders, k.untils, owner, permits, size) then
  fence = next_fence(k.fence)
  if not fence then
    return {0, 20, 0, 3, 0}
  end
  enter(k.holders, k.untils, owner, fence, permits, lease, now, size)
  if waiting > 0 then
    redis.call('LREM', k.queue, 0, owner)
    redis.call('HDEL', k.leases, owner)
  end
  keep_alive(k.holders, k.untils, now)
  return {1, fence, 1}
end
if ARGV[4] == '1' and bad == 0 then
  -- A place kept from an earlier wait of this owner (its leaving failed)
  -- takes this wait's lease and permits.
  local asked = string.format('%d %d %d', lease, permits, size)
  if redis.call('HSET', k.leases, owner, asked) == 1 then
    redis.call('RPUSH', k.queue, owner)
    waiting = waiting + 1
  end
end
local retry = 20
local first = redis.call('ZRANGE', k.untils, 0, 0, 'WITHSCORES')
if #first > 0 then
  retry = math.max(tonumber(first[2]) - now, 1)
end
local queued = 0
if waiting > 0 then
  queued = 1
end
return {0, retry, queued, bad, issued_fence(k.fence)}
