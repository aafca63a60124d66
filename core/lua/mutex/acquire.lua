-- acquire: take the lock, or re-enter it when this owner already holds it.
-- (common.lua and queue.lua are prepended: now_ms, drop_left, queue_head,
-- queue_pop, hand_over, issued_fence, next_fence, take, re_entered.)
--
-- The fast path is an exception, kept on purpose: when neither the lock,
-- nor its line, nor a legacy counter exists (one EXISTS over KEYS[1],
-- KEYS[3], KEYS[5]), the lock is taken at once, without the steps every
-- other path goes through (TYPE of the lock, the head of the line, the
-- legacy counter folded in). It exists because a free lock nobody waits for
-- is the common case, and there one key read answers it. It is the only
-- path that skips them; any of those keys present sends the request down
-- the general path below. The scripts of many/ have no such path.
-- KEYS[1] lock hash  P:{NAME}        fields owner, count, fence; PEXPIRE = lease
-- KEYS[2] fence counter P:fence{T}   of the Cluster slot of P:{NAME} (T: the
--         smallest number in that slot), shared by every name of the slot;
--         INCR once per fresh acquisition, never expires
-- KEYS[3] waiting line  P:{NAME}:queue   (see queue.lua)
-- KEYS[4] their leases  P:{NAME}:leases
-- KEYS[5] legacy fence counter  P:{NAME}:fence  of earlier builds: folded
--         into KEYS[2] and deleted at the first token issued for the name
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- ARGV[3] the re-entry count this owner believes it holds before this
--         request (0: none). Sent as is on every send of one request: a
--         count above it means this request was applied already (its reply
--         was lost, or it was handed the lock meanwhile) and is not counted
--         again. "-1": count a re-entry whatever the count.
-- ARGV[4] "1": join the waiting line when the lock is busy (the owner's
--         client listens on its waiter channel); "0": do not
-- ARGV[5] waiter channel prefix P:{NAME}:w:
-- ARGV[6] NUMSUB, or SHARDNUMSUB on Redis Cluster
-- ARGV[7] PUBLISH, or SPUBLISH on Redis Cluster (a free lock with a live
--         waiter first in line is handed to it, see below)
-- ARGV[8..] owners of this client that left the line unconfirmed: taken out
--         of it first (see drop_left in queue.lua)
-- returns {1, fence, count} when held by ARGV[1] afterwards,
--         {0, pttl, queued, bad, issued} otherwise: pttl -1 when the key
--         has no expiry; queued 1 when waiters stand in line, whose
--         handoffs send no release message (a waiter that hears it joins
--         the line too); bad: the index in KEYS of a key holding a value of
--         another type (0: none; the fence counter's stops the lock being
--         taken, and nothing is written then; a line key's only the line);
--         issued: the last fencing token issued in the slot, or by the
--         legacy counter if that is larger, so a waiter in line knows a
--         handoff naming a token up to it for one that ended before this
--         attempt (a later one got a larger token, whatever other names of
--         the slot took meanwhile).
local owner = ARGV[1]
local fence
drop_left(KEYS[3], KEYS[4], 8)
-- The fast path (see the top): neither a lock nor a line nor a legacy
-- counter to fold, the common case, answered by one read.
if redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[5]) == 0 then
  fence = next_fence(KEYS[2])
  if not fence then
    return {0, 20, 0, 2, 0}
  end
  return {1, take(KEYS[1], owner, fence, ARGV[2]), 1}
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  -- Free, but a live waiter may be first in line (the last lease ran out
  -- instead of being released): nobody barges past it.
  local head, lease = queue_head(KEYS[3], KEYS[4], ARGV[5], ARGV[6])
  fence = next_fence(KEYS[2], KEYS[5])
  if not fence then
    return {0, 20, 0, 2, 0}
  end
  if head == nil or head == owner then
    if head == owner then
      queue_pop(KEYS[3], KEYS[4], owner)
    end
    return {1, take(KEYS[1], owner, fence, ARGV[2]), 1}
  end
  -- That waiter is handed the lock now, as a release would hand it: the
  -- lock never sits free behind a head that does not come for it (its
  -- client passes on a grant to an owner that no longer waits, and a head
  -- whose client stopped answering holds it no longer than its lease).
  hand_over(KEYS[1], KEYS[3], KEYS[4], head, lease, fence, nil, ARGV[7], ARGV[5])
  kind = 'hash'
elseif kind == 'hash' and redis.call('HGET', KEYS[1], 'owner') == owner then
  -- a key of another type (a plain SET NX lock of older code) is someone
  -- else's lock, never this owner's
  local count = tonumber(redis.call('HGET', KEYS[1], 'count')) or 1
  if re_entered(count, tonumber(ARGV[3])) then
    count = redis.call('HINCRBY', KEYS[1], 'count', 1)
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'fence')), count}
end
-- Busy. The line's length, read before joining it: an error means its key
-- holds another type, and then nobody joins it.
local waiting = redis.pcall('LLEN', KEYS[3])
local bad = 0
if type(waiting) ~= 'number' then
  waiting, bad = 0, 3
elseif ARGV[4] == '1' then
  -- Joining, or keeping a place: the entry takes this wait's lease (a place
  -- left by an earlier wait of this owner, whose leaving was lost, must not
  -- hand it that wait's lease).
  local new = redis.pcall('HSET', KEYS[4], owner, ARGV[2])
  if new == 1 then
    redis.call('RPUSH', KEYS[3], owner)
    -- When it joined, for inspection to say how long it has waited.
    redis.call('HSET', KEYS[4], 'since:' .. owner, string.format('%d', now_ms()))
    waiting = waiting + 1
  elseif type(new) ~= 'number' then
    bad = 4
  end
end
local issued = issued_fence(KEYS[2], KEYS[5])
local queued = 0
if waiting > 0 then
  queued = 1
end
return {0, redis.call('PTTL', KEYS[1]), queued, bad, issued}
