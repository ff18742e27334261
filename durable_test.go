package ratelimit

// Durability (Options.Path): state across Close and reopen, snapshots,
// the file itself.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
	bolt "go.etcd.io/bbolt"
)

// Reopening restores every bucket, reserved debt included, and every reset,
// with and without a snapshot in between.
func TestReopenRestoresState(t *testing.T) {
	for _, snap := range []bool{false, true} {
		t.Run("snapshot="+strconv.FormatBool(snap), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "rl.db")
			clk := newClock()
			ctx := context.Background()
			l := open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now})
			limit(t, l, Request{Name: "tb", Key: "a", Count: 7})
			limit(t, l, Request{Name: "tb", Key: "debt", Count: 25, Reserve: true})
			limit(t, l, Request{Name: "fw", Key: "a", Count: 4})
			limit(t, l, Request{Name: "sh", Count: 15})
			limit(t, l, Request{Name: "tb", Key: "reset", Count: 9})
			if s, err := l.LimitAll(ctx, Request{Name: "tb", Key: "all"}, Request{Name: "fw", Key: "all", Count: 2}); err != nil || !s.OK {
				t.Fatalf("LimitAll = %+v, %v", s, err)
			}
			if snap {
				if err := l.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Reset(ctx, "tb", "reset"); err != nil {
				t.Fatal(err)
			}
			limit(t, l, Request{Name: "tb", Key: "a", Count: 1})
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now})
			for _, c := range []struct {
				name, key string
				want      float64
			}{{"tb", "a", 2}, {"tb", "debt", -15}, {"fw", "a", 6}, {"sh", "", 25}, {"tb", "reset", 10}, {"tb", "all", 9}, {"fw", "all", 8}, {"tb", "fresh", 10}} {
				if got := value(t, l, c.name, c.key).Value; got != c.want {
					t.Errorf("%s/%s after reopen = %v, want %v", c.name, c.key, got, c.want)
				}
			}
		})
	}
}

// Durable mode: odd names and keys (NUL, invalid UTF-8, empty, maximum
// length) survive a restart exactly; an inline-only limit is unknown to
// Value after a restart (documented) but its recovered state is used as soon
// as a request carries the config again.
func TestDurableOddNamesAndKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newClock()
	maxName := strings.Repeat("N", MaxKeyLen)
	limits := map[string]Config{"": tb(100, time.Minute), "n\x00\xff": fw(100, time.Minute, time.Time{}), maxName: tb(100, time.Minute)}
	keys := []string{"", "\x00", "a\x00", "\xff\xfe\x80", "ключ", strings.Repeat("k", MaxKeyLen)}
	inline := tb(7, time.Hour)
	l := open(t, Options{Path: path, Now: clk.Now, Limits: limits})
	for name := range limits {
		for i, k := range keys {
			if st, err := l.Limit(ctx, Request{Name: name, Key: k, Count: float64(i + 1)}); err != nil || !st.OK {
				t.Fatalf("%q/%q: %+v %v", name, k, st, err)
			}
		}
	}
	if _, err := l.Limit(ctx, Request{Name: "inl", Key: "k", Count: 5, Config: &inline}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, Options{Path: path, Now: clk.Now, Limits: limits})
	for name := range limits {
		for i, k := range keys {
			if v := value(t, l, name, k); v.Value != 100-float64(i+1) {
				t.Errorf("%q/%q after restart: %v, want %v", name, k, v.Value, 100-float64(i+1))
			}
		}
	}
	if _, err := l.Value(ctx, "inl", "k"); !errors.Is(err, ErrUnknownLimit) {
		t.Errorf("inline-only limit after restart: %v, want ErrUnknownLimit (documented)", err)
	}
	if st, err := l.Limit(ctx, Request{Name: "inl", Key: "k", Count: 3, Config: &inline}); err != nil || st.OK {
		t.Errorf("inline limit after restart with 2 left, take 3: %+v, %v; want denied (state recovered)", st, err)
	}
}

