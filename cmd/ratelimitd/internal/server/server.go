package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// Server is ratelimitd serving: its listeners bound, its configuration
// loaded and its limiter open. Create it with New, then Run it.
type Server struct {
	opts     Options
	log      *slog.Logger
	limits   engine.Limits
	eng      *engine.Engine
	store    *store
	health   *healthState
	reload   *reloader
	certs    *certificates
	registry *prometheus.Registry
	requests requestCounters

	grpc                    *grpc.Server
	http, admin             *http.Server
	grpcLn, httpLn, adminLn net.Listener
}

// New loads the configuration, opens the limiter and binds the
// listeners. Nothing is served until Run. On an error (an address in
// use, say) nothing stays open: the limiter is closed, so its file can
// be opened again.
func New(o Options) (_ *Server, err error) {
	opts, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	fp := fingerprintOf(opts.ConfigPath, opts.TLS)
	copts := &config.Options{MergeDomains: opts.MergeDomains}
	cfg, err := config.Load(opts.ConfigPath, copts)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger}
	if opts.TLS.CertFile != "" {
		if s.certs, err = newCertificates(opts.TLS); err != nil {
			return nil, err
		}
	}
	st, err := opts.Storage.open(ratelimit.Options{Limits: cfg.LimiterConfigs(), Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("opening the limiter (%s storage): %w", opts.Storage.Kind(), err)
	}
	s.store = st
	defer func() {
		if err != nil {
			s.closeListeners()
			st.close()
		}
	}()
	s.eng = engine.New(st.lim, cfg, engine.Options{Limits: opts.Limits, UnknownDomainError: opts.UnknownDomainError,
		FailOpen: opts.FailOpen, TransientFailures: st.transient, Logger: opts.Logger})
	s.limits = s.eng.Limits()
	s.health = newHealth(s.eng, st.probe, opts.Logger)
	s.reload = &reloader{path: opts.ConfigPath, opts: *copts, eng: s.eng, log: opts.Logger, tls: s.certs}
	s.reload.initial(fp)
	s.registry = s.newRegistry()
	if s.grpcLn, err = s.listen(opts.GRPCAddr); err != nil {
		return nil, err
	}
	if s.httpLn, err = s.listen(opts.HTTPAddr, "h2", "http/1.1"); err != nil {
		return nil, err
	}
	if s.adminLn, err = s.listen(opts.AdminAddr, "h2", "http/1.1"); err != nil {
		return nil, err
	}
	if s.grpcLn != nil {
		s.grpc = s.newGRPCServer()
	}
	if s.httpLn != nil {
		s.http = s.newHTTPServer(s.newHTTPHandler(), opts.RequestTimeout+10*time.Second)
	}
	if s.adminLn != nil {
		s.admin = s.newHTTPServer(s.newAdminHandler(), 0)
	}
	return s, nil
}

// listen binds addr ("" is no listener); with TLS and protos, an HTTP
// listener is wrapped in TLS (gRPC does its own).
func (s *Server) listen(addr string, protos ...string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if s.certs != nil && len(protos) > 0 {
		ln = tls.NewListener(ln, s.certs.config(protos...))
	}
	return ln, nil
}

func (s *Server) closeListeners() {
	for _, ln := range []net.Listener{s.grpcLn, s.httpLn, s.adminLn} {
		if ln != nil {
			ln.Close()
		}
	}
}

// Addrs returns the addresses the listeners are bound to ("" for one
// that is off).
func (s *Server) Addrs() (grpcAddr, httpAddr, adminAddr string) {
	addr := func(ln net.Listener) string {
		if ln == nil {
			return ""
		}
		return ln.Addr().String()
	}
	return addr(s.grpcLn), addr(s.httpLn), addr(s.adminLn)
}

