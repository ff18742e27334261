package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/seed7fbd42b6/ratelimit"
)

// parse parses one file named "t.yaml" holding src.
func parse(t *testing.T, src string) *Config {
	t.Helper()
	c, err := Parse([]File{{Name: "t.yaml", Data: []byte(src)}}, nil)
	if err != nil {
		t.Fatalf("Parse:\n%s\nerror: %v", src, err)
	}
	return c
}

// parseError parses src as "t.yaml" and returns the *Error it fails with,
// failing the test unless there is exactly one.
func parseError(t *testing.T, src string) *Error {
	t.Helper()
	_, err := Parse([]File{{Name: "t.yaml", Data: []byte(src)}}, nil)
	if err == nil {
		t.Fatalf("Parse:\n%s\nsucceeded, want an error", src)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Parse error %v (%T) is not an *Error", err, err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("Parse:\n%s\nerror has several problems, want one:\n%v", src, err)
	}
	return e
}

// limitFor matches one descriptor of entries given as "k=v" strings.
func limitFor(t *testing.T, c *Config, domain string, kvs ...string) (Match, bool) {
	t.Helper()
	return c.Match(domain, entries(kvs...))
}

// entries turns "k=v" strings into entries ("k=" is an empty value).
func entries(kvs ...string) []Entry {
	es := make([]Entry, len(kvs))
	for i, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			panic("entry " + kv + " has no '='")
		}
		es[i] = Entry{Key: k, Value: v}
	}
	return es
}

// doc joins lines into a YAML document, so that tests can state line
// numbers.
func doc(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// sameConfig reports whether two configs are equal, their Start as times.
func sameConfig(a, b ratelimit.Config) bool {
	return a.Kind == b.Kind && a.Rate == b.Rate && a.Period == b.Period && a.Capacity == b.Capacity &&
		a.MaxReserved == b.MaxReserved && a.Shards == b.Shards && a.Start.Equal(b.Start)
}
