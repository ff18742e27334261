//go:build linux

package main

import (
	"testing"

	"github.com/seed7fbd42b6/ratelimit/internal/redistest"
)

// The Redis tests start their own redis-server processes (package
// redistest) on loopback, in the test's temporary directory, with the
// settings the store requires (appendonly yes, appendfsync always,
// noeviction). Without redis-server and redis-cli on the PATH they skip,
// unless RATELIMIT_REQUIRE_REDIS=1 (CI), which makes that a failure.

// startRedis starts a redis-server for t alone on a free loopback port,
// with extra arguments after the store's settings; it is killed at t's
// end.
func startRedis(t testing.TB, extra ...string) *redistest.Server {
	t.Helper()
	return redistest.ForTest(t, redistest.Config{Args: append(redistest.Durable(), extra...)})
}

// startRedisCluster starts a Redis Cluster of three masters for t alone,
// with the store's settings, and returns their addresses once every node
// reports cluster_state:ok.
func startRedisCluster(t testing.TB) []string {
	t.Helper()
	return redistest.ClusterForTest(t, redistest.Durable()...).Addrs()
}
