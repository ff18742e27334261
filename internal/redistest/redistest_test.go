package redistest

import (
	"strings"
	"testing"
)

// A server answers, keeps what it acknowledged across a kill -9 (with
// Durable's settings) and comes back on the same port.
func TestServerKillRestart(t *testing.T) {
	s := ForTest(t, Config{Args: Durable()})
	if err := s.Ping(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Do("SET", "k", "v 1\r\n"); err != nil || got != "OK" {
		t.Fatalf("SET: %q, %v", got, err)
	}
	port := s.Port()
	s.Kill()
	if s.Ping() == nil || s.Pid() != 0 {
		t.Fatal("the killed server answers")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Do("GET", "k"); err != nil || got != "v 1\r\n" || s.Port() != port {
		t.Fatalf("after restart on port %d (was %d): GET %q, %v", s.Port(), port, got, err)
	}
	if _, err := s.Do("NOSUCHCOMMAND"); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("an unknown command: %v", err)
	}
	s.Stop()
	if s.Ping() == nil {
		t.Fatal("the stopped server answers")
	}
}

// A server whose port another server holds is not taken for started
// because the other one answers PING: its own log must say it is ready.
func TestStartOnATakenPort(t *testing.T) {
	s := ForTest(t, Config{})
	other := &Server{bin: s.bin, dir: t.TempDir(), network: "tcp", addr: s.Addr(), port: s.Port()}
	other.setArgs(nil)
	err := other.start()
	if err == nil {
		other.Stop()
		t.Fatal("a server on a taken port was taken for started")
	}
	if !strings.Contains(err.Error(), "exited") {
		t.Errorf("error %v, want that the server exited", err)
	}
}

// On a unix socket the server listens there alone.
func TestServerUnix(t *testing.T) {
	s := ForTest(t, Config{Unix: true})
	if s.Network() != "unix" || s.Port() != 0 || !strings.HasSuffix(s.Addr(), "redis.sock") {
		t.Fatalf("network %s, port %d, addr %s", s.Network(), s.Port(), s.Addr())
	}
	if err := s.Ping(); err != nil {
		t.Fatal(err)
	}
}

// A cluster's nodes share the slots.
func TestCluster(t *testing.T) {
	c := ClusterForTest(t)
	if len(c.Addrs()) != 3 {
		t.Fatalf("nodes %v", c.Addrs())
	}
	info, err := c.Nodes[0].Do("CLUSTER", "INFO")
	if err != nil || !strings.Contains(info, "cluster_slots_assigned:16384") || !strings.Contains(info, "cluster_known_nodes:3") {
		t.Fatalf("CLUSTER INFO: %v\n%s", err, info)
	}
}
