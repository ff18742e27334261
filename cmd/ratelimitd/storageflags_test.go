package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/server"
	"github.com/seed7fbd42b6/ratelimit/redislimit"
)

// parseStorage parses serve's storage flags from args as serve does.
func parseStorage(t *testing.T, args []string, env map[string]string) (server.Storage, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var st server.Storage
	fs.StringVar(&st.Data, "data", "ratelimitd.db", "")
	fs.IntVar(&st.MaxBuckets, "max-buckets", 0, "")
	var rf redisFlags
	rf.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return storageOf(st, &rf, set, func(k string) string { return env[k] })
}

func TestStorageFlags(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"REDIS_USERNAME": "envuser", "REDIS_PASSWORD": "envpass"}
	good := []struct {
		args []string
		want server.Storage
	}{
		{nil, server.Storage{Data: "ratelimitd.db"}},
		{[]string{"-data", "", "-max-buckets", "9"}, server.Storage{MaxBuckets: 9}},
		{[]string{"-redis", "h:1"}, server.Storage{Redis: &server.RedisStorage{Addrs: []string{"h:1"},
			Prefix: redislimit.DefaultKeyPrefix, Username: "envuser", Password: "envpass"}}},
		{[]string{"-redis", "a:1,b:2,c:3", "-redis-prefix", "p:", "-redis-username", "u", "-redis-password-file", pwFile,
			"-redis-ca", "ca.pem", "-redis-allow-not-durable", "-redis-allow-eviction", "-redis-skip-config-check"},
			server.Storage{Redis: &server.RedisStorage{Addrs: []string{"a:1", "b:2", "c:3"}, Prefix: "p:", Username: "u",
				Password: "from-file", TLS: true, CAFile: "ca.pem", AllowNotDurable: true, AllowEviction: true, SkipConfigCheck: true}}},
		{[]string{"-redis", "h:1", "-redis-cluster", "-redis-tls"}, server.Storage{Redis: &server.RedisStorage{Addrs: []string{"h:1"},
			Cluster: true, TLS: true, Prefix: redislimit.DefaultKeyPrefix, Username: "envuser", Password: "envpass"}}},
		{[]string{"-redis", "/run/redis.sock"}, server.Storage{Redis: &server.RedisStorage{Addrs: []string{"/run/redis.sock"},
			Prefix: redislimit.DefaultKeyPrefix, Username: "envuser", Password: "envpass"}}},
	}
	for _, c := range good {
		got, err := parseStorage(t, c.args, env)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %+v %+v %v, want %+v %+v", c.args, got, got.Redis, err, c.want, c.want.Redis)
		}
	}
	bad := []struct {
		args    []string
		want    string
		invalid bool // also server.ErrInvalidStorage
	}{
		{[]string{"-redis", "h:1", "-data", "x.db"}, "-redis and -data exclude each other", false},
		{[]string{"-redis", "h:1", "-data", ""}, "-redis and -data exclude each other", false},
		{[]string{"-redis", "h:1", "-max-buckets", "5"}, "-max-buckets", false},
		{[]string{"-redis", ""}, "-redis is empty", false},
		{[]string{"-redis-tls"}, "-redis-tls needs -redis", false},
		{[]string{"-redis-prefix", "x"}, "-redis-prefix needs -redis", false},
		{[]string{"-redis", "a:1,,b:2"}, "empty", true},
		{[]string{"-redis", "a:1, b:2"}, "spaces", true},
		{[]string{"-redis", "a:1,/s.sock"}, "unix socket", true},
		{[]string{"-redis", "/s.sock", "-redis-tls"}, "TLS to a unix socket", true},
		{[]string{"-redis", "h:1", "-redis-prefix", "a{b}"}, "'{' or '}'", true},
		{[]string{"-redis", "h:1", "-redis-password-file", "/nonexistent/pw"}, "-redis-password-file", false},
	}
	for _, c := range bad {
		_, err := parseStorage(t, c.args, env)
		if !errors.Is(err, errUsage) || !strings.Contains(fmt.Sprint(err), c.want) || c.invalid != errors.Is(err, server.ErrInvalidStorage) {
			t.Errorf("%q: %v, want a usage error with %q (ErrInvalidStorage %v)", c.args, err, c.want, c.invalid)
		}
	}
}
