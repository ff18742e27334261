package redistest

import (
	"os"
	"testing"
)

// RequireEnv names the environment variable that, set to 1 (as in CI),
// makes a test without Redis fail instead of skipping.
const RequireEnv = "RATELIMIT_REQUIRE_REDIS"

// Required reports whether RequireEnv is 1.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Need skips tb, with one line saying how to run it, when redis-server
// or redis-cli is not on the PATH; under RATELIMIT_REQUIRE_REDIS=1 it
// fails tb instead. It returns when both are there.
func Need(tb testing.TB) {
	tb.Helper()
	_, _, err := Binaries()
	if err == nil {
		return
	}
	if Required() {
		tb.Fatalf("%s=1 but %v", RequireEnv, err)
	}
	tb.Skipf("%v; the Redis tests skip without it (%s=1 makes them fail)", err, RequireEnv)
}

// ForTest starts a server for tb alone (after Need), in a new directory
// of tb.TempDir() when cfg.Dir is "", and kills it when tb ends. It
// fails tb if the server does not start.
func ForTest(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	Need(tb)
	if cfg.Dir == "" {
		cfg.Dir = tb.TempDir()
	}
	s, err := Start(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Kill)
	return s
}

// ClusterForTest starts a cluster for tb alone (after Need; see
// StartCluster), in tb.TempDir(), and kills it when tb ends. It fails tb
// if the cluster does not start.
func ClusterForTest(tb testing.TB, args ...string) *Cluster {
	tb.Helper()
	Need(tb)
	c, err := StartCluster(tb.TempDir(), args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Kill)
	return c
}
