package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// A bucket keeps its (value, ts) across SetLimits and is read under the
// new config, capped at the new capacity.
func TestSetLimitsReadsBucketsUnderTheNewConfig(t *testing.T) {
	for _, c := range []struct {
		name      string
		from, to  Config
		take      float64
		wantAfter float64 // value right after SetLimits
		later     time.Duration
		wantLater float64
	}{
		{"capacity lowered caps the value", tokenBucket(10, 10), tokenBucket(10, 5), 2, 5, 0, 5},
		{"capacity raised keeps the value", tokenBucket(10, 10), tokenBucket(10, 20), 4, 6, 30 * time.Second, 11},
		{"rate raised refills faster from the stored ts", tokenBucket(10, 10), tokenBucket(60, 10), 10, 0, 5 * time.Second, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := newClock()
			l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"api": c.from}})
			grant(t, l, Request{Name: "api", Key: "k", Count: c.take})
			if err := l.SetLimits(map[string]Config{"api": c.to}); err != nil {
				t.Fatal(err)
			}
			if got := value(t, l, "api", "k").Value; got != c.wantAfter {
				t.Errorf("value after SetLimits = %v, want %v", got, c.wantAfter)
			}
			clk.Advance(c.later)
			if got := value(t, l, "api", "k").Value; got != c.wantLater {
				t.Errorf("value %v later = %v, want %v", c.later, got, c.wantLater)
			}
			if cfg, _ := l.Config("api"); cfg.Capacity != c.to.Capacity || cfg.Rate != c.to.Rate {
				t.Errorf("Config = %+v, want %+v", cfg, c.to)
			}
		})
	}
}

// A fixed window whose period (or start) changes keeps its windows on the
// new config's grid from then on: a bucket stored under the old one is
// read from the start of the new window that holds its stored start,
// keeping what it holds (capped), in memory and after reopening the file
// under the new config. ratelimitd aligns windows to the epoch, as
// envoyproxy/ratelimit does, and a reload must keep them there.
func TestSetLimitsRealignsAFixedWindow(t *testing.T) {
	epoch := time.Unix(0, 0)
	perSecond := Config{Kind: FixedWindow, Rate: 2, Period: time.Second, Start: epoch}
	perMinute := Config{Kind: FixedWindow, Rate: 2, Period: time.Minute, Start: epoch}
	minute := t0.Truncate(time.Minute).Add(time.Minute)
	for _, how := range []string{"SetLimits in memory", "SetLimits", "reopen"} {
		t.Run(how, func(t *testing.T) {
			clk := ratelimittest.NewClock(minute.Add(14900 * time.Millisecond))
			path := filepath.Join(t.TempDir(), "rl.db")
			if how == "SetLimits in memory" {
				path = ""
			}
			l := open(t, Options{Path: path, Now: clk.Now, Limits: map[string]Config{"api": perSecond}})
			grant(t, l, Request{Name: "api", Key: "k"}) // the window [14 s, 15 s)
			clk.Advance(3100 * time.Millisecond)        // 18 s past the minute
			if how != "reopen" {
				if err := l.SetLimits(map[string]Config{"api": perMinute}); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l = open(t, Options{Path: path, Now: clk.Now, Limits: map[string]Config{"api": perMinute}})
			}
			st := grant(t, l, Request{Name: "api", Key: "k"})
			if want := 42 * time.Second; st.ResetAfter != want || st.Remaining != 0 {
				t.Errorf("under the per-minute window: %+v; want 0 left, full again in %v (at the minute's end)", st, want)
			}
			clk.Advance(42 * time.Second)
			if v := value(t, l, "api", "k").Value; v != 2 {
				t.Errorf("in the next minute: %v left, want 2", v)
			}
		})
	}
}

// A sweep judges a bucket full by its new limit: one that is full under
// the old capacity but not the new one is kept, not dropped (a dropped
// bucket reads as full, which would mint the difference).
func TestSetLimitsSweepUsesTheNewCapacity(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"api": tokenBucket(10, 10)}})
	grant(t, l, Request{Name: "api", Key: "k", Count: 10})
	if err := l.SetLimits(map[string]Config{"api": tokenBucket(10, 20)}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)             // 10 tokens: full under the old limit, half under the new
	if err := l.Snapshot(); err != nil { // in memory: drops full buckets
		t.Fatal(err)
	}
	if got := value(t, l, "api", "k").Value; got != 10 {
		t.Fatalf("value after a sweep = %v, want 10 (the bucket was dropped as full under the old capacity)", got)
	}
}

