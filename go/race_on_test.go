//go:build race

package rlock_test

// raceEnabled: the race detector is on (it allows at most 8,128 live goroutines).
const raceEnabled = true
