-- queue: the waiting line of one lock, shared by the scripts that take or
-- hand over a lock (prepended to acquire.lua and release.lua when the core
-- loads them; it does nothing on its own).
--
-- P:{NAME}:queue   LIST of waiting owner ids, in arrival order
-- P:{NAME}:leases  HASH owner id -> the lease (ms) that waiter asked for
-- A waiter is alive while its client is subscribed to its waiter channel
-- P:{NAME}:w:<client id> (the owner id up to its first ':'): a crashed or
-- disconnected client drops out of the line at once, and a waiting line
-- costs no commands to keep alive.
--
-- A line key holding a value of another type (written by something else)
-- makes the line count as empty: nobody is handed the lock through it and
-- nobody joins it, and nothing is written to it; the lock itself still works.

local function waiter_alive(channel_prefix, numsub, owner)
  local client = string.match(owner, '^[^:]*')
  local reply = redis.call('PUBSUB', numsub, channel_prefix .. client)
  return tonumber(reply[2]) > 0
end

-- Whether PEXPIRE takes `lease` (ms): a whole number, and not so large that
-- it overflows (a value written by something else must not fail the script
-- after it wrote).
local function valid_lease(lease)
  return lease ~= nil and lease > 0 and lease == math.floor(lease) and lease < 2 ^ 46
end

-- The first live waiter and the lease it asked for, dropping dead entries
-- ahead of it (a waiter no longer heard, or an entry without a valid lease);
-- nil when there is none or the line's keys hold other types.
local function queue_head(queue_key, leases_key, channel_prefix, numsub)
  local owner = redis.pcall('LINDEX', queue_key, 0)
  if type(owner) ~= 'string' then
    return nil
  end
  while owner do
    local lease = redis.pcall('HGET', leases_key, owner)
    if type(lease) == 'table' and lease['err'] then
      return nil
    end
    lease = tonumber(lease)
    if valid_lease(lease) and waiter_alive(channel_prefix, numsub, owner) then
      return owner, lease
    end
    redis.call('LPOP', queue_key)
    redis.call('HDEL', leases_key, owner)
    owner = redis.call('LINDEX', queue_key, 0)
  end
  return nil
end

-- Takes `owner` out of the line (it is at its head).
local function queue_pop(queue_key, leases_key, owner)
  redis.call('LPOP', queue_key)
  redis.call('HDEL', leases_key, owner)
end

-- The next fencing token, or nil when the counter holds something else than
-- an integer (then nothing was written). The counter is the slot's, shared
-- by every name of it: a name's tokens grow, but with gaps.
local function next_fence(fence_key)
  local fence = redis.pcall('INCR', fence_key)
  if type(fence) ~= 'number' then
    return nil
  end
  return fence
end

-- Makes `owner` the holder with the token `fence`; `previous` names the
-- holding that handed it over ('owner:fence'), so that holder's release,
-- sent again after its reply was lost, knows it was applied.
local function take(lock_key, owner, fence, lease_ms, previous)
  if previous then
    redis.call('HSET', lock_key, 'owner', owner, 'count', 1, 'fence', fence, 'previous', previous)
  else
    redis.call('HSET', lock_key, 'owner', owner, 'count', 1, 'fence', fence)
  end
  redis.call('PEXPIRE', lock_key, lease_ms)
  return fence
end
