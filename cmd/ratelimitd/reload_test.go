package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The configuration reloads on SIGHUP and when its files change: a good
// one serves at once, buckets keeping their state (the tokens they hold)
// under the new limits, even when a rule gains a name; a bad one is refused, logged and counted, and
// the old one keeps serving.
func TestReload(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"SIGHUP", "file change"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := writeConfig(t, dir, "e2e.yaml", testConfig)
			watch := "0"
			if how == "file change" {
				watch = "20ms"
			}
			p := start(t, "-config", dir, "-data", filepath.Join(t.TempDir(), "d.db"), "-watch-interval", watch)
			p.should(hits(2, d("a", "r")))
			reloaded := func(result string, n float64) {
				t.Helper()
				if how == "SIGHUP" {
					p.signal(syscall.SIGHUP)
				}
				eventually(t, 30*time.Second, result+" reload", func() bool {
					return metric(t, p.httpAddr, "ratelimitd_config_reloads_total", `result="`+result+`"`) == n
				})
			}

			writeConfig(t, dir, "e2e.yaml", strings.Replace(testConfig,
				"  - key: a\n    rate_limit: {period: 87600h, requests_per_unit: 3}",
				"  - key: a\n    rate_limit: {period: 87600h, requests_per_unit: 5, name: renamed}", 1))
			reloaded("success", 1)
			if got := p.remaining("a", "r"); got != 1 {
				t.Errorf("a=r under 5, holding 1 token before: %d, want 1 (its state kept)", got)
			}
			if got := p.should(d("a", "r"), d("a", "fresh")).Statuses; got[0].LimitRemaining != 0 || got[1].LimitRemaining != 4 ||
				got[1].CurrentLimit.GetRequestsPerUnit() != 5 || got[1].CurrentLimit.GetName() != "renamed" {
				t.Errorf("statuses %v, want a=r 0 left, a=fresh 4 of 5, named renamed", got)
			}

			writeConfig(t, dir, "e2e.yaml", testConfig+"  - key: broken\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
			reloaded("failure", 1)
			if got := p.should(d("a", "fresh")).Statuses[0]; got.CurrentLimit.GetRequestsPerUnit() != 5 || got.LimitRemaining != 3 {
				t.Errorf("after a bad config: %v, want the previous limit (5) serving", got)
			}
			if metric(t, p.httpAddr, "ratelimitd_config_last_reload_success", "") != 0 {
				t.Error("last reload reported a success")
			}
			refused := p.logs.find("configuration refused")
			line := fmt.Sprintf("%s:%d: rate_limit.unit", cfg, strings.Count(testConfig, "\n")+2)
			if len(refused) != 1 || !strings.Contains(refused[0]["err"].(string), line) {
				t.Errorf("refusal logged %d times: %v", len(refused), refused)
			}

			writeConfig(t, dir, "e2e.yaml", testConfig)
			reloaded("success", 2)
			if got := p.remaining("a", "fresh"); got != 3 {
				t.Errorf("a=fresh back under 3, holding 3 of 5: %d, want 3", got)
			}
		})
	}
}

// A reload that changes a fixed window's unit keeps the windows aligned
// to the epoch, as envoyproxy/ratelimit's are: a key counted in a
// per-second window is, after the reload, in the hour that holds it, and
// duration_until_reset runs to that hour's end.
func TestReloadRealignsFixedWindows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeConfig(t, dir, "e2e.yaml", testConfig+"  - key: u\n    rate_limit: {unit: second, requests_per_unit: 2}\n")
	p := start(t, "-config", dir, "-data", filepath.Join(t.TempDir(), "d.db"), "-watch-interval", "0")
	p.should(d("u", "x"))
	writeConfig(t, dir, "e2e.yaml", testConfig+"  - key: u\n    rate_limit: {unit: hour, requests_per_unit: 2}\n")
	p.signal(syscall.SIGHUP)
	eventually(t, 30*time.Second, "the reload", func() bool {
		return metric(t, p.httpAddr, "ratelimitd_config_reloads_total", `result="success"`) == 1
	})
	got := p.should(d("u", "x")).Statuses[0].GetDurationUntilReset().AsDuration()
	now := time.Now()
	want := now.Truncate(time.Hour).Add(time.Hour).Sub(now)
	if got < want-2*time.Second || got > want+2*time.Second {
		t.Errorf("duration_until_reset after the reload: %v, want about %v (the end of the hour)", got, want)
	}
}
