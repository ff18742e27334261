package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"unicode"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/rls"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/server"
)

const serveUsage = `usage: ratelimitd serve -config FILE|DIR [-data FILE | -redis ADDR[,ADDR...]] [flags]

Serves Envoy's rate limit service (gRPC envoy.service.ratelimit.v3, with
grpc.health.v1 and reflection) on -grpc-addr; envoyproxy/ratelimit's /json
and /healthcheck, /metrics and the native API (/v1/limit, /v1/check,
/v1/value) on -http-addr; and, only when -admin-addr is set, the operator
actions (/v1/credit, /v1/reset, /v1/backup, /v1/salvage, /v1/reload,
/v1/config, /debug/pprof/). Every address defaults to loopback.

The buckets live in -data's file (every grant on disk before it is
answered), in memory (-data ""), or on Redis (-redis): one server, or a
Redis Cluster given by several seed addresses, shared by every ratelimitd
on it with the same -redis-prefix, so that replicas share their limits.
Redis credentials come from $REDIS_USERNAME and $REDIS_PASSWORD (or
-redis-username and -redis-password-file). Redis must run appendonly yes,
appendfsync always, no-appendfsync-on-rewrite no and maxmemory-policy
noeviction (checked at start).

SIGHUP reloads the configuration (so does a change to its files); a bad
one is refused, logged and counted, and the previous one keeps serving.
SIGTERM or SIGINT drains: health reports NOT_SERVING, requests go on for
-drain-delay (a second signal cuts it short), calls in flight finish,
and the limiter is closed with every acknowledged grant stored.

Flags:
`

