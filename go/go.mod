module github.com/redis-rlock/redis-rlock/go

go 1.21
