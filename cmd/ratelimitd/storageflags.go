package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/server"
	"github.com/seed7fbd42b6/ratelimit/redislimit"
)

// errUsage: the command line contradicts itself (exit code 2).
var errUsage = errors.New("usage")

// The environment variables Redis credentials are read from, so that a
// password need not be on the command line.
const (
	envRedisUsername = "REDIS_USERNAME"
	envRedisPassword = "REDIS_PASSWORD"
)

// redisFlags are serve's Redis flags.
type redisFlags struct {
	addrs           string
	cluster         bool
	prefix          string
	username        string
	passwordFile    string
	tls             bool
	caFile          string
	allowNotDurable bool
	allowEviction   bool
	skipCheck       bool
}

func (r *redisFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.addrs, "redis", "", "keep the buckets on Redis instead of a file, shared by every ratelimitd on the same servers and -redis-prefix: one host:port `address` (or a unix socket path) for a single server, a comma-separated list for Redis Cluster seeds; excludes -data")
	fs.BoolVar(&r.cluster, "redis-cluster", false, "treat a single -redis address as a Redis Cluster seed (a cluster's configuration endpoint)")
	fs.StringVar(&r.prefix, "redis-prefix", redislimit.DefaultKeyPrefix, "the `prefix` of every Redis key; replicas that share limits use the same one")
	fs.StringVar(&r.username, "redis-username", "", "the Redis ACL `user` (default $"+envRedisUsername+", else the default user)")
	fs.StringVar(&r.passwordFile, "redis-password-file", "", "read the Redis password from this `file` (default: $"+envRedisPassword+")")
	fs.BoolVar(&r.tls, "redis-tls", false, "connect to Redis over TLS, verifying its certificate against the system's roots (or -redis-ca)")
	fs.StringVar(&r.caFile, "redis-ca", "", "verify Redis's TLS certificate against the CAs in this PEM `file` (implies -redis-tls)")
	fs.BoolVar(&r.allowNotDurable, "redis-allow-not-durable", false, "DANGEROUS: accept Redis servers without appendonly yes, appendfsync always and no-appendfsync-on-rewrite no; grants acknowledged just before a Redis crash are forgotten (over-admission)")
	fs.BoolVar(&r.allowEviction, "redis-allow-eviction", false, "DANGEROUS: accept Redis servers whose maxmemory-policy may evict keys; an evicted bucket reads as full (over-admission)")
	fs.BoolVar(&r.skipCheck, "redis-skip-config-check", false, "do not read the Redis servers' persistence and eviction settings (managed Redis without CONFIG); nothing then checks they are safe")
}

// storageOf completes st (from -data and -max-buckets) with the Redis
// flags: set holds the names of the flags given on the command line,
// getenv reads the environment. Its errors wrap errUsage (and
// server.ErrInvalidStorage for options the storage refuses).
func storageOf(st server.Storage, r *redisFlags, set map[string]bool, getenv func(string) string) (server.Storage, error) {
	if r.addrs == "" {
		if set["redis"] {
			return st, fmt.Errorf("%w: -redis is empty: give an address, or drop it to keep a file (-data)", errUsage)
		}
		for name := range set {
			if strings.HasPrefix(name, "redis-") {
				return st, fmt.Errorf("%w: -%s needs -redis", errUsage, name)
			}
		}
		return st, nil
	}
	if set["data"] {
		return st, fmt.Errorf("%w: -redis and -data exclude each other: on Redis the limiter keeps no file (drop -data)", errUsage)
	}
	if set["max-buckets"] {
		return st, fmt.Errorf("%w: -max-buckets bounds a file or memory limiter; on Redis, bound memory with the server's maxmemory", errUsage)
	}
	rs := &server.RedisStorage{
		Addrs: strings.Split(r.addrs, ","), Cluster: r.cluster, Prefix: r.prefix,
		Username: r.username, Password: getenv(envRedisPassword),
		TLS: r.tls || r.caFile != "", CAFile: r.caFile,
		AllowNotDurable: r.allowNotDurable, AllowEviction: r.allowEviction, SkipConfigCheck: r.skipCheck,
	}
	if rs.Username == "" {
		rs.Username = getenv(envRedisUsername)
	}
	if r.passwordFile != "" {
		b, err := os.ReadFile(r.passwordFile)
		if err != nil {
			return st, fmt.Errorf("%w: -redis-password-file: %w", errUsage, err)
		}
		rs.Password = strings.TrimRight(string(b), "\r\n")
	}
	st = server.Storage{Redis: rs}
	if err := st.Validate(); err != nil {
		return st, fmt.Errorf("%w: %w", errUsage, err)
	}
	return st, nil
}
