package ratelimit

// Open, Close and the Limiter value itself: closed, nil and zero limiters,
// and every method under an ended context.

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Close once succeeds, again is ErrClosed; after it every method is
// ErrClosed, bad input never a grant.
func TestClose(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Limits: limitAllLimits(), Now: clk.Now})
	limit(t, l, Request{Name: "a", Key: "k"})
	if err := l.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	for i := 0; i < 3; i++ {
		if err := l.Close(); !errors.Is(err, ErrClosed) {
			t.Errorf("Close #%d: err = %v, want ErrClosed", i+2, err)
		}
	}
	r := Request{Name: "a", Key: "k"}
	if _, err := l.Limit(bg, r); !errors.Is(err, ErrClosed) {
		t.Errorf("Limit after Close: %v", err)
	}
	if _, err := l.Check(bg, r); !errors.Is(err, ErrClosed) {
		t.Errorf("Check after Close: %v", err)
	}
	if _, err := l.LimitAll(bg, r, Request{Name: "b", Key: "k"}); !errors.Is(err, ErrClosed) {
		t.Errorf("LimitAll after Close: %v", err)
	}
	if err := l.Reset(bg, "a", "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Reset after Close: %v", err)
	}
	if _, err := l.Value(bg, "a", "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Value after Close: %v", err)
	}
	ds := l.LimitMany(bg, []Request{r, r}, nil)
	if len(ds) != 2 || !errors.Is(ds[0].Err, ErrClosed) || !errors.Is(ds[1].Err, ErrClosed) {
		t.Errorf("LimitMany after Close = %+v", ds)
	}
	// even bad input reports closed or its own error, never a grant
	if st, err := l.Limit(bg, Request{Name: "nope"}); err == nil || st.OK {
		t.Errorf("Limit unknown after Close = %+v, %v", st, err)
	}
}

// A nil *Limiter panics, like most Go types with a constructor, and so
// does a nil context, as in the standard library. A zero Limiter is closed:
// every method returns ErrClosed (it panicked in Close, on inline requests,
// Value, Stats and Snapshot).
func TestNilAndZeroLimiter(t *testing.T) {
	ctx := context.Background()
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	var nl *Limiter
	mustPanic("nil.Limit", func() { _, _ = nl.Limit(ctx, Request{Name: "a"}) })
	mustPanic("nil.Close", func() { _ = nl.Close() })
	var zl Limiter
	inline := tb(1, time.Second)
	closed := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, ErrClosed) {
			t.Errorf("zero Limiter: %s = %v, want ErrClosed", name, err)
		}
	}
	_, err := zl.Limit(ctx, Request{Name: "a", Config: &inline})
	closed("Limit inline", err)
	_, err = zl.Check(ctx, Request{Name: "a"})
	closed("Check", err)
	_, err = zl.LimitAll(ctx, Request{Name: "a", Config: &inline})
	closed("LimitAll", err)
	ds := zl.LimitMany(ctx, []Request{{Name: "a", Config: &inline}}, nil)
	if len(ds) != 1 {
		t.Fatalf("zero Limiter: LimitMany gave %d decisions for 1 request", len(ds))
	}
	closed("LimitMany", ds[0].Err)
	_, err = zl.Value(ctx, "a", "k")
	closed("Value", err)
	closed("Reset", zl.Reset(ctx, "a", "k"))
	closed("Credit", zl.Credit(ctx, "a", "k", 1))
	closed("Snapshot", zl.Snapshot())
	closed("Close", zl.Close())
	if st := zl.Stats(); st != (Stats{}) {
		t.Errorf("zero Limiter: Stats = %+v, want zero", st)
	}
	ok, err := zl.Grantable(Request{Name: "a", Config: &inline})
	closed("Grantable inline", err)
	if _, found := zl.Config("a"); found || ok {
		t.Error("zero Limiter: Config found a limit, or Grantable granted")
	}
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"a": inline}})
	//lint:ignore SA1012 deliberately nil
	mustPanic("nil ctx", func() { _, _ = l.Limit(nil, Request{Name: "a"}) }) //nolint:staticcheck
}

// Every method under a canceled or expired context fails with the
// context's error and consumes or resets nothing.
func TestCanceledContext(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: limitAllLimits()})
	limit(t, l, Request{Name: "a", Key: "k", Count: 5})
	limit(t, l, Request{Name: "s", Key: "k", Count: 5})
	canceled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancel2 := context.WithDeadline(bg, time.Now().Add(-time.Hour))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{{"canceled", canceled, context.Canceled}, {"deadline", expired, context.DeadlineExceeded}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := c.ctx
			r := Request{Name: "a", Key: "k", Count: 1}
			if _, err := l.Limit(ctx, r); !errors.Is(err, c.want) {
				t.Errorf("Limit: err = %v, want %v", err, c.want)
			}
			if _, err := l.Limit(ctx, Request{Name: "s", Key: "k", Count: 12}); !errors.Is(err, c.want) {
				t.Errorf("Limit sharded: err = %v, want %v", err, c.want)
			}
			if _, err := l.Limit(ctx, Request{Name: "a", Key: "k", Count: 20, Reserve: true}); !errors.Is(err, c.want) {
				t.Errorf("Limit reserve: err = %v, want %v", err, c.want)
			}
			if _, err := l.Check(ctx, r); !errors.Is(err, c.want) {
				t.Errorf("Check: err = %v, want %v", err, c.want)
			}
			if _, err := l.LimitAll(ctx, r, Request{Name: "b", Key: "k"}, Request{Name: "s", Key: "k"}); !errors.Is(err, c.want) {
				t.Errorf("LimitAll: err = %v, want %v", err, c.want)
			}
			ds := l.LimitMany(ctx, []Request{r, {Name: "b", Key: "k"}}, nil)
			if len(ds) != 2 || !errors.Is(ds[0].Err, c.want) || !errors.Is(ds[1].Err, c.want) {
				t.Errorf("LimitMany = %+v, want every decision %v", ds, c.want)
			}
			if err := l.Reset(ctx, "a", "k"); !errors.Is(err, c.want) {
				t.Errorf("Reset: err = %v, want %v", err, c.want)
			}
			if _, err := l.Value(ctx, "a", "k"); !errors.Is(err, c.want) {
				t.Errorf("Value: err = %v, want %v", err, c.want)
			}
			wantValue(t, l, "a", "k", 5) // neither consumed nor reset
			wantValue(t, l, "s", "k", 35)
			wantValue(t, l, "b", "k", 5)
		})
	}
}

// Options.Partitions 0 is 16 partitions per processor in memory and 8
// with a file; a number given is kept.
func TestDefaultPartitions(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for _, c := range []struct {
		name  string
		opts  Options
		parts int
	}{
		{"memory", Options{}, min(16*procs, MaxPartitions)},
		{"file", Options{Path: filepath.Join(t.TempDir(), "l.db")}, min(8*procs, MaxPartitions)},
		{"given", Options{Partitions: 3}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := open(t, c.opts)
			if got := l.Stats().Partitions; got != c.parts {
				t.Errorf("%d partitions, want %d", got, c.parts)
			}
		})
	}
}