// Memory and snapshots follow active keys: after a wave of one-off keys has
// refilled, the maps and the next snapshot hold almost nothing, and later
// waves do not grow the file's used pages.
func TestOneOffKeysDoNotAccumulate(t *testing.T) {
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 100_000
	}
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newClock()
	opts := Options{Path: path, Limits: durableLimits, Now: clk.Now}
	l := open(t, opts)
	ctx := context.Background()
	wave := func(w int) {
		rs := make([]Request, 0, 1024)
		var out []Decision
		for i := 0; i < n; i += cap(rs) {
			rs = rs[:0]
			for j := i; j < i+cap(rs) && j < n; j++ {
				rs = append(rs, Request{Name: "tb", Key: "w" + strconv.Itoa(w) + "-" + strconv.Itoa(j)})
			}
			out = l.LimitMany(ctx, rs, out)
			for _, d := range out {
				if d.Err != nil || !d.OK {
					t.Fatalf("wave %d: %+v", w, d)
				}
			}
		}
	}
	var sizes []int64
	for w := 0; w < 3; w++ {
		wave(w)
		if got := liveBuckets(l); got != n {
			t.Fatalf("wave %d: %d live buckets, want %d", w, got, n)
		}
		clk.Advance(time.Minute) // every bucket refills
		if err := l.Snapshot(); err != nil {
			t.Fatal(err)
		}
		if got := liveBuckets(l); got != 0 {
			t.Fatalf("wave %d: %d live buckets after refill, want 0", w, got)
		}
		// The pages in use (the file itself also holds preallocated
		// zeros ahead of them, a step at a time).
		var used int64
		if err := l.wal.DB().View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, used)
	}
	// bbolt reuses freed pages, so identical waves reuse the space the
	// first one grew; what they move is its own fragmentation, a little
	// (more when a commit races a snapshot's read transaction, which
	// keeps the pages it reads). Keys that accumulated would add about a
	// wave's worth of pages each time.
	if sizes[2] > sizes[1]+sizes[1]/10 {
		t.Fatalf("the file's used pages grew across identical waves: %v", sizes)
	}
	// The snapshot is empty: reopening restores nothing.
	l.Close()
	l = open(t, opts)
	if got := liveBuckets(l); got != 0 {
		t.Fatalf("%d buckets restored, want 0", got)
	}
}

// A file another limiter holds is refused with ErrUnavailable once
// LockTimeout has passed.
func TestOpenLockedFileFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.db")
	open(t, Options{Path: path, Limits: durableLimits, Now: newClock().Now})
	start := time.Now()
	_, err := Open(Options{Path: path, Limits: durableLimits, LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("second Open: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("second Open took %v", d)
	}
}

// A path that is not a bbolt file, or that cannot be created, is refused
// with ErrUnavailable.
func TestOpenBadFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"garbage", func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "garbage.db")
			if err := os.WriteFile(path, []byte("this is not a bbolt file, not at all"), 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}},
		{"uncreatable directory", func(t *testing.T) string {
			blocker := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(blocker, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(blocker, "sub", "rl.db")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Open(Options{Path: tc.path(t)})
			if !errors.Is(err, ErrUnavailable) {
				if err == nil {
					l.Close()
				}
				t.Fatalf("Open: %v, want ErrUnavailable", err)
			}
		})
	}
}

// A durable limiter's file is preallocated past the log's pages by
// default, and not at all with LogPreallocate < 0. (Open's defaults
// themselves, so Open rather than the tests' open.)
func TestLogPreallocate(t *testing.T) {
	for _, c := range []struct {
		name    string
		pre     int64
		atLeast int64
		below   int64
	}{
		{"default", 0, wal.DefaultPreallocate, -1},
		{"4MiB", 4 << 20, 4 << 20, 5 << 20},
		{"off", -1, 0, 1 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rl.db")
			var logs bytes.Buffer
			l, err := Open(Options{Path: path, Limits: durableLimits, LogPreallocate: c.pre,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(logs.String(), "nearly full") {
				l.Close()
				t.Skip("the temporary directory's file system is nearly full, where preallocation stays off by design; run with TMPDIR on a roomier one")
			}
			if _, err := l.Limit(bg, Request{Name: "tb", Key: "k"}); err != nil {
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
		})
	}
}
