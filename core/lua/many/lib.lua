-- many/lib: the state of a read-write lock or a semaphore, which many
-- holders share, each under its own lease (prepended, after common.lua and
-- mutex/queue.lua, to the scripts of this folder; it does nothing on its
-- own).
--
-- B        HASH  one field per holding: owner id -> "count fence permits"
--                (count: re-entries; permits: a semaphore holding's share,
--                0 for a read-write lock's); and
--                '~permits' a semaphore's size, '~used' the permits held,
--                '~writer' the owner id of a read-write lock's writer
-- B:until  ZSET  owner id -> when its lease ends, in the server's ms (TIME):
--                one key cannot carry one PEXPIRE per holder. A lease that
--                ended is reaped by the next script that runs; B and
--                B:until expire with the longest lease.
-- B:queue, B:leases  the waiting line as for the mutex (mutex/queue.lua), but a
--                waiter's entry in B:leases is "lease permits size" (size:
--                the semaphore's size as that waiter knows it, 0 for a
--                read-write lock's waiter).
-- Owner ids of a read-write lock end in '/r' (a read holding) or '/w' (the
-- write holding); the rest of the id is the owner, so that one owner's read
-- and write holdings are told apart and known to be one owner's.
-- (B, KEYS[1] of every script here, stands for P:{NAME}:rwlock or
-- P:{NAME}:semaphore: which of the two, its name says.)

local SEMAPHORE = string.sub(KEYS[1], -10) == ':semaphore'

-- 's' a semaphore holder; of a read-write lock 'r' a reader, and 'w' a
-- writer (an id that ends in neither counts as a writer: nobody beside it).
local function side_of(owner)
  if SEMAPHORE then
    return 's'
  elseif string.sub(owner, -2) == '/r' then
    return 'r'
  end
  return 'w'
end

-- The owner id of the other side of a read-write lock's owner.
local function other_side(owner, side)
  return string.sub(owner, 1, -2) .. side
end

-- count, fence, permits of `owner`'s holding, or nil.
local function holding_of(holders, owner)
  local value = redis.call('HGET', holders, owner)
  if not value then
    return nil
  end
  local count, fence, permits = string.match(value, '^(%d+) (%d+) (%d+)$')
  return tonumber(count), tonumber(fence), tonumber(permits)
end

local function put(holders, owner, count, fence, permits)
  redis.call('HSET', holders, owner, string.format('%d %d %d', count, fence, permits))
end

local function set_until(untils, owner, now, lease)
  redis.call('ZADD', untils, string.format('%d', now + lease), owner)
end

-- Ends one holding and gives back its share.
local function drop(holders, untils, owner, permits)
  redis.call('HDEL', holders, owner)
  redis.call('ZREM', untils, owner)
  if permits and permits > 0 then
    redis.call('HINCRBY', holders, '~used', -permits)
  end
  if redis.call('HGET', holders, '~writer') == owner then
    redis.call('HDEL', holders, '~writer')
  end
end

-- Ends every holding whose lease ended; how many.
local function reap(holders, untils, now)
  local ended = redis.call('ZRANGEBYSCORE', untils, '-inf', now)
  for _, owner in ipairs(ended) do
    local _, _, permits = holding_of(holders, owner)
    drop(holders, untils, owner, permits)
  end
  return #ended
end

-- B and B:until live as long as the longest lease; gone with the last holder.
local function keep_alive(holders, untils, now)
  local last = redis.call('ZRANGE', untils, -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', holders, untils)
    return
  end
  local ms = math.max(tonumber(last[2]) - now, 1)
  redis.call('PEXPIRE', holders, ms)
  redis.call('PEXPIRE', untils, ms)
end

-- The semaphore's size stored while anyone holds it, or nil.
local function stored_size(holders)
  return tonumber(redis.call('HGET', holders, '~permits'))
end

-- Whether `owner` may hold now, asking `permits`, beside those who do:
-- a semaphore holder when enough permits are free; a reader when no writer
-- holds (other than this owner); a writer when nobody holds (its own read
-- holding, left from before, does not count: an upgrade is refused before
-- it is asked).
local function fits(holders, untils, owner, permits, size)
  local side = side_of(owner)
  if side == 's' then
    return (tonumber(redis.call('HGET', holders, '~used')) or 0) + permits <= size
  end
  local writer = redis.call('HGET', holders, '~writer')
  if side == 'r' then
    return not writer or writer == other_side(owner, 'w')
  end
  local inside = redis.call('ZCARD', untils)
  return inside == 0
    or (inside == 1 and redis.call('ZSCORE', untils, other_side(owner, 'r')) ~= false)
end

-- Makes `owner` a holder of `permits` with the token `fence`.
local function enter(holders, untils, owner, fence, permits, lease, now, size)
  put(holders, owner, 1, fence, permits)
  set_until(untils, owner, now, lease)
  if permits > 0 then
    redis.call('HINCRBY', holders, '~used', permits)
  end
  if side_of(owner) == 'w' then
    redis.call('HSET', holders, '~writer', owner)
  end
  if size > 0 then
    redis.call('HSETNX', holders, '~permits', size)
  end
end

-- What a waiter in line asked for: its lease, permits and the size it knows,
-- or nil when the entry is not valid (written by something else).
local function asked_by(leases, owner)
  local value = redis.call('HGET', leases, owner)
  if type(value) ~= 'string' then
    return nil
  end
  local lease, permits, size = string.match(value, '^(%d+) (%d+) (%d+)$')
  lease, permits, size = tonumber(lease), tonumber(permits), tonumber(size)
  if valid_lease(lease) and permits and size then
    return lease, permits, size
  end
  return nil
end

-- Whether the line's keys hold what this protocol writes (or nothing): a key
-- of another type makes the line count as empty, and nothing is written to it.
local function line_usable(k)
  local queue = redis.call('TYPE', k.queue)['ok']
  local leases = redis.call('TYPE', k.leases)['ok']
  return (queue == 'list' or queue == 'none') and (leases == 'hash' or leases == 'none')
end

-- When one of B and B:until is gone without the other (evicted, deleted
-- from outside; the scripts write, expire and delete them together), who
-- holds is unknown: the ms until the one left ends, during which nobody is
-- let in nor the line served. nil when they agree. (Asked before a script
-- writes: in between, its own writes may part them for a moment.)
local function torn(k)
  local holders, untils = redis.call('EXISTS', k.holders), redis.call('EXISTS', k.untils)
  if holders == untils then
    return nil
  end
  local left = redis.call('PTTL', holders == 1 and k.holders or k.untils)
  if left < 1 then
    left = 20
  end
  return left
end

-- Hands what is free to the waiters at the head of the line, in order, each
-- told on its client's waiter channel: as many semaphore waiters as the free
-- permits serve, every reader up to the first writer, or one writer (and
-- that writer's own read, asked beside it). Stops
-- at the first live waiter that does not fit, so a large request is never
-- passed over by smaller ones behind it. Dead entries are dropped on the way,
-- and so are a semaphore's waiters that know another size than the stored
-- one (their next attempt tells them so). How many it served.
local function serve_line(k, prefix, numsub, publish, now)
  local served = 0
  if not line_usable(k) then
    return 0
  end
  local writer
  while true do
    local owner = redis.call('LINDEX', k.queue, 0)
    if not owner or (writer and owner ~= other_side(writer, 'r')) then
      break
    end
    local lease, permits, known = asked_by(k.leases, owner)
    local size = stored_size(k.holders) or known
    local live = lease and size == known and waiter_alive(prefix, numsub, owner)
      and not holding_of(k.holders, owner)
    if live then
      if not fits(k.holders, k.untils, owner, permits, size) then
        break
      end
      local fence = next_fence(k.fence)
      if not fence then
        break
      end
      enter(k.holders, k.untils, owner, fence, permits, lease, now, size)
      served = served + 1
      local client = string.match(owner, '^[^:]*')
      redis.call(publish, prefix .. client, handoff_message(fence, lease, owner))
    end
    redis.call('LPOP', k.queue)
    redis.call('HDEL', k.leases, owner)
    if live and side_of(owner) == 'w' then
      writer = owner
    end
  end
  if served > 0 then
    keep_alive(k.holders, k.untils, now)
  end
  return served
end

-- Whether a semaphore newcomer taking `permits` leaves the head of the line
-- fewer than it waits for (then it waits behind it: a large request is
-- never starved by a stream of small ones).
local function delays_head(k, permits)
  local head = redis.call('LINDEX', k.queue, 0)
  if not head then
    return false
  end
  local _, asked = asked_by(k.leases, head)
  local used = tonumber(redis.call('HGET', k.holders, '~used')) or 0
  local size = stored_size(k.holders) or 0
  return asked ~= nil and used + asked + permits > size
end

-- Whether a writer waits in line (a new reader then waits behind it).
local function writer_waiting(queue)
  for _, owner in ipairs(redis.call('LRANGE', queue, 0, -1)) do
    if side_of(owner) == 'w' then
      return true
    end
  end
  return false
end
