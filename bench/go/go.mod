module github.com/redis-rlock/redis-rlock/bench/go

go 1.26.0

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/redis-rlock/redis-rlock/go v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
	golang.org/x/sys v0.48.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
)

// The face as bench/run copies it, with the core's release build inside.
replace github.com/redis-rlock/redis-rlock/go => ../.build/go
