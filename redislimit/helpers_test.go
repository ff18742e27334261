package redislimit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// The Redis tests start their own redis-server processes: one shared
// server and one shared 3-master cluster (started on first use, stopped
// by TestMain), and servers of their own where they kill or reconfigure
// them. Without redis-server on the PATH they skip, unless
// RATELIMIT_REQUIRE_REDIS=1 (CI), which makes that a failure.

var (
	redisBin   string // path of redis-server; "" when missing
	redisCli   string // path of redis-cli
	requireRed = os.Getenv("RATELIMIT_REQUIRE_REDIS") == "1"

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
	redisBin, _ = exec.LookPath("redis-server")
	redisCli, _ = exec.LookPath("redis-cli")
	if redisBin == "" && !requireRed {
		fmt.Println("redislimit: redis-server is not on the PATH, so the Redis tests skip (apt-get install redis-server redis-tools to run them)")
	}
	code := m.Run()
	if sharedServer != nil {
		sharedServer.stop()
	}
	if sharedCluster != nil {
		sharedCluster.stop()
	}
	if benchServer.s != nil {
		benchServer.s.stop()
	}
	for _, d := range sharedDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// needRedis skips tb without redis-server (fails it under
// RATELIMIT_REQUIRE_REDIS=1).
func needRedis(tb testing.TB) {
	tb.Helper()
	if redisBin != "" {
		return
	}
	if requireRed {
		tb.Fatal("RATELIMIT_REQUIRE_REDIS=1 but redis-server is not on the PATH")
	}
	tb.Skip("redis-server not on the PATH (apt-get install redis-server redis-tools)")
}

// server is one redis-server process.
type server struct {
	dir  string
	sock string // unix socket, "" for TCP
	port int
	args []string
	cmd  *exec.Cmd
}

// durable are the settings the store requires.
var durable = []string{"--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction"}

// startServer starts a redis-server in dir on a unix socket (port 0) or
// on a TCP port, with extra arguments after the defaults.
func startServer(dir string, port int, extra ...string) (*server, error) {
	if redisBin == "" {
		return nil, errors.New("redis-server not on the PATH")
	}
	s := &server{dir: dir, port: port}
	s.args = []string{"--dir", dir, "--save", "", "--daemonize", "no", "--logfile", filepath.Join(dir, "log"),
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1"}
	if port == 0 {
		s.sock = filepath.Join(dir, "s.sock")
		s.args = append(s.args, "--unixsocket", s.sock, "--unixsocketperm", "700")
	}
	s.args = append(s.args, durable...)
	s.args = append(s.args, extra...)
	return s, s.start()
}

func (s *server) start() error {
	s.cmd = exec.Command(redisBin, s.args...)
	// Setpgid: a terminal's ^C stops the tests, not the servers first;
	// Pdeathsig: the server dies with the test binary, however it ends.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	c := s.client()
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.kill()
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("redis-server did not start: %v\n%s", err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) addr() string {
	if s.sock != "" {
		return s.sock
	}
	return "127.0.0.1:" + strconv.Itoa(s.port)
}

// client returns a new client of s.
func (s *server) client() *redis.Client {
	o := &redis.Options{Addr: s.addr(), DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, PoolSize: 64}
	if s.sock != "" {
		o.Network = "unix"
	}
	return redis.NewClient(o)
}

// kill SIGKILLs the server and waits for it.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
	s.cmd = nil
}

func (s *server) stop() {
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			s.cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
		s.cmd = nil
	}
}

// ownServer starts a server for tb alone, stopped at its end.
func ownServer(tb testing.TB, extra ...string) *server {
	tb.Helper()
	needRedis(tb)
	s, err := startServer(tb.TempDir(), 0, extra...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.stop)
	return s
}

// shared returns the shared single server.
func shared(tb testing.TB) *server {
	tb.Helper()
	needRedis(tb)
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "redislimit-single")
		if err != nil {
			sharedErr = err
			return
		}
		sharedDirs = append(sharedDirs, dir)
		sharedServer, sharedErr = startServer(dir, 0)
	})
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return sharedServer
}

// cluster is a Redis Cluster of three masters on loopback.
type cluster struct{ nodes []*server }

func (c *cluster) stop() {
	for _, n := range c.nodes {
		n.stop()
	}
}

func (c *cluster) addrs() []string {
	var a []string
	for _, n := range c.nodes {
		a = append(a, n.addr())
	}
	return a
}

func (c *cluster) client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs(), DialTimeout: 2 * time.Second,
		ReadTimeout: 5 * time.Second, PoolSize: 64})
}

// sharedClusterOf returns the shared cluster.
func sharedClusterOf(tb testing.TB) *cluster {
	tb.Helper()
	needRedis(tb)
	clusterOnce.Do(func() { sharedCluster, clusterErr = startCluster() })
	if clusterErr != nil {
		tb.Fatal(clusterErr)
	}
	return sharedCluster
}

func startCluster() (*cluster, error) {
	if redisCli == "" {
		return nil, errors.New("redis-cli not on the PATH (apt-get install redis-tools)")
	}
	c := &cluster{}
	for range 3 {
		dir, err := os.MkdirTemp("", "redislimit-cluster")
		if err != nil {
			c.stop()
			return nil, err
		}
		sharedDirs = append(sharedDirs, dir)
		var n *server
		for try := 0; ; try++ {
			port, err := freePort()
			if err == nil {
				n, err = startServer(dir, port, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
					"--cluster-node-timeout", "5000")
			}
			if err == nil {
				break
			}
			if try == 5 {
				c.stop()
				return nil, err
			}
		}
		c.nodes = append(c.nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(redisCli, args...).CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.nodes {
		cl := n.client()
		for {
			info, err := cl.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				cl.Close()
				c.stop()
				return nil, fmt.Errorf("cluster not ok: %v %s", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cl.Close()
	}
	return c, nil
}

// freePort returns a loopback port that is free, and whose cluster bus
// port (port+10000) is free too.
func freePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p >= 55535 {
			continue
		}
		if b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000)); err == nil {
			b.Close()
			return p, nil
		}
	}
	return 0, errors.New("no free port pair")
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
