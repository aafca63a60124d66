-- release: undo one acquisition by this owner. The last one hands the lock
-- straight to the first live waiter in line and tells it on its waiter
-- channel, or frees the lock and announces it to all waiters.
-- (common.lua, holding.lua and queue.lua are prepended: now_ms, held_count,
-- queue_head, hand_over, next_fence, release_count.)
-- KEYS[1] lock hash  P:{NAME}
-- KEYS[2] release channel  P:{NAME}:released
-- KEYS[3] fence counter  P:fence{T} of the slot of P:{NAME} (see acquire.lua)
-- KEYS[4] waiting line  P:{NAME}:queue
-- KEYS[5] their leases  P:{NAME}:leases
-- KEYS[6] legacy fence counter  P:{NAME}:fence  (see acquire.lua), folded in
--         when the lock is handed over
-- KEYS[7] forced-release marks  P:{NAME}:forced  HASH 'owner:fence' of each
--         holding an operator's forced release ended -> until when (Redis'
--         clock, ms) that holding's lease would have run
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds, restored on the holding that remains after a
--         nested release
-- ARGV[3] publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4] waiter channel prefix P:{NAME}:w:
-- ARGV[5] NUMSUB, or SHARDNUMSUB on Redis Cluster
-- ARGV[6] the re-entry count this owner believes it holds before this
--         request, sent as is on every send of one request: a count below
--         it means this release was applied already (its reply was lost),
--         and it is answered again, not applied twice; a count above it is
--         taken as it ("-1": unknown, the count as Redis has it).
-- ARGV[7] the fencing token of the holding to release; "0": whichever
--         holding this owner has (a grant to a waiter that left is passed on
--         with its token, so no later holding of that owner is touched)
-- ARGV[8] '1': an operator's forced release, sent as the holder (with its
--         token) by `rlock unlock --force`; the holding it ends is marked,
--         so that the holder's own release is refused (-3) for the rest of
--         that lease, not taken for its own earlier send, whatever happened
--         to the lock since; absent or '0': the holder's own
-- ARGV[9] '1': a Redlock attempt that fell short gives back its grant; a
--         lock it frees is announced as 'given back <client id>' (the owner
--         id up to its first ':'), on which waiters try again only after a
--         pause: the holder's majority is most often as it was. Absent or
--         '0': announced as 'released'.
-- returns the re-entry count left (0: the lock was handed over or freed, by
--           this request or, when it is sent again, by its first send),
--         -1 when the lock is gone (its lease ended),
--         -2 when someone else holds it (never touched),
--         -3 when an operator's forced release ended this holding
local forced = ARGV[8] == '1'

-- When the forced release of `holding` stops counting (ms by Redis' clock):
-- while the lease it ended would have run. nil: no such mark.
local function forced_until(holding)
  if not KEYS[7] or redis.call('TYPE', KEYS[7])['ok'] ~= 'hash' then
    return nil
  end
  return tonumber(redis.call('HGET', KEYS[7], holding))
end

-- Marks `holding` as ended by an operator for `left_ms`, and drops the
-- marks whose time is over (one hash per name, few entries). A key of
-- another type in its place is someone else's: left alone.
local function mark_forced(holding, left_ms)
  if not KEYS[7] then
    return
  end
  local kind = redis.call('TYPE', KEYS[7])['ok']
  if kind ~= 'hash' and kind ~= 'none' then
    return
  end
  local now = now_ms()
  local marks = redis.call('HGETALL', KEYS[7])
  for i = 1, #marks, 2 do
    if (tonumber(marks[i + 1]) or 0) <= now then
      redis.call('HDEL', KEYS[7], marks[i])
    end
  end
  redis.call('HSET', KEYS[7], holding, string.format('%d', now + left_ms))
  if redis.call('PTTL', KEYS[7]) < left_ms then
    redis.call('PEXPIRE', KEYS[7], left_ms)
  end
end

-- What is left of the holding's lease: its PTTL, or an hour for a key
-- without expiry (its holder counts a lease of its own all the same).
local function lease_left()
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then
    return left
  end
  return 3600000
end

local count, refused, previous = held_count(KEYS[1], ARGV[1], ARGV[7])
if not count then
  if ARGV[7] and ARGV[7] ~= '0' then
    local holding = ARGV[1] .. ':' .. ARGV[7]
    local mark = 'forced:' .. holding
    if previous == (forced and mark or holding) then
      -- This very release handed the lock over already (it is sent again).
      return 0
    end
    -- Freed by an operator, and perhaps taken and released since: the mark
    -- says so for as long as that lease would have run.
    local mark_until = forced_until(holding)
    if previous == mark or (mark_until and mark_until > now_ms()) then
      if forced then
        return 0
      end
      return -3
    end
  end
  return refused
end
local answer
count, answer = release_count(count, tonumber(ARGV[6]) or -1)
if not count then
  return answer
end
if count > 1 then
  redis.call('HSET', KEYS[1], 'count', count - 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return count - 1
end
-- The last acquisition: the holding ends here (a handoff writes a new one).
-- Everything a handoff needs is read before its first write.
local head, lease = queue_head(KEYS[4], KEYS[5], ARGV[4], ARGV[5])
if head then
  local fence = next_fence(KEYS[3], KEYS[6])
  if fence then
    local previous = ARGV[1] .. ':' .. tostring(redis.call('HGET', KEYS[1], 'fence'))
    if forced then
      mark_forced(previous, lease_left())
      previous = 'forced:' .. previous
    end
    hand_over(KEYS[1], KEYS[4], KEYS[5], head, lease, fence, previous, ARGV[3], ARGV[4])
    return 0
  end
end
if forced then
  mark_forced(ARGV[1] .. ':' .. tostring(redis.call('HGET', KEYS[1], 'fence')), lease_left())
end
redis.call('DEL', KEYS[1])
if ARGV[9] == '1' then
  redis.call(ARGV[3], KEYS[2], 'given back ' .. string.match(ARGV[1], '^[^:]*'))
else
  redis.call(ARGV[3], KEYS[2], 'released')
end
return 0