func TestSetLimitsRefusesABadConfigAndKeepsTheOld(t *testing.T) {
	l := open(t, Options{Limits: map[string]Config{"api": tokenBucket(10, 10)}})
	err := l.SetLimits(map[string]Config{"api": tokenBucket(20, 20), "bad": {Kind: TokenBucket, Rate: -1, Period: time.Second}})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("SetLimits with a bad config = %v, want ErrInvalidConfig", err)
	}
	if cfg, _ := l.Config("api"); cfg.Rate != 10 {
		t.Fatalf("after a refused SetLimits the rate is %v, want the old 10", cfg.Rate)
	}
}

// A removed limit is unknown; its buckets are kept, and read again when
// it comes back.
func TestSetLimitsRemoveAndRestore(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"api": tokenBucket(10, 10)}})
	grant(t, l, Request{Name: "api", Key: "k", Count: 7})
	if err := l.SetLimits(map[string]Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Limit(context.Background(), Request{Name: "api", Key: "k"}); !errors.Is(err, ErrUnknownLimit) {
		t.Fatalf("Limit on a removed limit = %v, want ErrUnknownLimit", err)
	}
	if err := l.Snapshot(); err != nil { // a removed limit's buckets are not dropped
		t.Fatal(err)
	}
	if err := l.SetLimits(map[string]Config{"api": tokenBucket(10, 10)}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, l, "api", "k").Value; got != 3 {
		t.Fatalf("value after the limit came back = %v, want 3", got)
	}
}

