package wal

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A preallocator keeps between half a step and a step of zeros past the
// used pages: a fill tops it up once less than half is left.
func TestPreallocatorGrowsInSteps(t *testing.T) {
	const step = 4 << 20
	path := filepath.Join(t.TempDir(), "p.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := newPreallocator(path, db, step, slog.New(slog.DiscardHandler))
	defer p.close()
	always := func() bool { return true }
	p.fill(always)
	used, size, _ := p.extents()
	if size-used < step || size-used >= step+int64(db.Info().PageSize) {
		t.Fatalf("after the first fill: %d bytes of zeros past %d used, want one step (%d)", size-used, used, step)
	}
	if p.due() {
		t.Fatal("due with a whole step left")
	}
	// Use most of it.
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), bytes.Repeat([]byte("v"), 2600<<10))
	}); err != nil {
		t.Fatal(err)
	}
	if !p.due() {
		used, size, _ := p.extents()
		t.Fatalf("not due with %d bytes of zeros left of a %d step", size-used, step)
	}
	// A fill interrupted after one chunk writes one chunk.
	chunks := 0
	p.fill(func() bool { chunks++; return chunks == 1 })
	_, size2, _ := p.extents()
	if size2-size != zeroChunk {
		t.Fatalf("an interrupted fill wrote %d bytes, want one chunk (%d)", size2-size, zeroChunk)
	}
	p.fill(always)
	used, size, _ = p.extents()
	if size-used < step {
		t.Fatalf("after topping up: %d bytes of zeros past %d used, want a step", size-used, used)
	}
}

// Preallocation never takes the last free space of its file system: below
// the margin it writes nothing, and says so once.
func TestPreallocatorKeepsAMargin(t *testing.T) {
	const step = 1 << 20
	orig := freeSpace
	t.Cleanup(func() { freeSpace = orig })
	for _, c := range []struct {
		name        string
		free, total uint64
		wantZeros   bool
	}{
		{"plenty", 1 << 40, 1 << 41, true},
		{"less than two steps free", 2*step - 1, 1 << 30, false},
		{"less than a twentieth free", 40 << 20, 1 << 30, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			freeSpace = func(string) (uint64, uint64, error) { return c.free, c.total, nil }
			var logs bytes.Buffer
			path := filepath.Join(t.TempDir(), "p.db")
			l := mustOpen(t, path, Options{Preallocate: step, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			used, size, err := l.prealloc.extents()
			if err != nil {
				t.Fatal(err)
			}
			if got := size-used >= step; got != c.wantZeros {
				t.Fatalf("%d bytes of zeros past the used pages; want a step: %v", size-used, c.wantZeros)
			}
			if warned := strings.Contains(logs.String(), "nearly full"); warned == c.wantZeros {
				t.Fatalf("warning logged: %v, want %v; log:\n%s", warned, !c.wantZeros, logs.String())
			}
		})
	}
}
