-- cached/fail: a rebuild that stored nothing tells the callers waiting for
-- it, after it gave the rebuild lock back (so a woken caller finds the lock
-- free). With a message (its loader failed), that failure is kept for
-- those waiting callers to read, for as long as one of them can wait before
-- it reads the entry again; a newer rebuild's failure is never replaced by
-- an older one's.
-- (cached/lib.lua is prepended: now_ms, type_of.)
-- KEYS[1] the last rebuild failure  P:{KEY}:cached:failed
-- KEYS[2] the entry's channel  P:{KEY}:cached:news
-- ARGV[1] the rebuild's fencing token
-- ARGV[2] the failure, as text ('': none, it stored nothing for another
--         reason)
-- ARGV[3] how long the failure is kept, ms
-- ARGV[4] publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- returns 1 kept or nothing to keep; 0 a newer failure (or a value of
--         another type) is there, left alone
local kept = 1
if ARGV[2] ~= '' then
  local t = type_of(KEYS[1])
  local newer = false
  if t == 'string' then
    local f = redis.call('GET', KEYS[1])
    local sp = string.find(f, ' ', 1, true)
    newer = sp and (tonumber(string.sub(f, 1, sp - 1)) or 0) > tonumber(ARGV[1])
  end
  if t == 'none' or (t == 'string' and not newer) then
    redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
  else
    kept = 0
  end
end
redis.call(ARGV[4], KEYS[2], 'failed ' .. ARGV[1])
return kept