// SetLimits and reopening a file with the new Options.Limits read a bucket
// alike.
func TestSetLimitsMatchesReopening(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "rl.db")
	from, to := tokenBucket(10, 10), tokenBucket(5, 4)
	l, err := Open(Options{Path: path, Now: clk.Now, LogPreallocate: -1, Limits: map[string]Config{"api": from}})
	if err != nil {
		t.Fatal(err)
	}
	grant(t, l, Request{Name: "api", Key: "a", Count: 3})
	grant(t, l, Request{Name: "api", Key: "b", Count: 9})
	if err := l.SetLimits(map[string]Config{"api": to}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(12 * time.Second)
	live := []float64{value(t, l, "api", "a").Value, value(t, l, "api", "b").Value}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(Options{Path: path, Now: clk.Now, LogPreallocate: -1, Limits: map[string]Config{"api": to}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reopened := []float64{value(t, l, "api", "a").Value, value(t, l, "api", "b").Value}
	if live[0] != reopened[0] || live[1] != reopened[1] {
		t.Fatalf("values after SetLimits %v, after reopening %v: the rules differ", live, reopened)
	}
	if live[0] != 4 || live[1] != 2 { // a: 7 capped at 4; b: 1 + 12 s * 5/min
		t.Fatalf("values %v, want [4 2]", live)
	}
}

// On a shared store, SetLimits moves the keys' expiries only once the
// calls that resolved a limit it changes are done with, also one whose
// caller gave up while the store still had it: either could still write a
// key under the old limit after the move. A reload that changes no limit
// does not wait.
func TestSetLimitsWaitsForCallsOnASharedStore(t *testing.T) {
	for _, abandon := range []bool{false, true} {
		t.Run(fmt.Sprintf("abandoned=%v", abandon), func(t *testing.T) {
			fs := newBlockingStore()
			l, err := openOn(Options{Limits: map[string]Config{"a": tokenBucket(10, 10)}}, fs)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			limited := make(chan error, 1)
			go func() {
				_, err := l.Limit(ctx, Request{Name: "a", Key: "k"})
				limited <- err
			}()
			<-fs.entered
			if abandon {
				cancel()
				if err := <-limited; !errors.Is(err, context.Canceled) {
					t.Fatalf("Limit after its context ended: %v", err)
				}
			}

			if err := l.SetLimits(map[string]Config{"a": tokenBucket(10, 10), "b": tokenBucket(1, 1)}); err != nil {
				t.Fatal(err) // "a" unchanged, "b" new: relimited (inline keys) with nothing to wait for
			}
			waiting := make(chan struct{})
			l.gate.waiting = func() { close(waiting) }
			set := make(chan error, 1)
			go func() { set <- l.SetLimits(map[string]Config{"a": tokenBucket(1, 10)}) }()
			select {
			case err := <-set:
				t.Fatalf("SetLimits returned (%v) while the store still had a call that resolved the old limit", err)
			case <-waiting:
			}
			close(fs.release)
			if !abandon {
				if err := <-limited; err != nil {
					t.Fatal(err)
				}
			}
			if err := <-set; err != nil {
				t.Fatal(err)
			}
			if got, _ := fs.relimits(); !slices.Equal(got, []int32{1, 0}) {
				t.Fatalf("Relimited ran while the store held %v calls, want at once for \"b\" (1), then for \"a\" with none", got)
			}
		})
	}
}

// On a shared store, a limit that SetLimits removed and a later call adds
// back with other buckets is relimited as a changed one: its keys still
// expire by the config it had before the removal.
func TestSetLimitsRelimitsALimitAddedBack(t *testing.T) {
	fs := newBlockingStore()
	close(fs.release)
	l, err := openOn(Options{Limits: map[string]Config{"a": tokenBucket(10, 10), "b": tokenBucket(10, 10)}}, fs)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	steps := []struct {
		limits map[string]Config
		want   []string // limits relimited
	}{
		{map[string]Config{"b": tokenBucket(10, 10)}, nil},                                    // "a" removed
		{map[string]Config{"a": tokenBucket(1, 10), "b": tokenBucket(10, 10)}, []string{"a"}}, // back, changed
		{map[string]Config{"a": tokenBucket(1, 10), "b": tokenBucket(10, 10)}, nil},           // the same again
		{map[string]Config{"a": tokenBucket(1, 10)}, nil},                                     // "b" removed
		{map[string]Config{"a": tokenBucket(1, 10), "b": tokenBucket(10, 10)}, []string{"b"}}, // back, as it was: inline configs may have written it meanwhile
		{map[string]Config{"a": tokenBucket(1, 10), "c": tokenBucket(5, 5)}, []string{"c"}},   // "c" never named: keys of inline configs, if any
	}
	for i, step := range steps {
		_, before := fs.relimits()
		if err := l.SetLimits(step.limits); err != nil {
			t.Fatal(err)
		}
		_, after := fs.relimits()
		if got := after[len(before):]; !slices.Equal(got, step.want) {
			t.Errorf("step %d: relimited %q, want %q", i, got, step.want)
		}
	}
}

// On a shared store, SetLimits naming a name that calls have used with
// inline configs waits for a call that resolved the name without a
// Config (falling back to the latest inline config) before it moves the
// keys' expiries: that call writes its key under the inline config.
func TestSetLimitsWaitsForCallsOnAnInlineName(t *testing.T) {
	fs := newBlockingStore()
	l, err := openOn(Options{}, fs)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	inline := tokenBucket(1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, err := l.Limit(ctx, Request{Name: "b", Key: "k", Config: &inline}); first <- err }()
	<-fs.entered
	cancel() // abandoned: its call stays in the store
	<-first
	held := make(chan error, 1)
	go func() { _, err := l.Limit(context.Background(), Request{Name: "b", Key: "k"}); held <- err }()
	<-fs.entered
	waiting := make(chan struct{})
	l.gate.waiting = func() { close(waiting) }
	set := make(chan error, 1)
	go func() { set <- l.SetLimits(map[string]Config{"b": tokenBucket(1, 100)}) }()
	select {
	case err := <-set:
		t.Fatalf("SetLimits returned (%v) while a call that resolved b to its inline config was under way", err)
	case <-waiting:
	}
	close(fs.release)
	if err := errors.Join(<-held, <-set); err != nil {
		t.Fatal(err)
	}
	if got, names := fs.relimits(); !slices.Equal(got, []int32{0}) || !slices.Equal(names, []string{"b"}) {
		t.Fatalf("Relimited %q while the store held %v calls, want b once with none", names, got)
	}
}

// On a shared store, a SetLimits whose relimit failed (ErrUnavailable)
// leaves those names to the next SetLimits, which relimits them even with
// the same limits (their keys still expire by the old ones), without
// waiting for the calls under way: they resolved the limits it set.
func TestSetLimitsRetriesAFailedRelimit(t *testing.T) {
	fs := newBlockingStore()
	l, err := openOn(Options{Limits: map[string]Config{"a": tokenBucket(10, 10)}}, fs)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	next := map[string]Config{"a": tokenBucket(1, 10), "b": tokenBucket(1, 10)}
	fs.failRelimits(errors.New("server down"))
	if err := l.SetLimits(next); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("SetLimits: %v, want ErrUnavailable", err)
	}
	fs.failRelimits(nil)
	limited := make(chan error, 1)
	go func() {
		_, err := l.Limit(context.Background(), Request{Name: "a", Key: "k"})
		limited <- err
	}()
	<-fs.entered // a call under way, under the limits the failed SetLimits set
	waited := false
	l.gate.waiting = func() {
		waited = true
		close(fs.release)
	}
	if err := l.SetLimits(next); err != nil {
		t.Fatal(err)
	}
	if waited {
		t.Error("the retry waited for a call that resolved the limits it retries")
	} else {
		close(fs.release)
	}
	if err := <-limited; err != nil {
		t.Fatal(err)
	}
	_, names := fs.relimits()
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("the same limits again: relimited %q, want [a b]", names)
	}
	if err := l.SetLimits(next); err != nil {
		t.Fatal(err)
	}
	if _, again := fs.relimits(); len(again) != 2 {
		t.Fatalf("relimited %q after a SetLimits that changed nothing", again[2:])
	}
}

