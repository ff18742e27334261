package ratelimit

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// A key the log could not record is refused up front: nothing consumed, and
// the requests batched with it are unaffected.
func TestOversizedKeyIsRefusedAlone(t *testing.T) {
	clk := newFakeClock()
	l := openDurable(t, filepath.Join(t.TempDir(), "rl.db"), clk, func(o *Options) { o.Partitions = 1 })
	defer l.Close()
	ctx := context.Background()
	huge := strings.Repeat("k", MaxKeyLen+1)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			key := "ok"
			if i%50 == 0 {
				key = huge
			}
			_, err := l.Limit(ctx, Request{Name: "big", Key: key})
			if key == huge && !errors.Is(err, ErrInvalidKey) || key != huge && err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("unexpected result: %v", err)
	}
	if _, err := l.Value(ctx, "big", huge); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("Value: %v", err)
	}
	if err := l.Reset(ctx, "big", huge); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("Reset: %v", err)
	}
	if err := l.Credit(ctx, "big", huge, 1); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("Credit: %v", err)
	}
	if _, err := l.LimitAll(ctx, Request{Name: "big", Key: "ok"}, Request{Name: "big", Key: huge}); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("LimitAll: %v", err)
	}
	out := l.LimitMany(ctx, []Request{{Name: "big", Key: huge}, {Name: "big", Key: "ok"}}, nil)
	if !errors.Is(out[0].Err, ErrInvalidKey) || out[1].Err != nil || !out[1].OK {
		t.Fatalf("LimitMany: %+v", out)
	}
	if v := mustValue(t, l, "big", "ok"); v != 1e9-197 {
		t.Fatalf("value %v, want exactly 197 taken", v)
	}
	// A key of exactly MaxKeyLen works, durably.
	if s := mustLimit(t, l, Request{Name: "tb", Key: huge[:MaxKeyLen]}); !s.OK {
		t.Fatal("max-length key denied")
	}
}

// Repeating one bucket in a LimitAll with counts it could never grant
// together is an error, not a denial that no retry can turn into a grant.
func TestLimitAllRepeatsThatCannotFit(t *testing.T) {
	l, err := Open(Options{Now: newFakeClock().Now, Limits: durableLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if _, err := l.LimitAll(ctx, Request{Name: "tb", Key: "k", Count: 6}, Request{Name: "tb", Key: "k", Count: 6}); !errors.Is(err, ErrInvalidCount) {
		t.Fatalf("6+6 of 10: %v, want ErrInvalidCount", err)
	}
	if s, err := l.LimitAll(ctx, Request{Name: "tb", Key: "k", Count: 6}, Request{Name: "tb", Key: "k", Count: 6, Reserve: true}); err != nil || !s.OK {
		t.Fatalf("6 + 6 reserved: %+v, %v", s, err)
	}
	if v := mustValue(t, l, "tb", "k"); v != -2 {
		t.Fatalf("value %v, want -2", v)
	}
}

func TestFixedWindowStartBefore1970(t *testing.T) {
	start := time.Unix(-1, 0) // windows at ..., -1 s, 59 s, 119 s, ...
	clk := newFakeClock()
	clk.Set(time.Unix(100, 0))
	l, err := Open(Options{Now: clk.Now, Limits: map[string]Config{
		"w": {Kind: FixedWindow, Rate: 1, Period: time.Minute, Start: start},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	v, err := l.Value(context.Background(), "w", "")
	if err != nil || !v.TS.Equal(time.Unix(59, 0)) {
		t.Fatalf("window start %v (%v), want 59 s", v.TS, err)
	}
	if _, err := Open(Options{Limits: map[string]Config{"w": {Kind: FixedWindow, Rate: 1, Period: time.Minute, Start: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)}}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("start in 1500: %v", err)
	}
}

// The memory-mode hot path allocates nothing per decision.
func TestHotPathDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	l, err := Open(Options{Limits: map[string]Config{"u": {Kind: TokenBucket, Rate: 1e9, Period: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	keys := []string{"a", "b", "c", "d"}
	i := 0
	if n := testing.AllocsPerRun(2000, func() {
		i++
		l.Limit(ctx, Request{Name: "u", Key: keys[i%4]})
	}); n != 0 {
		t.Fatalf("Limit allocates %v per call", n)
	}
	rs := make([]Request, 64)
	for j := range rs {
		rs[j] = Request{Name: "u", Key: keys[j%4]}
	}
	out := make([]Decision, 0, 64)
	if n := testing.AllocsPerRun(500, func() { out = l.LimitMany(ctx, rs, out) }); n != 0 {
		t.Fatalf("LimitMany allocates %v per call", n)
	}
}

// Options out of range are refused by Open with ErrInvalidOptions, before
// anything is created at Path.
func TestOpenRejectsInvalidOptions(t *testing.T) {
	for name, mod := range map[string]func(*Options){
		"negative partitions":         func(o *Options) { o.Partitions = -1 },
		"too many partitions":         func(o *Options) { o.Partitions = MaxPartitions + 1 },
		"log preallocation too large": func(o *Options) { o.LogPreallocate = wal.MaxPreallocate + 1 },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rl.db")
			o := Options{Path: path, Limits: durableLimits}
			mod(&o)
			l, err := Open(o)
			if !errors.Is(err, ErrInvalidOptions) {
				if err == nil {
					l.Close()
				}
				t.Fatalf("Open: %v, want ErrInvalidOptions", err)
			}
			if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a refused Open left %s behind: %v", path, err)
			}
		})
	}
}

// A durable limiter's file is preallocated past the log's pages by
// default, and not at all with LogPreallocate < 0.
func TestLogPreallocate(t *testing.T) {
	for _, c := range []struct {
		pre     int64
		atLeast int64
		below   int64
	}{
		{0, wal.DefaultPreallocate, -1},
		{4 << 20, 4 << 20, 5 << 20},
		{-1, 0, 1 << 20},
	} {
		path := filepath.Join(t.TempDir(), "rl.db")
		l, err := Open(Options{Path: path, Limits: durableLimits, LogPreallocate: c.pre})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Limit(context.Background(), Request{Name: "tb", Key: "k"}); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() < c.atLeast || c.below >= 0 && st.Size() >= c.below {
			t.Errorf("LogPreallocate %d: file size %d, want >= %d and < %d", c.pre, st.Size(), c.atLeast, c.below)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
