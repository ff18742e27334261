package server

import (
	"errors"
	"strings"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		o    Options
		want string // "" for valid
	}{
		{Options{ConfigPath: "c", GRPCAddr: "x"}, ""},
		{Options{GRPCAddr: "x"}, "-config"},
		{Options{ConfigPath: "c"}, "at least one"},
		{Options{ConfigPath: "c", GRPCAddr: "x", TLS: TLSFiles{CertFile: "c"}}, "go together"},
		{Options{ConfigPath: "c", GRPCAddr: "x", TLS: TLSFiles{ClientCAFile: "ca"}}, "need a server certificate"},
		{Options{ConfigPath: "c", GRPCAddr: "x", Storage: Storage{Data: "d.db", Redis: &RedisStorage{Addrs: []string{"h:1"}}}}, "exclude each other"},
		{Options{ConfigPath: "c", GRPCAddr: "x", Storage: Storage{MaxBuckets: 5, Redis: &RedisStorage{Addrs: []string{"h:1"}}}}, "maxmemory"},
		{Options{ConfigPath: "c", GRPCAddr: "x", Storage: Storage{Redis: &RedisStorage{}}}, "no Redis address"},
		{Options{ConfigPath: "c", GRPCAddr: "x", Storage: Storage{Redis: &RedisStorage{Addrs: []string{"h:1"}, Prefix: "{x}"}}}, "'{' or '}'"},
		{Options{ConfigPath: "c", GRPCAddr: "x", Storage: Storage{Redis: &RedisStorage{Addrs: []string{"h:1"}, CAFile: "/nonexistent/ca.pem"}}}, ""},
	}
	for _, c := range cases {
		got, err := c.o.withDefaults()
		switch {
		case c.want == "" && (err != nil || got.WatchInterval != DefaultWatchInterval || got.MaxRequestBytes != DefaultMaxRequestBytes ||
			got.RequestTimeout != DefaultRequestTimeout || got.DrainTimeout != DefaultDrainTimeout || got.Logger == nil):
			t.Errorf("%+v: %+v %v", c.o, got, err)
		case c.want != "" && c.o.Storage.Redis != nil && !errors.Is(err, ErrInvalidStorage):
			t.Errorf("%+v: %v, want ErrInvalidStorage", c.o, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error with %q", c.o, err, c.want)
		}
	}
}

// A Redis CA file that cannot be read, or holds no certificate, is
// refused before anything connects.
func TestRedisTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	empty := dir + "/empty.pem"
	writeFile(t, empty, "no certificate here")
	for _, ca := range []string{dir + "/missing.pem", empty} {
		r := &RedisStorage{Addrs: []string{"127.0.0.1:1"}, CAFile: ca}
		if _, err := r.client(); !errors.Is(err, ErrInvalidStorage) {
			t.Errorf("CA %s: %v, want ErrInvalidStorage", ca, err)
		}
	}
}
