-- inspect: read the state of a read-write lock or semaphore without
-- changing it. (common.lua, mutex/queue.lua and many/lib.lua are
-- prepended.)
-- KEYS as many/acquire.lua's
-- returns {size, waiting, fence_counter, kind, then per holding whose lease
--          has not ended: owner, count, fence, permits, pttl}
--   size: the semaphore's stored size (0: none stored, or a read-write lock)
--   waiting: waiters in line (live or not yet found dead)
--   fence_counter: the last fencing token issued in the slot
--   kind: 0 when the keys hold what this protocol writes, 1 when one of them
--         holds a value of another type (then nothing else is read)
local k = { holders = KEYS[1], untils = KEYS[2], fence = KEYS[3], queue = KEYS[4] }
local counter = issued_fence(k.fence)
local waiting = redis.pcall('LLEN', k.queue)
if type(waiting) ~= 'number' then
  waiting = 0
end
local kinds = { redis.call('TYPE', k.holders)['ok'], redis.call('TYPE', k.untils)['ok'] }
if (kinds[1] ~= 'hash' and kinds[1] ~= 'none') or (kinds[2] ~= 'zset' and kinds[2] ~= 'none') then
  return {0, waiting, counter, 1}
end
local reply = {tonumber(redis.call('HGET', k.holders, '~permits')) or 0, waiting, counter, 0}
local now = now_ms()
local live = redis.call('ZRANGEBYSCORE', k.untils, '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local owner = live[i]
  local count, fence, permits = holding_of(k.holders, owner)
  if count then
    for _, v in ipairs({owner, count, fence, permits, tonumber(live[i + 1]) - now}) do
      table.insert(reply, v)
    end
  end
end
return reply
