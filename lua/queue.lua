-- queue: the fair-mode waiting line of one lock, shared by the scripts that
-- take or hand over a lock (prepended to acquire.lua and release.lua when the
-- core loads them; it does nothing on its own).
--
-- P:{NAME}:queue   LIST of waiting owner ids, in arrival order
-- P:{NAME}:leases  HASH owner id -> the lease (ms) that waiter asked for
-- A waiter is alive while its client is subscribed to its waiter channel
-- P:{NAME}:w:<client id> (the owner id up to its first ':'): a crashed or
-- disconnected client drops out of the line at once, and a waiting line
-- costs no commands to keep alive.

local function waiter_alive(channel_prefix, numsub, owner)
  local client = string.match(owner, '^[^:]*')
  local reply = redis.call('PUBSUB', numsub, channel_prefix .. client)
  return tonumber(reply[2]) > 0
end

-- The first live waiter (dropping dead ones ahead of it), or nil.
local function queue_head(queue_key, leases_key, channel_prefix, numsub)
  while true do
    local owner = redis.call('LINDEX', queue_key, 0)
    if not owner then
      return nil
    end
    if waiter_alive(channel_prefix, numsub, owner) then
      return owner
    end
    redis.call('LPOP', queue_key)
    redis.call('HDEL', leases_key, owner)
  end
end

-- Takes `owner` out of the line (it is at its head).
local function queue_pop(queue_key, leases_key, owner)
  redis.call('LPOP', queue_key)
  redis.call('HDEL', leases_key, owner)
end

-- Makes `owner` the holder with a fresh fencing token; returns the token.
local function take(lock_key, fence_key, owner, lease_ms)
  local fence = redis.call('INCR', fence_key)
  redis.call('HSET', lock_key, 'owner', owner, 'count', 1, 'fence', fence)
  redis.call('PEXPIRE', lock_key, lease_ms)
  return fence
end
