package redislimit

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/redistest"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// The Redis tests start their own redis-server processes (package
// redistest): one shared server and one shared 3-master cluster (started
// on first use, stopped by TestMain), and servers of their own where they
// kill or reconfigure them. Without redis-server on the PATH they skip,
// unless RATELIMIT_REQUIRE_REDIS=1 (CI), which makes that a failure.

var (
	sharedOnce    sync.Once
	sharedServer  *server
	sharedErr     error
	clusterOnce   sync.Once
	sharedCluster *cluster
	clusterErr    error
	sharedDirs    []string
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	flag.Parse()
	// Tests compare every state the function writes with the replay, bit
	// for bit; benchmarks measure the store as it runs.
	verifyStates = os.Getenv("RL_NOVERIFY") == "" && flag.Lookup("test.bench").Value.String() == ""
	if _, _, err := redistest.Binaries(); err != nil && !redistest.Required() {
		fmt.Printf("redislimit: %v, so the Redis tests skip\n", err)
	}
	code := m.Run()
	if sharedServer != nil {
		sharedServer.Stop()
	}
	if sharedCluster != nil {
		sharedCluster.Stop()
	}
	if benchServer.s != nil {
		benchServer.s.Stop()
	}
	for _, d := range sharedDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// server is one redis-server process, with the settings the store
// requires (redistest.Durable).
type server struct{ *redistest.Server }

// startServer starts a server in dir, on a unix socket or on a loopback
// TCP port, with extra arguments after the store's settings.
func startServer(dir string, unix bool, extra ...string) (*server, error) {
	s, err := redistest.Start(redistest.Config{Dir: dir, Unix: unix, Args: append(redistest.Durable(), extra...)})
	if err != nil {
		return nil, err
	}
	return &server{s}, nil
}

// client returns a new client of s.
func (s *server) client() *redis.Client {
	return redis.NewClient(&redis.Options{Network: s.Network(), Addr: s.Addr(), DialTimeout: 2 * time.Second,
		ReadTimeout: 5 * time.Second, PoolSize: 64})
}

// ownServer starts a server on a unix socket for tb alone, killed at its
// end.
func ownServer(tb testing.TB, extra ...string) *server {
	tb.Helper()
	return &server{redistest.ForTest(tb, redistest.Config{Unix: true, Args: append(redistest.Durable(), extra...)})}
}

// shared returns the shared single server, on a unix socket.
func shared(tb testing.TB) *server {
	tb.Helper()
	redistest.Need(tb)
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "redislimit-single")
		if err != nil {
			sharedErr = err
			return
		}
		sharedDirs = append(sharedDirs, dir)
		sharedServer, sharedErr = startServer(dir, true)
	})
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return sharedServer
}

// cluster is a Redis Cluster of three masters on loopback.
type cluster struct{ *redistest.Cluster }

func (c *cluster) client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DialTimeout: 2 * time.Second,
		ReadTimeout: 5 * time.Second, PoolSize: 64})
}

// sharedClusterOf returns the shared cluster.
func sharedClusterOf(tb testing.TB) *cluster {
	tb.Helper()
	redistest.Need(tb)
	clusterOnce.Do(func() {
		dir, err := os.MkdirTemp("", "redislimit-cluster")
		if err != nil {
			clusterErr = err
			return
		}
		sharedDirs = append(sharedDirs, dir)
		c, err := redistest.StartCluster(dir, redistest.Durable()...)
		if err != nil {
			clusterErr = err
			return
		}
		sharedCluster = &cluster{c}
	})
	if clusterErr != nil {
		tb.Fatal(clusterErr)
	}
	return sharedCluster
}

// A topology is where a test's limiter keeps its buckets.
type topology struct {
	name   string
	client func(tb testing.TB) redis.UniversalClient
}

var topologies = []topology{
	{"single", func(tb testing.TB) redis.UniversalClient {
		c := shared(tb).client()
		tb.Cleanup(func() { c.Close() })
		return c
	}},
	{"cluster", func(tb testing.TB) redis.UniversalClient {
		c := sharedClusterOf(tb).client()
		tb.Cleanup(func() { c.Close() })
		return c
	}},
}

// forEachTopology runs f as a subtest on the shared server and cluster.
func forEachTopology(t *testing.T, f func(t *testing.T, client redis.UniversalClient)) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) { f(t, tp.client(t)) })
	}
}

// prefixes gives every limiter opened on a shared server keys of its own.
var prefixSeq struct {
	sync.Mutex
	n int
}

func testPrefix(tb testing.TB) string {
	prefixSeq.Lock()
	defer prefixSeq.Unlock()
	prefixSeq.n++
	name := strings.NewReplacer("/", ".", "{", "(", "}", ")").Replace(tb.Name())
	return fmt.Sprintf("t%d.%s:", prefixSeq.n, name)
}

// open opens a limiter on client with keys of tb's own, closed at its end.
func open(tb testing.TB, client redis.UniversalClient, opts ratelimit.Options, ropts ...Option) *ratelimit.Limiter {
	tb.Helper()
	return openPrefix(tb, client, testPrefix(tb), opts, ropts...)
}

func openPrefix(tb testing.TB, client redis.UniversalClient, prefix string, opts ratelimit.Options, ropts ...Option) *ratelimit.Limiter {
	tb.Helper()
	l, err := Open(client, opts, append([]Option{KeyPrefix(prefix)}, ropts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// newFakeClock returns a settable clock reading t, safe for concurrent use.
func newFakeClock(t time.Time) *ratelimittest.Clock { return ratelimittest.NewClock(t) }

// t0 is a fixed start for fake clocks.
var t0 = time.Unix(1_700_000_000, 0)

const (
	S = time.Second
	M = time.Minute
	H = time.Hour
)

// childEnv names the environment variable that makes the test binary run
// as a child process (see runChild) instead of running tests.
const childEnv = "REDISLIMIT_TEST_CHILD"
