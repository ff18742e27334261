// Package redistest starts and controls redis-server processes and Redis
// Clusters on loopback, for the tests of the modules that use Redis and for
// the benchmark harness. It needs redis-server (and redis-cli, for a
// cluster) on the PATH and uses the standard library only: it speaks to the
// servers in raw RESP.
//
// Servers run in the foreground (daemonize no) with their files and log in
// a directory of the caller's, without RDB snapshots (save ""); the caller
// adds the settings it wants (Durable, for the store's). On Linux a server
// is in a process group of its own (a terminal's ^C reaches the tests or
// the harness, which stop it) and is killed when the process that started
// it dies, however it ends.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Install is how to get redis-server and redis-cli on Debian and Ubuntu.
const Install = "apt-get install redis-server"

// Durable returns the settings the Redis store requires: every write in
// the append-only file, fsynced before the reply, and no eviction.
func Durable() []string {
	return []string{"--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction"}
}

// LookPath returns the path of name (redis-server or redis-cli), or an
// error that says it is not on the PATH and how to install it.
func LookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not on the PATH (%s)", name, Install)
	}
	return p, nil
}

// Binaries returns the paths of redis-server and redis-cli, or LookPath's
// error for the first one missing.
func Binaries() (server, cli string, err error) {
	if server, err = LookPath("redis-server"); err != nil {
		return "", "", err
	}
	if cli, err = LookPath("redis-cli"); err != nil {
		return "", "", err
	}
	return server, cli, nil
}

// Config is a server to start.
type Config struct {
	// Dir holds the server's files: its append-only file, its log
	// (redis.log) and its socket. It is created if missing and never
	// removed by this package.
	Dir string
	// Unix makes the server listen on the unix socket Dir/redis.sock
	// alone (port 0) instead of a free loopback TCP port.
	Unix bool
	// TLS makes the server also listen for TLS on a second free loopback
	// port (Server.TLSAddr); Args must name its certificate and key
	// (--tls-cert-file, --tls-key-file). Not with Unix.
	TLS bool
	// Args are added after the base arguments; a setting given again
	// overrides the base one, except --logfile and a --loglevel above
	// notice: a start waits for the server's own log line that it is
	// ready.
	Args []string
}

// Server is one redis-server process. Its methods are not safe for
// concurrent use.
type Server struct {
	bin     string
	dir     string
	network string // "tcp" or "unix"
	addr    string
	port    int
	tlsPort int // 0: no TLS
	args    []string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
}

// startTimeout bounds the wait for a new server to be ready (loading its
// append-only file included).
const startTimeout = 20 * time.Second

// pollInterval is how often a starting server or cluster is asked again.
const pollInterval = 20 * time.Millisecond

// Start starts a redis-server as cfg says and returns once it answers
// PING and its log says it is ready (redis-cli is not needed). On TCP it listens on 127.0.0.1 at a
// free port whose cluster bus port (port+10000) was free too; if another
// process takes the port first, it tries another. On failure nothing is
// left running and the error includes the server's log.
func Start(cfg Config) (*Server, error) {
	bin, err := LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: cfg.Dir, network: "tcp"}
	if cfg.Unix && cfg.TLS {
		return nil, errors.New("redistest: TLS needs a TCP server, not Unix")
	}
	if cfg.Unix {
		s.network, s.addr = "unix", filepath.Join(cfg.Dir, "redis.sock")
		s.setArgs(cfg.Args)
		if err := s.start(); err != nil {
			return nil, err
		}
		return s, nil
	}
	for try := 0; ; try++ {
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if cfg.TLS {
			if s.tlsPort, err = freePort(); err != nil {
				return nil, err
			}
		}
		s.setArgs(cfg.Args)
		if err = s.start(); err == nil {
			return s, nil
		}
		if try == 4 {
			return nil, err
		}
	}
}

