package ratelimit

// Reading and resetting a bucket: Value and Reset.

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// Reset deletes one bucket (every shard of it): it is full again, other
// keys and limits keep theirs; resetting an absent bucket is fine.
func TestReset(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{
		"tb": tb(10, M), "fw": fw(10, M, time.Time{}), "sh": withShards(tb(40, M), 4), "other": tb(10, M)}})
	for _, name := range []string{"tb", "fw", "sh"} {
		t.Run(name, func(t *testing.T) {
			full := value(t, l, name, "").Value
			for _, k := range []string{"", "a", "b"} {
				limit(t, l, Request{Name: name, Key: k, Count: 7})
				limit(t, l, Request{Name: name, Key: k, Count: 5, Reserve: true})
			}
			limit(t, l, Request{Name: "other", Key: "", Count: 3})
			wantValue(t, l, name, "", full-12)
			wantValue(t, l, name, "a", full-12)
			if err := l.Reset(bg, name, ""); err != nil {
				t.Fatalf("Reset global: %v", err)
			}
			wantValue(t, l, name, "", full)
			wantValue(t, l, name, "a", full-12)
			wantValue(t, l, name, "b", full-12)
			if err := l.Reset(bg, name, "a"); err != nil {
				t.Fatalf("Reset a: %v", err)
			}
			wantValue(t, l, name, "a", full)
			wantValue(t, l, name, "b", full-12)
			wantValue(t, l, "other", "", 7)
			// reset of an absent bucket is fine
			if err := l.Reset(bg, name, "never-seen"); err != nil {
				t.Errorf("Reset absent: %v", err)
			}
			// after a reset the bucket is full and usable again
			n := full
			if name == "sh" {
				n = 20 // two shards' worth: the most one request can draw
			}
			if st := limit(t, l, Request{Name: name, Key: "a", Count: n}); !st.OK {
				t.Errorf("full request after reset denied: %+v", st)
			}
			if err := l.Reset(bg, name, "a"); err != nil {
				t.Fatal(err)
			}
			if err := l.Reset(bg, name, "b"); err != nil {
				t.Fatal(err)
			}
			if err := l.Reset(bg, "other", ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Value of a bucket never used: full, TS now (token bucket) or the window
// start (fixed window), and the limit's config.
func TestValueFresh(t *testing.T) {
	clk := newClock()
	cfgs := map[string]Config{
		"tb":  withCap(tb(10, M), 17),
		"fw":  withCap(fw(10, M, t0.Add(-25*S)), 13),
		"tbd": tb(7, 3*S),
	}
	l := open(t, Options{Now: clk.Now, Limits: cfgs})
	v := wantValue(t, l, "tb", "fresh", 17)
	if !v.TS.Equal(t0) {
		t.Errorf("fresh token bucket TS = %v, want now %v", v.TS, t0)
	}
	if v.Config.Kind != TokenBucket || v.Config.Rate != 10 || v.Config.Period != M || v.Config.Capacity != 17 {
		t.Errorf("Value.Config = %+v, want the limit's config", v.Config)
	}
	v = wantValue(t, l, "fw", "fresh", 13)
	if !v.TS.Equal(t0.Add(-25 * S)) {
		t.Errorf("fresh fixed window TS = t0%+v, want window start t0-25s", v.TS.Sub(t0))
	}
	if v.Config.Kind != FixedWindow || !v.Config.Start.Equal(t0.Add(-25*S)) {
		t.Errorf("Value.Config = %+v, want the limit's config", v.Config)
	}
	v = wantValue(t, l, "tbd", "", 7) // capacity defaults to rate
	if v.Config.Rate != 7 || v.Config.Period != 3*S {
		t.Errorf("Value.Config = %+v", v.Config)
	}
	if v.Config.Capacity != 0 && v.Config.Capacity != 7 {
		t.Errorf("Value.Config.Capacity = %v, want 7 (or 0 meaning rate)", v.Config.Capacity)
	}
}

// Value.TS was max(0, shard ts...), so for any clock before 1970 (a valid
// clock: the package accepts Starts back to 1678) Value reported
// 1970-01-01 instead of now (token bucket) or the window start (fixed
// window).
func TestValueTSBefore1970(t *testing.T) {
	clk := ratelimittest.NewClock(time.Unix(-1000, 0))
	fw := fw(1, time.Minute, time.Time{})
	fw.Start = time.Unix(-30, 0)
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"tb": tb(10, time.Minute), "fw": fw}})
	if v := value(t, l, "tb", "k"); !v.TS.Equal(time.Unix(-1000, 0)) {
		t.Errorf("token bucket Value.TS at now=-1000s: %v (%d), want now", v.TS.UTC(), v.TS.Unix())
	}
	if v := value(t, l, "fw", "k"); !v.TS.Equal(time.Unix(-1050, 0)) {
		t.Errorf("fixed window Value.TS at now=-1000s, windows at -30s + n*60s: %v (%d), want -1050s", v.TS.UTC(), v.TS.Unix())
	}
}

// Reset deletes the shards a bucket had under an earlier config too: after
// its limit went from 4 shards to 2 (SetLimits keeps shards 2 and 3) and a
// Reset, the bucket is full when the 4 shards come back; also when the
// fewer shards came from reopening the file.
func TestResetDeletesEveryShardTheBucketHad(t *testing.T) {
	four, two := map[string]Config{"s": withShards(tb(40, H), 4)}, map[string]Config{"s": withShards(tb(20, H), 2)}
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// drained opens a file with the 4 shards of s/k drained.
	drained := func(t *testing.T) (*Limiter, *ratelimittest.Clock, string) {
		clk := newClock()
		path := filepath.Join(t.TempDir(), "l.db")
		l := open(t, Options{Path: path, Now: clk.Now, Limits: four})
		for range 100 {
			limit(t, l, Request{Name: "s", Key: "k", Count: 1})
		}
		wantValue(t, l, "s", "k", 0)
		return l, clk, path
	}
	t.Run("SetLimits", func(t *testing.T) {
		l, _, _ := drained(t)
		must(t, l.SetLimits(two))
		must(t, l.Reset(bg, "s", "k"))
		wantValue(t, l, "s", "k", 20)
		must(t, l.SetLimits(four))
		wantValue(t, l, "s", "k", 40)
	})
	t.Run("swept, then reopened", func(t *testing.T) {
		// A sweep drops a bucket full by its limit then and logs nothing:
		// the file's record of it is not full under the config (or the
		// clock) that reopens it, so Reset must log a delete for it too.
		l, clk, path := drained(t)
		clk.Advance(2 * H)
		if n := l.sweep(); n != 4 {
			t.Fatalf("swept %d buckets, want the 4 shards", n)
		}
		must(t, l.SetLimits(two))
		must(t, l.Reset(bg, "s", "k"))
		clk.Set(t0.Add(30 * time.Minute)) // the clock goes back
		must(t, l.Close())
		l = open(t, Options{Path: path, Now: clk.Now, Limits: four})
		wantValue(t, l, "s", "k", 40)
	})
	t.Run("reopened", func(t *testing.T) {
		l, clk, path := drained(t)
		must(t, l.Close())
		l = open(t, Options{Path: path, Now: clk.Now, Limits: two})
		must(t, l.Reset(bg, "s", "k"))
		must(t, l.SetLimits(four))
		wantValue(t, l, "s", "k", 40)
	})
}
