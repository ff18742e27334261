package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
	bolt "go.etcd.io/bbolt"
)

// Salvage of an intact file reports nothing lost and compacts: the new
// file holds the live buckets, and is smaller than one the log has grown.
func TestSalvageOfAnIntactFileCompacts(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src.db"), filepath.Join(dir, "dst.db")
	writeDamagedBase(t, src)
	clk := ratelimittest.NewClock(damagedT0)
	l, err := Open(Options{Path: src, Now: clk.Now, LogPreallocate: -1, Limits: damagedLimits})
	if err != nil {
		t.Fatal(err)
	}
	var rs []Request
	for key := range damagedKeys() {
		rs = append(rs, Request{Name: "api", Key: key, Count: 0.001})
	}
	for range 20 { // grow the log
		for _, d := range l.LimitMany(context.Background(), rs, nil) {
			if d.Err != nil || !d.OK {
				t.Fatalf("LimitMany: %+v", d)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Salvage(src, dst)
	if err != nil || len(rep.Problems) != 0 || rep.Buckets != len(damagedKeys()) {
		t.Fatalf("Salvage = %+v, %v; want %d buckets and no problem", rep, err, len(damagedKeys()))
	}
	before, _ := os.Stat(src)
	after, _ := os.Stat(dst)
	if after.Size() >= before.Size() {
		t.Errorf("salvaged file %d bytes, original %d: not compacted", after.Size(), before.Size())
	}
	l, err = Open(Options{Path: dst, Now: clk.Now, LogPreallocate: -1, Limits: damagedLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for key, n := range damagedKeys() {
		if v, want := value(t, l, "api", key).Value, 1000-n-0.02; math.Abs(v-want) > 1e-9 {
			t.Fatalf("%s = %v, want %v", key, v, want)
		}
	}
}

// Salvage of a truncated file (shorter than the pages its meta page says
// it uses) recovers what the pages left hold and reports what it lost:
// every key holds what it took, or reads as full (lost).
func TestSalvageOfATruncatedFile(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.db")
	writeDamagedBase(t, base)
	page, hwm := boltGeometry(t, base)
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, pages := range []int64{1, 2, hwm / int64(page) / 2} {
		src, dst := filepath.Join(dir, fmt.Sprint("src", pages)), filepath.Join(dir, fmt.Sprint("dst", pages))
		if err := os.WriteFile(src, b[:hwm-pages*int64(page)], 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := Salvage(src, dst)
		if err != nil || pages <= 2 && rep.Buckets == 0 {
			t.Fatalf("%d pages cut: Salvage = %+v, %v; want the buckets left", pages, rep, err)
		}
		clk := ratelimittest.NewClock(damagedT0)
		l, err := Open(Options{Path: dst, Now: clk.Now, LogPreallocate: -1, Limits: damagedLimits})
		if err != nil {
			t.Fatal(err)
		}
		kept := 0
		for key, n := range damagedKeys() {
			switch v := value(t, l, "api", key).Value; v {
			case 1000 - n:
				kept++
			case 1000:
			default:
				t.Errorf("%d pages cut: %s = %v, want %v or 1000 (lost)", pages, key, v, 1000-n)
			}
		}
		l.Close()
		if kept != rep.Buckets || kept < len(damagedKeys()) && len(rep.Problems) == 0 {
			t.Errorf("%d pages cut: %d keys hold what they took; the report says %d buckets, problems %q", pages, kept, rep.Buckets, rep.Problems)
		}
	}
}

// A salvaged file whose snapshot is then lost is refused (ErrCorrupt), not
// opened empty: its snapshot stands above a truncation mark. A salvage
// leaves only the finished file in the directory.
func TestSalvagedFileKnowsItsSnapshot(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src.db"), filepath.Join(dir, "dst.db")
	writeDamagedBase(t, src)
	if _, err := Salvage(src, dst); err != nil {
		t.Fatal(err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 2 {
		t.Errorf("files after a salvage: %v, want src.db and dst.db", names)
	}
	db, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("snapshot")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(Options{Path: dst, LogPreallocate: -1, Limits: damagedLimits}); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			l.Close()
		}
		t.Fatalf("Open of a salvaged file without its snapshot: %v, want ErrCorrupt", err)
	}
}

func TestSalvageRefuses(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	writeDamagedBase(t, src)
	foreign := filepath.Join(dir, "foreign.db")
	if err := os.WriteFile(foreign, []byte("not a database at all, just text"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(Options{Path: src, LogPreallocate: -1, Limits: damagedLimits})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Salvage(src, filepath.Join(dir, "a.db")); !errors.Is(err, ErrLocked) {
		t.Errorf("Salvage of a file a limiter has open = %v, want ErrLocked", err)
	}
	l.Close()
	if _, err := Salvage(src, foreign); !errors.Is(err, os.ErrExist) {
		t.Errorf("Salvage into an existing file = %v, want os.ErrExist", err)
	}
	if _, err := Salvage(foreign, filepath.Join(dir, "b.db")); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Salvage of a foreign file = %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused salvage left a file behind: %v", err)
	}
}
