//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The Redis tests start their own redis-server processes on loopback, in
// the test's temporary directory, with the settings the store requires
// (appendonly yes, appendfsync always, noeviction). Without redis-server
// (and redis-cli, for the cluster) on the PATH they skip, unless
// RATELIMIT_REQUIRE_REDIS=1 (CI), which makes that a failure.

// needRedis returns the path of the Redis program name, skipping t
// without it (failing it under RATELIMIT_REQUIRE_REDIS=1).
func needRedis(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("RATELIMIT_REQUIRE_REDIS") == "1" {
		t.Fatalf("RATELIMIT_REQUIRE_REDIS=1 but %s is not on the PATH", name)
	}
	t.Skipf("%s not on the PATH: apt-get install redis-server redis-tools to run the Redis tests (RATELIMIT_REQUIRE_REDIS=1 makes this a failure)", name)
	return ""
}

// redisServer is one redis-server process on a loopback port.
type redisServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// durableRedis are the settings redislimit requires.
var durableRedis = []string{"--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction"}

// startRedis starts a redis-server in a new temporary directory on a
// free loopback port, with extra arguments after the durable defaults;
// it is killed at the test's end.
func startRedis(t testing.TB, extra ...string) *redisServer {
	t.Helper()
	bin := needRedis(t, "redis-server")
	s := &redisServer{t: t, bin: bin, dir: t.TempDir()}
	var err error
	for range 5 {
		if s.port, err = freePort(); err != nil {
			continue
		}
		s.args = []string{"--dir", s.dir, "--save", "", "--daemonize", "no", "--logfile", filepath.Join(s.dir, "log"),
			"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1"}
		s.args = append(append(s.args, durableRedis...), extra...)
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	return s
}

// start runs the server and waits until it answers PING.
func (s *redisServer) start() error {
	s.cmd = exec.Command(s.bin, s.args...)
	// Pdeathsig: the server dies with the test binary, however it ends.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := redisPing(s.addr())
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			s.cmd = nil
			return fmt.Errorf("redis-server exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("redis-server did not answer: %v\n%s", err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restart starts the server again on its directory and port (its
// append-only file).
func (s *redisServer) restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// kill SIGKILLs the server and waits for it.
func (s *redisServer) kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// redisPing sends PING to addr and reads the reply, without a client
// library: nil once the server answers.
func redisPing(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	// NOAUTH: the server is up, and wants a password.
	if !strings.HasPrefix(line, "+PONG") && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING: %q", line)
	}
	return nil
}

// freePort returns a free loopback port whose cluster bus port
// (port+10000) is free too.
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

// startRedisCluster starts a Redis Cluster of three masters (no
// replicas) on loopback and returns their addresses once every node
// reports cluster_state:ok.
func startRedisCluster(t testing.TB) []string {
	t.Helper()
	cli := needRedis(t, "redis-cli")
	var addrs []string
	for range 3 {
		n := startRedis(t, "--cluster-enabled", "yes", "--cluster-node-timeout", "5000")
		addrs = append(addrs, n.addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		for {
			out, err := exec.Command(cli, "-h", host, "-p", port, "cluster", "info").CombinedOutput()
			if err == nil && strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok: %v %s", err, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return addrs
}
