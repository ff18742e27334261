package engine

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// An unknown domain is logged once, however often it is asked for, and
// again after a new configuration still lacks it.
func TestUnknownDomainLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	f := newFixture(t, rules, Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	for range 3 {
		f.decide("typo", desc(1, "a=x"))
	}
	if n := strings.Count(buf.String(), "domain=typo"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, buf.String())
	}
	if err := f.e.SetConfig(parseConfig(t, rules)); err != nil {
		t.Fatal(err)
	}
	f.decide("typo", desc(1, "a=x"))
	if n := strings.Count(buf.String(), "domain=typo"); n != 2 {
		t.Fatalf("logged %d times after a reload, want twice", n)
	}
	buf.Reset()
	for i := range maxLoggedDomains + 10 {
		f.decide(fmt.Sprint("u", i), desc(1, "a=x"))
	}
	if n := strings.Count(buf.String(), "\n"); n != maxLoggedDomains {
		t.Errorf("%d lines for %d unknown domains, want %d (the bound, then one notice)", n, maxLoggedDomains+10, maxLoggedDomains)
	}
}
