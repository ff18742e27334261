package ratelimit

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/filestate"
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

// Salvage keeps every part of a damaged snapshot that checks out: one
// flipped byte in one chunk loses that chunk's buckets only, and one in
// the head loses none (the truncation mark gives the snapshot's
// position). The loss is reported; no bucket holds more than it took.
func TestSalvageKeepsTheSnapshotsGoodParts(t *testing.T) {
	for _, part := range []string{"chunk", "head"} {
		t.Run(part, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src.db"), filepath.Join(dir, "dst.db")
			clk := newClock()
			opts := Options{Path: src, Now: clk.Now, LogPreallocate: -1, SnapshotBytes: -1, SnapshotInterval: -1, SweepInterval: -1,
				Limits: map[string]Config{"api": {Kind: TokenBucket, Rate: 100, Period: time.Hour}}}
			l := open(t, opts)
			var rs []Request
			for i := range 4000 {
				rs = append(rs, Request{Name: "api", Key: fmt.Sprintf("user-%06d-padding-to-fill-chunks", i), Count: 7})
			}
			for _, d := range l.LimitMany(bg, rs, nil) {
				if d.Err != nil || !d.OK {
					t.Fatal(d)
				}
			}
			if err := l.Snapshot(); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			db, err := bolt.Open(src, 0o600, &bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			var target []byte
			chunks := 0
			if err := db.View(func(tx *bolt.Tx) error {
				snap := tx.Bucket([]byte("snapshot"))
				chunks = snap.Bucket([]byte("chunks")).Stats().KeyN
				if part == "chunk" {
					c := snap.Bucket([]byte("chunks")).Cursor()
					c.First()
					_, v := c.Next() // the second chunk
					target = bytes.Clone(v)
				} else {
					target = bytes.Clone(snap.Get([]byte("head")))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			db.Close()
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			at := bytes.Index(b, target)
			if chunks < 3 || len(target) == 0 || at < 0 || bytes.Index(b[at+1:], target) >= 0 {
				t.Fatalf("%d chunks; the %s not found once in the file", chunks, part)
			}
			b[at+len(target)-5] ^= 1 // in the chunk's records, or the head's checksum
			if err := os.WriteFile(src, b, 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := Salvage(src, dst)
			if err != nil || len(rep.Problems) == 0 {
				t.Fatalf("Salvage = %+v, %v; want a report of the damaged %s", rep, err, part)
			}
			opts.Path = dst
			l = open(t, opts)
			lost := 0
			for _, r := range rs {
				switch v := value(t, l, "api", r.Key).Value; v {
				case 93:
				case 100:
					lost++
				default:
					t.Fatalf("%s = %v, want 93 or 100 (lost)", r.Key, v)
				}
			}
			if most := map[string]int{"chunk": len(rs)/chunks + len(rs)/10, "head": 0}[part]; lost > most || part == "chunk" && lost == 0 {
				t.Errorf("one damaged %s of a snapshot of %d chunks lost %d of %d buckets, want at most %d (and some for a chunk)", part, chunks, lost, len(rs), most)
			}
			if rep.Buckets != len(rs)-lost || rep.SnapshotRecords != len(rs)-lost {
				t.Errorf("report %+v, %d buckets held", rep, len(rs)-lost)
			}
		})
	}
}

// A damaged pointer may lead salvage from the snapshot's chunks to a page
// that is not the snapshot's: an older snapshot's chunk, or log batches a
// snapshot truncated, whose checksums pass and whose states are older
// than the file's. Pointing the chunks bucket at each freed leaf page in
// turn, no salvaged bucket may hold more than the file last held; also
// when the older snapshot has the same shape as the last (the same keys in
// as many chunks), which only the position in its chunk keys tells apart.
func TestSalvageTakesNoChunkThatIsNotTheSnapshots(t *testing.T) {
	for _, rounds := range [][]int{{300, 350}, {300, 300}} {
		t.Run(fmt.Sprint(rounds), func(t *testing.T) { salvageFromPointedPages(t, rounds, "chunks") })
	}
}

// The same with the snapshot bucket itself pointed at an older snapshot's
// page, so that salvage reads an older head, intact, and its chunks: the
// head, below the file's truncation mark, is not taken for the
// snapshot's.
func TestSalvageTakesNoOlderSnapshot(t *testing.T) {
	for _, rounds := range [][]int{{300, 350, 400}, {300, 300, 300}} {
		t.Run(fmt.Sprint(rounds), func(t *testing.T) { salvageFromPointedPages(t, rounds, "snapshot") })
	}
}

// salvageFromPointedPages writes a snapshot after each round's grants, and
// a few grants after the last, then salvages copies whose bucket named
// which ("chunks", in the snapshot bucket, or the top-level "snapshot")
// points at each leaf page that could be its root in turn.
func salvageFromPointedPages(t *testing.T, rounds []int, which string) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	clk := newClock()
	l := open(t, Options{Path: src, Now: clk.Now, LogPreallocate: -1, SnapshotBytes: -1, SnapshotInterval: -1, SweepInterval: -1,
		Limits: map[string]Config{"api": {Kind: TokenBucket, Rate: 100, Period: time.Hour}}})
	for round, n := range rounds { // a snapshot each: the earlier ones' pages and the log's are freed
		for i := range n {
			grant(t, l, Request{Name: "api", Key: fmt.Sprintf("user-%06d", i), Count: 7})
		}
		if err := l.Snapshot(); err != nil {
			t.Fatal(round, err)
		}
	}
	for i := range 5 {
		grant(t, l, Request{Name: "api", Key: fmt.Sprintf("user-%06d", i), Count: 1})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	good, err := filestate.Read(src)
	if err != nil || len(good.Problems) > 0 {
		t.Fatal(err, good.Problems)
	}
	held := map[string]float64{}
	for _, r := range good.Buckets {
		held[r.Key] = r.Value
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := boltGeometry(t, src)
	db, err := bolt.Open(src, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var snapRoot int
	err = db.View(func(tx *bolt.Tx) error { snapRoot = int(tx.Bucket([]byte("snapshot")).Root()); return nil })
	db.Close()
	if err != nil || snapRoot == 0 {
		t.Fatalf("the snapshot bucket's root: %d, %v", snapRoot, err)
	}
	// The top-level buckets' root page, in the newer meta page (pages 0
	// and 1: after the page header, the root page id at 16, the
	// transaction id at 48).
	meta := b[16:]
	if m1 := b[page+16:]; binary.LittleEndian.Uint64(m1[48:]) > binary.LittleEndian.Uint64(meta[48:]) {
		meta = m1
	}
	topRoot := int(binary.LittleEndian.Uint64(meta[16:]))
	// A bucket's header, in its parent's leaf page: its root page id
	// follows the name.
	parent := map[string]int{"chunks": snapRoot, "snapshot": topRoot}[which]
	at := parent*page + bytes.Index(b[parent*page:(parent+1)*page], []byte(which))
	if at < parent*page {
		t.Fatalf("no %s bucket header in page %d", which, parent)
	}
	tried := 0
	for id := 2; (id+1)*page <= len(b); id++ {
		p := b[id*page : (id+1)*page]
		const leaf = 0x02
		if binary.LittleEndian.Uint64(p) != uint64(id) || binary.LittleEndian.Uint16(p[8:]) != leaf || binary.LittleEndian.Uint16(p[10:]) == 0 {
			continue
		}
		switch which {
		case "chunks": // a leaf whose first key is a log's or a chunk's
			if !slices.Contains([]uint32{8, 16}, binary.LittleEndian.Uint32(p[16+8:])) {
				continue
			}
		case "snapshot": // an older snapshot bucket's root
			if id == snapRoot || !bytes.Contains(p, []byte("chunks")) || !bytes.Contains(p, []byte("head")) {
				continue
			}
		}
		d := bytes.Clone(b)
		binary.LittleEndian.PutUint64(d[at+len(which):], uint64(id))
		path := filepath.Join(dir, fmt.Sprint("pointed-", id))
		if err := os.WriteFile(path, d, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := filestate.Read(path)
		if err != nil {
			continue
		}
		tried++
		for _, r := range c.Buckets {
			if want, ok := held[r.Key]; ok && r.Value > want {
				t.Fatalf("the %s bucket pointed at page %d: %s holds %v, the file held %v (%d snapshot records read; %v)",
					which, id, r.Key, r.Value, want, c.SnapshotRecords, c.SnapshotErr)
			}
		}
	}
	if min := map[string]int{"chunks": 3, "snapshot": 1}[which]; tried < min {
		t.Fatalf("only %d pages tried", tried)
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