// Run serves until SIGTERM or SIGINT arrives on sigs (or a listener
// fails), reloading the configuration on SIGHUP and when its files
// change; then it drains (see Options.DrainDelay) and closes the
// limiter, so that every grant acknowledged is on disk. It returns the
// listener's failure or the limiter's Close error.
func (s *Server) Run(sigs <-chan os.Signal) error {
	errc := make(chan error, 3)
	if s.grpc != nil {
		go func() {
			if err := s.grpc.Serve(s.grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				errc <- fmt.Errorf("gRPC listener: %w", err)
			}
		}()
	}
	for _, hs := range []struct {
		srv  *http.Server
		ln   net.Listener
		name string
	}{{s.http, s.httpLn, "HTTP"}, {s.admin, s.adminLn, "admin"}} {
		if hs.srv != nil {
			go func() {
				if err := hs.srv.Serve(hs.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					errc <- fmt.Errorf("%s listener: %w", hs.name, err)
				}
			}()
		}
	}
	g, h, a := s.Addrs()
	s.log.Info("serving", slog.String("grpc", g), slog.String("http", h), slog.String("admin", a),
		slog.String("storage", s.opts.Storage.Kind()), slog.String("data", s.opts.Storage.Data), slog.Any("redis", s.redisAddrs()),
		slog.String("config", s.opts.ConfigPath), slog.Bool("tls", s.certs != nil), slog.Int("pid", os.Getpid()))

	var poll <-chan time.Time
	if s.opts.WatchInterval > 0 {
		t := time.NewTicker(s.opts.WatchInterval)
		defer t.Stop()
		poll = t.C
	}
	healthTick := time.NewTicker(time.Second)
	defer healthTick.Stop()
	rl := s.startReloads()
	var serveErr error
loop:
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				rl.ask(rl.hup)
				continue
			}
			s.log.Info("shutting down", slog.String("signal", sig.String()))
			break loop
		case <-poll:
			rl.ask(rl.poll)
		case <-healthTick.C:
			s.health.refresh() // in the background: a probe must not hold up signals
		case serveErr = <-errc:
			s.log.Error("a listener failed; shutting down", slog.Any("err", serveErr))
			break loop
		}
	}
	close(rl.stop)
	return s.shutdown(sigs, serveErr, rl.done)
}

// reloads is the goroutine that runs the reloads SIGHUP and the file
// watch ask for, one at a time, so that none holds up a signal: on Redis
// a reload waits for the requests under way under a rule it changes, and
// scans that rule's keys. A request made while one is already waiting is
// the same request (the reload reads the files when it runs).
type reloads struct {
	hup, poll chan struct{} // asked for: a reload, a reload if the files changed
	stop      chan struct{} // closed: take no more
	done      chan struct{} // closed when the goroutine has returned
}

func (s *Server) startReloads() *reloads {
	rl := &reloads{hup: make(chan struct{}, 1), poll: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(rl.done)
		for {
			select {
			case <-rl.stop: // before what is still asked for: shutdown has begun
				return
			default:
			}
			select {
			case <-rl.stop:
				return
			case <-rl.hup:
				s.reload.reload("SIGHUP")
			case <-rl.poll:
				s.reload.poll()
			}
		}
	}()
	return rl
}

// ask asks for the reload of channel c, unless it is asked for already.
func (rl *reloads) ask(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// shutdown reports NOT_SERVING, waits DrainDelay (or another SIGTERM or
// SIGINT) while still serving, stops the listeners letting calls in
// flight finish (up to DrainTimeout), waits for reloaded, closed once a
// reload under way has ended, and closes the limiter.
func (s *Server) shutdown(sigs <-chan os.Signal, serveErr error, reloaded <-chan struct{}) error {
	s.health.drain()
	if serveErr == nil && s.opts.DrainDelay > 0 {
		s.log.Info("draining: health reports NOT_SERVING; requests are still served", slog.Duration("delay", s.opts.DrainDelay))
		t := time.NewTimer(s.opts.DrainDelay)
	wait:
		for {
			select {
			case <-t.C:
				break wait
			case sig := <-sigs:
				if sig != syscall.SIGHUP {
					t.Stop()
					break wait
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.DrainTimeout)
	defer cancel()
	var wg sync.WaitGroup
	if s.grpc != nil {
		wg.Go(func() {
			done := make(chan struct{})
			s.health.endWatches() // they never end by themselves
			go func() { s.grpc.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
				s.grpc.Stop()
			}
		})
	}
	for _, hs := range []*http.Server{s.http, s.admin} {
		if hs != nil {
			wg.Go(func() {
				if hs.Shutdown(ctx) != nil {
					hs.Close()
				}
			})
		}
	}
	wg.Wait()
	<-reloaded // before the limiter closes under it (the listeners are closed: it waits at most for calls the store still has)
	err := s.store.close()
	if err != nil {
		s.log.Error("closing the limiter", slog.Any("err", err))
	} else {
		s.log.Info("stopped; the limiter is closed")
	}
	return errors.Join(serveErr, err)
}

// redisAddrs are the Redis addresses for the log (nil without Redis).
func (s *Server) redisAddrs() []string {
	if r := s.opts.Storage.Redis; r != nil {
		return r.Addrs
	}
	return nil
}
