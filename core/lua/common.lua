-- common: what every script that reads Redis' clock needs, defined once and
-- prepended first to each of them (see core/src/redis/scripts.rs); it does
-- nothing on its own but switch replication to effects.

-- Effects replication, for the writes after TIME (the default from Redis 5 on).
if redis.replicate_commands then
  redis.replicate_commands()
end

-- Redis' clock in milliseconds.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
