-- heard: how many subscribers the master of a sharded channel's slot counts
-- on it, the count mutex/queue.lua's waiter_alive reads before it hands a
-- lock over. A sharded feed's probe sends it. It is a script so that it
-- routes by slot to the master: a node that no longer serves the slot as
-- master answers MOVED, and the client refreshes its slot map. PUBSUB
-- SHARDNUMSUB sent alone names no key, so any node answers it with a count
-- of its own.
-- KEYS[1] the channel
-- returns the count
return redis.call('PUBSUB', 'SHARDNUMSUB', KEYS[1])[2]
