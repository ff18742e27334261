//go:build race

package ratelimit

// raceEnabled shrinks the heaviest tests under the race detector, which
// slows them ~10x; their full size runs without -race (see .ci/run).
const raceEnabled = true
