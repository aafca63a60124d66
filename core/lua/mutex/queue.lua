-- queue: the waiting line of one lock, shared by the scripts that take or
-- hand over a lock (prepended, after common.lua, to acquire.lua and
-- release.lua when the core loads them; it does nothing on its own).
--
-- P:{NAME}:queue   LIST of waiting owner ids, in arrival order
-- P:{NAME}:leases  HASH owner id -> the lease (ms) that waiter asked for, and
--                   'since:' .. owner id -> when it joined (Redis' clock, ms)
-- A waiter is alive while its client is subscribed to its waiter channel
-- P:{NAME}:w:<client id> (the owner id up to its first ':'): a crashed or
-- disconnected client drops out of the line at once, and a waiting line
-- costs no commands to keep alive.
--
-- An emptied line takes its leases hash with it: whatever is left there (a
-- join time an earlier build did not remove) belongs to nobody in line.
--
-- A line key holding a value of another type (written by something else)
-- makes the line count as empty: nobody is handed the lock through it and
-- nobody joins it, and nothing is written to it; the lock itself still works.
--
-- It also holds the owner's view that those scripts' requests carry (the
-- re-entry count the owner believes it holds before the request, the same
-- on every send), so a request sent again after a lost reply is answered,
-- not applied twice: re_entered and release_count.

-- Whether an acquisition by the holder counts as one more re-entry: not
-- when Redis' count is past the owner's view `before` already (this request
-- was applied, its reply lost, or the lock was handed to it meanwhile);
-- `before` -1: count it whatever the count.
local function re_entered(count, before)
  return before < 0 or count <= before
end

-- The count a release undoes, from Redis' `count` and the owner's view
-- `before` (-1: unknown, the count as Redis has it); or nil and the count to
-- answer, when it is below the view: this release was applied already.
local function release_count(count, before)
  if before > 0 then
    if count < before then
      return nil, count
    end
    -- More than the owner believes: a re-entry whose reply it never got
    -- (both sends failed) was never granted to it, and counts for nothing.
    return before
  end
  return count
end

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
    redis.call('HDEL', leases_key, owner, 'since:' .. owner)
    owner = redis.call('LINDEX', queue_key, 0)
  end
  redis.call('DEL', leases_key)
  return nil
end

-- Takes `owner` out of the line (it is at its head).
local function queue_pop(queue_key, leases_key, owner)
  redis.call('LPOP', queue_key)
  redis.call('HDEL', leases_key, owner, 'since:' .. owner)
  if redis.call('LLEN', queue_key) == 0 then
    redis.call('DEL', leases_key)
  end
end

-- Takes out of the line the owners named in ARGV from index `first` on:
-- waiters of the calling client that left the line without its dequeue
-- being confirmed (its reply lost, or Redis unreachable then). Their client
-- still listens on its waiter channel while it has other waiters on this
-- name, so such an entry would look alive; it goes before the request does
-- anything else. A line key of another type has no entry to take out.
local function drop_left(queue_key, leases_key, first)
  if #ARGV < first then
    return
  end
  for i = first, #ARGV do
    redis.pcall('LREM', queue_key, 0, ARGV[i])
    redis.pcall('HDEL', leases_key, ARGV[i], 'since:' .. ARGV[i])
  end
  if redis.call('TYPE', queue_key)['ok'] == 'none' and redis.call('TYPE', leases_key)['ok'] == 'hash' then
    redis.call('DEL', leases_key)
  end
end

-- What a waiter in line is told when the lock is handed to it: its token,
-- the lease Redis set (the one it asked for in line, which its holder never
-- takes as longer than its own) and its owner id, last as it may hold any
-- character: 'handoff <fence> <lease ms> <owner>'.
local function handoff_message(fence, lease_ms, owner)
  return string.format('handoff %d %d %s', fence, lease_ms, owner)
end

-- GET of a fence counter: nil when absent or of another type (the script
-- goes on without it); any other failure (an ACL without GET, say) is the
-- script's error, never read as a counter of 0.
local function counter_value(key)
  local value = redis.pcall('GET', key)
  if type(value) == 'table' and value['err'] then
    if string.sub(value['err'], 1, 9) ~= 'WRONGTYPE' then
      error(value)
    end
    return nil
  end
  return value
end

-- The per-name counter of earlier builds (P:{NAME}:fence) as a number, or
-- nil when absent or anything but a whole number of up to 15 characters,
-- which Lua's numbers hold exactly (such a key is left as it is).
local function legacy_fence(legacy_key)
  local value = counter_value(legacy_key)
  if value and #value <= 15 and string.match(value, '^%-?%d+$') then
    return tonumber(value)
  end
  return nil
end

-- The last fencing token issued for this name's slot: the slot counter or
-- the legacy one, whichever is larger (0: none, or neither holds a number;
-- no `legacy_key` for a kind of lock that never had one).
local function issued_fence(fence_key, legacy_key)
  local issued = tonumber(counter_value(fence_key)) or 0
  return math.max(issued, legacy_key and legacy_fence(legacy_key) or 0)
end

-- The next fencing token, or nil when the counter holds something else than
-- an integer (then nothing was written). The counter is the slot's, shared
-- by every name of it: a name's tokens grow, but with gaps. The name's
-- legacy counter is folded in: the token is above it too, and it is deleted
-- (the slot counter, raised to it, stands for it from then on); no
-- `legacy_key` when the caller knows it absent.
local function next_fence(fence_key, legacy_key)
  -- read first: a failing read must leave nothing written
  local legacy = legacy_key and legacy_fence(legacy_key)
  local fence = redis.pcall('INCR', fence_key)
  if type(fence) == 'table' and fence['err'] then
    -- Only a counter that is not a number is answered as one (nothing was
    -- written); a refusal by an ACL or maxmemory is the script's error.
    local err = fence['err']
    if string.sub(err, 1, 9) == 'WRONGTYPE' or string.find(err, 'not an integer', 1, true) then
      return nil
    end
    error(fence)
  end
  if legacy then
    if legacy >= fence then
      fence = legacy + 1
      redis.call('SET', fence_key, string.format('%d', fence))
    end
    redis.call('DEL', legacy_key)
  end
  return fence
end

-- Makes `owner` the holder with the token `fence`; `previous` names the
-- holding that handed it over ('owner:fence'), so that holder's release,
-- sent again after its reply was lost, knows it was applied. `since` (Redis'
-- clock, ms) tells inspection how long it has been held.
local function take(lock_key, owner, fence, lease_ms, previous)
  local since = string.format('%d', now_ms())
  if previous then
    redis.call('HSET', lock_key, 'owner', owner, 'count', 1, 'fence', fence, 'since', since,
      'previous', previous)
  else
    redis.call('HSET', lock_key, 'owner', owner, 'count', 1, 'fence', fence, 'since', since)
  end
  redis.call('PEXPIRE', lock_key, lease_ms)
  return fence
end

-- Hands the lock at `lock_key` to `head`, the first live waiter in line,
-- under the lease it asked for, and tells it on its client's waiter channel
-- (`publish`: PUBLISH, or SPUBLISH on Redis Cluster).
local function hand_over(lock_key, queue_key, leases_key, head, lease_ms, fence, previous,
                         publish, channel_prefix)
  queue_pop(queue_key, leases_key, head)
  take(lock_key, head, fence, lease_ms, previous)
  local client = string.match(head, '^[^:]*')
  redis.call(publish, channel_prefix .. client, handoff_message(fence, lease_ms, head))
end
