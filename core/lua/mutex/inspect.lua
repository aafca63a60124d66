-- inspect: read the state of one lock without changing it.
-- (common.lua and queue.lua are prepended: now_ms, issued_fence.)
-- KEYS[1] lock hash  P:{NAME}
-- KEYS[2] fence counter  P:fence{T} of the slot of P:{NAME} (see acquire.lua)
-- KEYS[3] waiting line  P:{NAME}:queue (fair waiters, and others once they waited queue_after)
-- KEYS[4] legacy fence counter  P:{NAME}:fence (see acquire.lua)
-- KEYS[5] the line's leases  P:{NAME}:leases (with when each waiter joined)
-- ARGV[1] how many waiters of the line to name (from its head)
-- returns {held, owner, count, fence, pttl, fence_counter, waiting, held_ms, line, waited}
--   held 0: free; 1: held through this protocol; 2: held by a key of another type
--   owner, count, fence: the holding's fields ('' / 0 / 0 when not a hash holding)
--   pttl: remaining lease in ms (-1: no expiry, -2: free)
--   fence_counter: the last fencing token issued in the name's slot, or by
--     its legacy counter if that is larger (0: never, or neither counter
--     holds a number): every token this name had is at most it, its next
--     is above
--   waiting: waiters in line (live or not yet found dead)
--   held_ms: how long the holding has been held by Redis' clock (-1: not
--     known, a holding taken by an earlier build without `since`)
--   line: the owner ids of the first ARGV[1] waiters in line
--   waited: how long each of them has waited, in ms by Redis' clock (-1:
--     not known, a waiter of an earlier build)
local kind = redis.call('TYPE', KEYS[1])['ok']
-- A counter of another type reads as none (queue.lua's issued_fence): it must
-- not stop every name of the slot from being inspected.
local counter = issued_fence(KEYS[2], KEYS[4])
-- A line of another type (someone else's data) reads as empty.
local waiting = 0
local line = {}
local waited = {}
if redis.call('TYPE', KEYS[3])['ok'] == 'list' then
  waiting = redis.call('LLEN', KEYS[3])
  if waiting > 0 then
    line = redis.call('LRANGE', KEYS[3], 0, tonumber(ARGV[1]) - 1)
  end
end
if #line > 0 then
  local now = now_ms()
  local joined = {}
  if KEYS[5] and redis.call('TYPE', KEYS[5])['ok'] == 'hash' then
    local fields = {}
    for i, owner in ipairs(line) do
      fields[i] = 'since:' .. owner
    end
    joined = redis.call('HMGET', KEYS[5], unpack(fields))
  end
  for i = 1, #line do
    local since = tonumber(joined[i] or '')
    waited[i] = since and math.max(0, now - since) or -1
  end
end
if kind == 'none' then
  return {0, '', 0, 0, -2, counter, waiting, -1, line, waited}
end
local pttl = redis.call('PTTL', KEYS[1])
if kind ~= 'hash' then
  return {2, '', 0, 0, pttl, counter, waiting, -1, line, waited}
end
local h = redis.call('HMGET', KEYS[1], 'owner', 'count', 'fence', 'since')
local held_ms = -1
local since = tonumber(h[4] or '')
if since then
  held_ms = math.max(0, now_ms() - since)
end
-- A field that is no number (written by something else) reads as 0: a nil
-- would cut the reply short.
return {1, h[1] or '', tonumber(h[2] or '0') or 0, tonumber(h[3] or '0') or 0, pttl, counter,
  waiting, held_ms, line, waited}
