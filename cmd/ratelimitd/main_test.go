package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
)

// The commands and their exit codes, without serving.
func TestRun(t *testing.T) {
	cases := []struct {
		args   []string
		code   int
		output string // in stdout or stderr
	}{
		{nil, 2, "Usage:"},
		{[]string{"help"}, 0, "ratelimitd serve -config"},
		{[]string{"version"}, 0, "ratelimitd "},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"serve", "-h"}, 2, "-fail-open"},
		{[]string{"serve"}, 2, "-config is required"},
		{[]string{"serve", "-config", "x", "extra"}, 2, "unexpected arguments"},
		{[]string{"serve", "-config", "x", "-response-headers", "ietf"}, 2, "unknown header set"},
		{[]string{"serve", "-config", "x", "-log-level", "loud"}, 2, "-log-level"},
		{[]string{"serve", "-config", "/nonexistent/rules.yaml", "-data", ""}, 1, "cannot start"},
		{[]string{"serve", "-config", "x", "-redis", "127.0.0.1:6379", "-data", "x.db"}, 2, "-redis and -data exclude each other"},
		{[]string{"serve", "-config", "x", "-redis-tls"}, 2, "-redis-tls needs -redis"},
		{[]string{"serve", "-config", "x", "-redis", "a:1,,b:2"}, 2, "invalid storage options"},
		{[]string{"serve", "-h"}, 2, "-redis-password-file"},
		{[]string{"verify"}, 2, "usage: ratelimitd verify FILE"},
		{[]string{"salvage", "a"}, 2, "usage: ratelimitd salvage FILE NEW"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.output) {
			t.Errorf("%v: exit %d, want %d with %q\nstdout: %s\nstderr: %s", c.args, code, c.code, c.output, stdout.String(), stderr.String())
		}
	}
}

// The example the README starts a server on is valid.
func TestExampleConfig(t *testing.T) {
	cfg, err := config.Load("example.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Limits()) != 6 {
		t.Errorf("%d rules, want 6", len(cfg.Limits()))
	}
}