// On a shared store, removing a limit whose name has an inline config
// relimits the name under that config: a call without a Config falls back
// to it from then on, and reads the keys the removed limit wrote.
func TestSetLimitsRemovingALimitFallsBackToInline(t *testing.T) {
	fs := newBlockingStore()
	close(fs.release)
	go func() {
		for range fs.entered {
		}
	}()
	l, err := openOn(Options{Limits: map[string]Config{"a": tokenBucket(10, 10)}}, fs)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	inline := tokenBucket(1, 10)
	if _, err := l.Limit(context.Background(), Request{Name: "a", Key: "o", Config: &inline}); err != nil {
		t.Fatal(err)
	}
	if err := l.SetLimits(nil); err != nil {
		t.Fatal(err)
	}
	if c, _ := l.Config("a"); c.Rate != inline.Rate {
		t.Fatalf("a now resolves to %+v, want its inline config", c)
	}
	if _, names := fs.relimits(); !slices.Equal(names, []string{"a"}) {
		t.Fatalf("relimited %q after the removal, want [a]", names)
	}
}

// A SetLimits that waits for calls on a shared store while the limiter
// closes returns ErrClosed, and moves no expiries through the store.
func TestSetLimitsClosedWhileWaiting(t *testing.T) {
	fs := newBlockingStore()
	l, err := openOn(Options{Limits: map[string]Config{"a": tokenBucket(10, 10)}}, fs)
	if err != nil {
		t.Fatal(err)
	}
	limited := make(chan error, 1)
	go func() {
		_, err := l.Limit(context.Background(), Request{Name: "a", Key: "k"})
		limited <- err
	}()
	<-fs.entered
	waiting := make(chan struct{})
	l.gate.waiting = func() { close(waiting) }
	set := make(chan error, 1)
	go func() { set <- l.SetLimits(map[string]Config{"a": tokenBucket(1, 10)}) }()
	<-waiting
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	close(fs.release)
	<-limited
	if err := <-set; !errors.Is(err, ErrClosed) {
		t.Fatalf("SetLimits after Close while it waited: %v, want ErrClosed", err)
	}
	if _, names := fs.relimits(); len(names) != 0 {
		t.Fatalf("relimited %q through a closed limiter's store", names)
	}
}