func (s *Server) setArgs(extra []string) {
	s.args = []string{"--dir", s.dir, "--save", "", "--daemonize", "no", "--logfile", s.LogFile(),
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1"}
	if s.network == "unix" {
		s.args = append(s.args, "--unixsocket", s.addr, "--unixsocketperm", "700")
	}
	if s.tlsPort != 0 {
		s.args = append(s.args, "--tls-port", strconv.Itoa(s.tlsPort))
	}
	s.args = append(s.args, extra...)
}

// start runs the server and waits until it answers PING and its log says
// it is ready (so that a PING answered by another process that holds the
// port is not taken for it), exits, or startTimeout passes (then it is
// killed).
func (s *Server) start() error {
	if s.cmd != nil {
		return errors.New("redistest: the server is running")
	}
	logged := int64(0) // the log is appended to across restarts
	if fi, err := os.Stat(s.LogFile()); err == nil {
		logged = fi.Size()
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { cmd.Wait(); close(exited) }(s.exited)
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.Ping()
		if err == nil && s.ready(cmd.Process.Pid, logged) {
			return nil
		}
		select {
		case <-s.exited:
			s.cmd = nil
			return fmt.Errorf("redis-server on %s exited: %s", s.addr, s.log())
		case <-time.After(pollInterval):
		}
		if time.Now().After(deadline) {
			s.Kill()
			if err == nil {
				err = errors.New("its log never said it was ready (another process answers on its address?)")
			}
			return fmt.Errorf("redis-server on %s did not start in %v: %v\n%s", s.addr, startTimeout, err, s.log())
		}
	}
}

// ready reports whether the log, from offset from on, has the line in
// which process pid says it accepts connections.
func (s *Server) ready(pid int, from int64) bool {
	b, _ := os.ReadFile(s.LogFile())
	if int64(len(b)) < from {
		from = 0 // the log was cut or replaced: the pid still tells the lines apart
	}
	prefix := strconv.Itoa(pid) + ":"
	for _, line := range strings.Split(string(b[from:]), "\n") {
		if strings.HasPrefix(line, prefix) && strings.Contains(strings.ToLower(line), "ready to accept connections") {
			return true
		}
	}
	return false
}

// log returns the server's log, for errors.
func (s *Server) log() string {
	b, _ := os.ReadFile(s.LogFile())
	return string(b)
}

// Addr is where the server listens: host:port on TCP, the socket's path
// on a unix socket.
func (s *Server) Addr() string { return s.addr }

// TLSAddr is the host:port of the server's TLS listener (Config.TLS),
// or "" without one.
func (s *Server) TLSAddr() string {
	if s.tlsPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort))
}

// Network is "tcp" or "unix", as net.Dial takes it.
func (s *Server) Network() string { return s.network }

// Port is the server's TCP port, 0 on a unix socket.
func (s *Server) Port() int { return s.port }

// Dir is the server's directory.
func (s *Server) Dir() string { return s.dir }

// LogFile is the path of the server's log.
func (s *Server) LogFile() string { return filepath.Join(s.dir, "redis.log") }

// Pid is the process id of the running server, 0 when it is not running.
func (s *Server) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Ping sends PING and returns nil once the server answers: PONG, or
// NOAUTH from a server that wants a password (it is up).
func (s *Server) Ping() error {
	_, err := s.Do("PING")
	if err != nil && strings.HasPrefix(err.Error(), "NOAUTH") {
		return nil
	}
	return err
}

// Do sends one command and returns its reply: a simple string, an
// integer's digits or a bulk string ("" for a null one). An error reply
// is returned as an error with its text; nested replies (arrays) are not
// supported. Each call dials a connection of its own, with a 2 s deadline.
func (s *Server) Do(args ...string) (string, error) {
	return do(s.network, s.addr, args...)
}

func do(network, addr string, args ...string) (string, error) {
	c, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply")
	}
	switch body := line[1:]; line[0] {
	case '+', ':':
		return body, nil
	case '-':
		return "", errors.New(body)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redistest: unsupported reply %q", line)
}

// Pause makes the running server hang (SIGSTOP where signals stop
// processes): connections stay open and nothing answers until Resume.
// It fails when the server is not running or the system cannot do it.
func (s *Server) Pause() error { return s.signal(sigStop) }

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume() error { return s.signal(sigCont) }

func (s *Server) signal(sig os.Signal) error {
	if sig == nil {
		return errors.New("redistest: cannot pause a process on this system")
	}
	if s.cmd == nil {
		return errors.New("redistest: the server is not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Kill SIGKILLs the server and waits until it has exited: a crash, which
// loses nothing the server had fsynced. It does nothing when the server
// is not running.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Stop asks the server to shut down (SIGTERM) and waits until it has
// exited, killing it after 5 s. It does nothing when the server is not
// running.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	if s.cmd.Process.Signal(syscall.SIGTERM) == nil {
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
		}
	}
	s.Kill()
}

// Restart starts the server again, on the same directory, address and
// arguments (so it reads back its append-only file), and returns once it
// is ready, as Start; a server still running is stopped first. The port is not
// changed: if another process took it meanwhile, Restart fails.
func (s *Server) Restart() error {
	s.Stop()
	return s.start()
}

// freePort returns a loopback TCP port that was free a moment ago, with
// its cluster bus port (port+10000) free too.
func freePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+10000 > 65535 {
			continue
		}
		if b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000)); err == nil {
			b.Close()
			return p, nil
		}
	}
	return 0, errors.New("redistest: no free loopback port pair (port, port+10000)")
}
