-- acquire: take the lock, or re-enter it when this owner already holds it.
-- (queue.lua is prepended: queue_head, queue_pop, take.)
-- KEYS[1] lock hash  P:{NAME}        fields owner, count, fence; PEXPIRE = lease
-- KEYS[2] fence counter P:{NAME}:fence   INCR once per fresh acquisition, never expires
-- KEYS[3] waiting line  P:{NAME}:queue   (fair mode; see queue.lua)
-- KEYS[4] their leases  P:{NAME}:leases
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- ARGV[3] "-1" normally; on a retry after a reply was lost (or whenever an
--         earlier attempt may have landed: Redlock, fair waiters), the
--         re-entry count the caller held before: a count above it means that
--         acquisition was applied already and must not be counted twice
-- ARGV[4] "1": join the waiting line when the lock is busy (a fair waiter
--         whose waiter channel is subscribed); "0": do not
-- ARGV[5] waiter channel prefix P:{NAME}:w:
-- ARGV[6] NUMSUB, or SHARDNUMSUB on Redis Cluster
-- returns {1, fence, count} when held by ARGV[1] afterwards,
--         {0, pttl, queued} otherwise (pttl -1: the key has no expiry;
--         queued 1 when waiters stand in line, whose handoffs send no
--         release message: a waiter that hears it joins the line too)
local owner = ARGV[1]
-- Neither a lock nor a line: the common case, answered by one read.
if redis.call('EXISTS', KEYS[1], KEYS[3]) == 0 then
  return {1, take(KEYS[1], KEYS[2], owner, ARGV[2]), 1}
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  -- Free, but a live waiter may be first in line (the last lease ran out
  -- instead of being released): nobody barges past it.
  local head = queue_head(KEYS[3], KEYS[4], ARGV[5], ARGV[6])
  if head == nil or head == owner then
    if head == owner then
      queue_pop(KEYS[3], KEYS[4], owner)
    end
    return {1, take(KEYS[1], KEYS[2], owner, ARGV[2]), 1}
  end
elseif kind == 'hash' and redis.call('HGET', KEYS[1], 'owner') == owner then
  -- a key of another type (a plain SET NX lock of older code) is someone
  -- else's lock, never this owner's
  local count = tonumber(redis.call('HGET', KEYS[1], 'count'))
  local before = tonumber(ARGV[3])
  if before < 0 or count <= before then
    count = redis.call('HINCRBY', KEYS[1], 'count', 1)
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'fence')), count}
end
if ARGV[4] == '1' and redis.call('HSETNX', KEYS[4], owner, ARGV[2]) == 1 then
  redis.call('RPUSH', KEYS[3], owner)
end
if kind == 'none' then
  -- the waiter first in line takes it on its next attempt
  return {0, 20, 1}
end
local queued = 0
if redis.call('LLEN', KEYS[3]) > 0 then
  queued = 1
end
return {0, redis.call('PTTL', KEYS[1]), queued}
