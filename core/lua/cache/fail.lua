-- cached/fail: a rebuild that stored nothing ends, in one step: it gives the
-- rebuild lock back (when that owner still holds it under that token), keeps
-- its failure for the callers waiting for it, and tells them. So a woken
-- caller finds the lock free and the failure there together. The failure is
-- kept for as long as one of those callers can sleep before it reads the
-- entry again; a newer rebuild's failure is never replaced by an older one's,
-- and a rebuild whose lock another rebuild holds now keeps none.
-- Idempotent: sent again, it finds the lock gone and keeps the same failure.
-- (common.lua and cache/lib.lua are prepended.)
-- KEYS[1] the last rebuild failure  P:{KEY}:cached:failed
-- KEYS[2] the entry's channel  P:{KEY}:cached:news
-- KEYS[3] the rebuild lock  P:{KEY}:rebuild
-- ARGV[1] owner id of the rebuild lock's holding
-- ARGV[2] its fencing token
-- ARGV[3] the failure, as text ('': none, it stored nothing for another
--         reason)
-- ARGV[4] how long the failure is kept, ms
-- ARGV[5] publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- returns 1 the lock was given back by this request, 0 it was not held by
--         that owner under that token (given back already, or lost)
local fence = tonumber(ARGV[2])
local owner, held = rebuild_holding(KEYS[3])
local gave = 0
if owner == ARGV[1] and held == fence then
  -- The rebuild lock is taken with one attempt only: nobody stands in its
  -- line, so giving it back is deleting it.
  redis.call('DEL', KEYS[3])
  gave = 1
end
-- A rebuild overtaken past its lease (another holding has the lock now)
-- keeps no failure: a caller that saw it in progress and looks again now
-- waits for the rebuild that took over, and must not read this failure as
-- its own. Sent again after a lost reply, the first send kept it already.
if ARGV[3] ~= '' and (gave == 1 or owner == nil) then
  local kept = failure(KEYS[1])
  if kept ~= false and kept <= fence then
    redis.call('SET', KEYS[1], ARGV[2] .. ' ' .. ARGV[3], 'PX', ARGV[4])
  end
end
redis.call(ARGV[5], KEYS[2], 'failed ' .. ARGV[2])
return gave