// serve parses the serve flags and runs the server until it stops.
func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, serveUsage)
		fs.PrintDefaults()
	}
	var o server.Options
	fs.StringVar(&o.ConfigPath, "config", "", "the rules: a YAML `file`, or a directory of them (one domain each), in envoyproxy/ratelimit's format with ratelimitd's extensions")
	fs.BoolVar(&o.MergeDomains, "merge-domains", false, "let several files configure one domain (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG)")
	watch := fs.Duration("watch-interval", server.DefaultWatchInterval, "how often to check the configuration's files for changes; 0 checks only on SIGHUP")
	fs.StringVar(&o.Storage.Data, "data", "ratelimitd.db", "the limiter's `file` (embedded bbolt; every grant on disk before it is answered); \"\" keeps buckets in memory only; not with -redis, which ignores the default")
	fs.IntVar(&o.Storage.MaxBuckets, "max-buckets", 0, "the most buckets held (new keys are refused beyond it, failing closed); 0 means the library's default, < 0 no bound; not with -redis")
	var rf redisFlags
	rf.register(fs)
	fs.StringVar(&o.GRPCAddr, "grpc-addr", "127.0.0.1:8081", "gRPC `address` (Envoy's rate limit service, health, reflection); \"\" turns it off")
	fs.StringVar(&o.HTTPAddr, "http-addr", "127.0.0.1:8080", "HTTP `address` (/json, /healthcheck, /metrics, /v1/limit, /v1/check, /v1/value); \"\" turns it off")
	fs.StringVar(&o.AdminAddr, "admin-addr", "", "admin `address` (/v1/credit, /v1/reset, /v1/backup, /v1/salvage, /v1/reload, /v1/config, /debug/pprof/); off unless set")
	adminHosts := fs.String("admin-hosts", "", "comma-separated host `names` the admin port answers to besides localhost and IP addresses (requests addressed to other names are refused: DNS rebinding)")
	fs.StringVar(&o.TLS.CertFile, "tls-cert", "", "serve every port over TLS with this PEM certificate `file` (re-read on reload)")
	fs.StringVar(&o.TLS.KeyFile, "tls-key", "", "the PEM private key `file` of -tls-cert")
	fs.StringVar(&o.TLS.ClientCAFile, "tls-client-ca", "", "require client certificates signed by a CA in this PEM `file` (mTLS)")
	fs.IntVar(&o.Limits.MaxDescriptors, "max-descriptors", engine.DefaultMaxDescriptors, "the most descriptors one request may carry")
	fs.IntVar(&o.Limits.MaxEntries, "max-entries", engine.DefaultMaxEntries, "the most entries one descriptor may carry")
	fs.IntVar(&o.Limits.MaxEntryBytes, "max-entry-bytes", engine.DefaultMaxEntryBytes, "the longest domain, descriptor key or value, in bytes")
	fs.IntVar(&o.Limits.MaxOverrides, "max-overrides", engine.DefaultMaxOverrides, "the most distinct limit overrides (descriptor.limit) accepted; < 0 refuses overrides")
	fs.IntVar(&o.MaxRequestBytes, "max-request-bytes", server.DefaultMaxRequestBytes, "the largest gRPC message or HTTP body")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", server.DefaultRequestTimeout, "the longest a decision may take when the caller set no deadline")
	headers := fs.String("response-headers", "", "rate limit headers to add to responses: a comma-separated list of draft (RateLimit-Policy, RateLimit), x (X-RateLimit-*), envoy (RateLimit-Limit/-Remaining/-Reset); none by default")
	fs.BoolVar(&o.FailOpen, "fail-open", false, "DANGEROUS: answer OK, limiting nothing, when the limiter cannot decide (by default such requests fail: Envoy's failure_mode_deny then denies them)")
	fs.BoolVar(&o.UnknownDomainError, "unknown-domain-error", false, "refuse requests for a domain the configuration does not have (gRPC NotFound, HTTP 404) instead of answering OK")
	fs.DurationVar(&o.DrainDelay, "drain-delay", 0, "after SIGTERM, how long to keep serving while health reports NOT_SERVING")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", server.DefaultDrainTimeout, "after the drain delay, how long calls in flight may take to finish")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ratelimitd serve: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if o.ConfigPath == "" {
		fmt.Fprintln(stderr, "ratelimitd serve: -config is required (ratelimitd serve -h lists the flags)")
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	logger, err := newLogger(stderr, *logLevel, *logFormat)
	if err == nil {
		o.Headers, err = rls.ParseHeaders(*headers)
	}
	if err == nil {
		o.Storage, err = storageOf(o.Storage, &rf, set, os.Getenv)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ratelimitd serve: %v\n", err)
		return 2
	}
	o.Logger = logger
	o.AdminHosts = strings.FieldsFunc(*adminHosts, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	o.WatchInterval = *watch
	if *watch <= 0 {
		o.WatchInterval = -1
	}
	if o.FailOpen {
		logger.Warn("-fail-open: requests are answered OK when the limiter cannot decide; nothing is limited then")
	}
	if rf.allowNotDurable {
		logger.Warn("-redis-allow-not-durable: grants Redis acknowledged just before it crashed may be forgotten (over-admission)")
	}
	if rf.allowEviction {
		logger.Warn("-redis-allow-eviction: a bucket Redis evicts reads as full (over-admission)")
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	s, code := openServer(o, sigs, logger)
	if s == nil {
		return code
	}
	if err := s.Run(sigs); err != nil {
		logger.Error("stopped with an error", slog.Any("err", err))
		return 1
	}
	return 0
}

// openServer opens the server, which may take a while (a Redis that does not
// answer is waited for): SIGTERM or SIGINT meanwhile ends the process at
// once (exit code 1), and a SIGHUP is passed on to Run.
func openServer(o server.Options, sigs chan os.Signal, logger *slog.Logger) (*server.Server, int) {
	type opened struct {
		s   *server.Server
		err error
	}
	done := make(chan opened, 1)
	go func() {
		s, err := server.New(o)
		done <- opened{s, err}
	}()
	hup := false
	for {
		select {
		case r := <-done:
			if r.err != nil {
				logger.Error("cannot start", slog.Any("err", r.err))
				return nil, 1
			}
			if hup {
				select { // the channel may be full of signals Run reads first
				case sigs <- syscall.SIGHUP:
				default:
				}
			}
			return r.s, 0
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				hup = true
				continue
			}
			logger.Error("interrupted while starting", slog.String("signal", sig.String()))
			return nil, 1
		}
	}
}

// newLogger builds the server's logger.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format: %q is neither text nor json", format)
}
