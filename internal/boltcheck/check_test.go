package boltcheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// sampleFile builds a bbolt file with nested buckets, an inline bucket,
// branch pages and overflow values, and returns its bytes.
func sampleFile(t testing.TB, syncFreelist bool) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sample.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: !syncFreelist})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("log"))
		if err != nil {
			return err
		}
		for i := range 2000 {
			if err := b.Put(binary.BigEndian.AppendUint64(nil, uint64(i)), bytes.Repeat([]byte{byte(i)}, 40)); err != nil {
				return err
			}
		}
		if err := b.Put([]byte("zz-big"), bytes.Repeat([]byte("v"), 3*4096)); err != nil {
			return err
		}
		outer, err := tx.CreateBucket([]byte("snapshot"))
		if err != nil {
			return err
		}
		inner, err := outer.CreateBucket([]byte("chunks"))
		if err != nil {
			return err
		}
		for i := range 300 {
			if err := inner.Put([]byte(fmt.Sprintf("chunk-%04d", i)), bytes.Repeat([]byte("c"), 100)); err != nil {
				return err
			}
		}
		small, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		return small.Put([]byte("magic"), []byte("m"))
	})
	if err != nil {
		t.Fatal(err)
	}
	// A second transaction frees pages, so a synced freelist has ids.
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("log")).Delete([]byte("zz-big")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func check(b []byte) error { return Check(bytes.NewReader(b), int64(len(b))) }

func TestCheckAcceptsAWellFormedFile(t *testing.T) {
	for _, synced := range []bool{false, true} {
		if err := check(sampleFile(t, synced)); err != nil {
			t.Errorf("freelist synced %v: %v", synced, err)
		}
	}
}

// pagesOf returns the ids of the pages of the given type in b, from the
// page headers (pages of a file just written by bbolt name themselves).
func pagesOf(b []byte, flags uint16) []int {
	var ids []int
	for id := 2; (id+1)*4096 <= len(b); id++ {
		p := b[id*4096:]
		if binary.LittleEndian.Uint64(p) == uint64(id) && binary.LittleEndian.Uint16(p[8:]) == flags && binary.LittleEndian.Uint16(p[10:]) > 1 {
			ids = append(ids, id)
		}
	}
	return ids
}

func hwm(b []byte) uint64 {
	m0, m1 := b[16:], b[4096+16:]
	if binary.LittleEndian.Uint64(m1[48:]) > binary.LittleEndian.Uint64(m0[48:]) {
		return binary.LittleEndian.Uint64(m1[40:])
	}
	return binary.LittleEndian.Uint64(m0[40:])
}

// Each kind of damage that would crash bbolt's walk (or silently lose a
// commit) is found, and reported as ErrDamaged.
func TestCheckFindsDamage(t *testing.T) {
	cases := []struct {
		name    string
		synced  bool
		damage  func(b []byte) []byte
		message string
	}{
		{"truncated below the high-water mark", false, func(b []byte) []byte { return b[:(hwm(b)-1)*4096] }, "high-water mark"},
		{"shorter than a meta page", false, func(b []byte) []byte { return b[:50] }, "no valid meta"},
		{"newer meta page damaged", false, func(b []byte) []byte {
			off := 16
			if binary.LittleEndian.Uint64(b[4096+16+48:]) > binary.LittleEndian.Uint64(b[16+48:]) {
				off = 4096 + 16
			}
			b[off+30] ^= 1
			return b
		}, "last transaction may be lost"},
		{"both meta pages damaged", false, func(b []byte) []byte { b[16] ^= 1; b[4096+16] ^= 1; return b }, "no valid meta"},
		{"page names another id", false, func(b []byte) []byte {
			id := pagesOf(b, leafPage)[0]
			b[id*4096] ^= 0x40
			return b
		}, "names itself"},
		{"page of an unknown type", false, func(b []byte) []byte {
			id := pagesOf(b, leafPage)[0]
			binary.LittleEndian.PutUint16(b[id*4096+8:], 0x20)
			return b
		}, "flags"},
		{"overflow past the high-water mark", false, func(b []byte) []byte {
			id := pagesOf(b, leafPage)[0]
			binary.LittleEndian.PutUint32(b[id*4096+12:], 1<<30)
			return b
		}, "overflow"},
		{"child beyond the high-water mark", false, func(b []byte) []byte {
			id := pagesOf(b, branchPage)[0]
			binary.LittleEndian.PutUint64(b[id*4096+16+8:], hwm(b)+7)
			return b
		}, "outside"},
		{"child reached twice", false, func(b []byte) []byte {
			id := pagesOf(b, branchPage)[0]
			first := binary.LittleEndian.Uint64(b[id*4096+16+8:])
			binary.LittleEndian.PutUint64(b[id*4096+16+16+8:], first)
			return b
		}, "reached twice"},
		{"key past the end of its page", false, func(b []byte) []byte {
			id := pagesOf(b, leafPage)[0]
			binary.LittleEndian.PutUint32(b[id*4096+16+8:], 1<<31) // ksize of element 0
			return b
		}, "passes the end"},
		{"more elements than the page holds", false, func(b []byte) []byte {
			id := pagesOf(b, leafPage)[0]
			binary.LittleEndian.PutUint16(b[id*4096+10:], 0xFFFF)
			return b
		}, "do not fit"},
		{"keys out of order", false, func(b []byte) []byte {
			id := pagesOf(b, leafPage)[0]
			e0, e1 := b[id*4096+16:id*4096+32], b[id*4096+32:id*4096+48]
			pos0, pos1 := binary.LittleEndian.Uint32(e0[4:]), binary.LittleEndian.Uint32(e1[4:])
			// Swap the keys (pos counts from each element itself).
			binary.LittleEndian.PutUint32(e0[4:], pos1+16)
			binary.LittleEndian.PutUint32(e1[4:], pos0-16)
			return b
		}, "order"},
		{"freelist names a page in use", true, func(b []byte) []byte {
			for _, off := range []int{16, 4096 + 16} {
				fl := binary.LittleEndian.Uint64(b[off+32:])
				p := b[int(fl)*4096:]
				if binary.LittleEndian.Uint16(p[8:]) == freelistPage && binary.LittleEndian.Uint16(p[10:]) > 0 {
					binary.LittleEndian.PutUint64(p[16:], binary.LittleEndian.Uint64(b[off+16:])) // the root's page
				}
			}
			return b
		}, "both free and in use"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.damage(sampleFile(t, c.synced))
			err := check(b)
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("Check = %v, want ErrDamaged", err)
			}
			if !bytes.Contains([]byte(err.Error()), []byte(c.message)) {
				t.Errorf("Check = %v, want a message mentioning %q", err, c.message)
			}
		})
	}
}

// Walk goes past damage and still reads the rest.
func TestWalkSkipsDamagedSubtrees(t *testing.T) {
	b := sampleFile(t, false)
	id := pagesOf(b, leafPage)[0]
	b[id*4096] ^= 0x40 // one leaf names another id
	var keys int
	problems, err := Walk(bytes.NewReader(b), int64(len(b)), func(path [][]byte, key, value []byte, bucket bool) {
		if !bucket {
			keys++
		}
	})
	if err != nil || len(problems) != 1 {
		t.Fatalf("Walk = %v, %v; want one problem", problems, err)
	}
	if keys < 2000 {
		t.Fatalf("Walk read %d keys, want most of the 2,301", keys)
	}
}

// A damaged pointer that leads one tree to another tree's intact page
// costs only the first tree: the page's own parent still reads it.
func TestWalkKeepsAPageADamagedPointerReaches(t *testing.T) {
	b := sampleFile(t, false)
	key := func(id, i int) []byte { // element i's key on branch or leaf page id
		e := b[id*4096+16+i*16:]
		pos, ksize := int(binary.LittleEndian.Uint32(e[0:])), int(binary.LittleEndian.Uint32(e[4:]))
		if binary.LittleEndian.Uint16(b[id*4096+8:]) == leafPage {
			pos, ksize = int(binary.LittleEndian.Uint32(e[4:])), int(binary.LittleEndian.Uint32(e[8:]))
		}
		off := id*4096 + 16 + i*16 + pos
		return b[off : off+ksize]
	}
	var logBranches []int // the log's root, and a copy an earlier commit freed
	chunkLeaf := -1
	for _, id := range pagesOf(b, branchPage) {
		if len(key(id, 0)) == 8 {
			logBranches = append(logBranches, id)
		}
	}
	for _, id := range pagesOf(b, leafPage) {
		if bytes.HasPrefix(key(id, 0), []byte("chunk-")) {
			chunkLeaf = id
		}
	}
	if len(logBranches) == 0 || chunkLeaf < 0 {
		t.Fatalf("the sample has no log branch (%v) or chunk leaf (%d)", logBranches, chunkLeaf)
	}
	for _, id := range logBranches {
		binary.LittleEndian.PutUint64(b[id*4096+16+16+8:], uint64(chunkLeaf)) // the log's child 1
	}
	chunks := 0
	problems, err := Walk(bytes.NewReader(b), int64(len(b)), func(path [][]byte, key, value []byte, bucket bool) {
		if len(path) == 2 && string(path[1]) == "chunks" && !bucket {
			chunks++
		}
	})
	if err != nil || len(problems) != 1 || chunks != 300 {
		t.Fatalf("Walk: %d chunks read, want 300; problems %v, %v; want only the log's", chunks, problems, err)
	}
}

// FuzzCheck: Check never panics or hangs on any content.
// A meta page (with a valid checksum) may claim any number of pages:
// salvage's lenient walk reports a file that holds fewer as damaged; it
// neither panics nor allocates for the pages claimed.
func TestWalkOfAMetaPageClaimingHugeFile(t *testing.T) {
	b := sampleFile(t, false)
	ps := int(binary.LittleEndian.Uint32(b[pageHeaderSize+8:]))
	for _, claim := range []uint64{1 << 62, 1 << 40, uint64(len(b)/ps) + 1} {
		for _, off := range []int{0, ps} { // both meta pages
			m := b[off+pageHeaderSize : off+pageHeaderSize+metaSize]
			binary.LittleEndian.PutUint64(m[40:], claim)
			h := fnv.New64a()
			h.Write(m[:56])
			binary.LittleEndian.PutUint64(m[56:], h.Sum64())
		}
		var allocs runtime.MemStats
		runtime.ReadMemStats(&allocs)
		before := allocs.TotalAlloc
		if _, err := Walk(bytes.NewReader(b), int64(len(b)), func([][]byte, []byte, []byte, bool) {}); err != nil {
			t.Fatalf("a claim of %d pages: Walk = %v, want the pages read and the rest reported", claim, err)
		}
		runtime.ReadMemStats(&allocs)
		if grew := allocs.TotalAlloc - before; grew > 1<<24 {
			t.Errorf("a claim of %d pages: Walk allocated %d bytes", claim, grew)
		}
		if _, err := Open(bytes.NewReader(b), int64(len(b)), true); !errors.Is(err, ErrDamaged) {
			t.Errorf("a claim of %d pages: strict Open = %v, want ErrDamaged", claim, err)
		}
	}
}

func FuzzCheck(f *testing.F) {
	f.Add(sampleFile(f, false))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = check(b)
		_, _ = Walk(bytes.NewReader(b), int64(len(b)), func([][]byte, []byte, []byte, bool) {})
	})
}

// BenchmarkCheck checks a file of about 50 MB (a million 40-byte values
// under 8-byte keys), the cost Open pays once before bbolt walks a file;
// it reports MB/s of file checked.
func BenchmarkCheck(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		b.Fatal(err)
	}
	for batch := range 10 {
		if err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("log"))
			if err != nil {
				return err
			}
			bk.FillPercent = 1.0
			for i := range 100_000 {
				if err := bk.Put(binary.BigEndian.AppendUint64(nil, uint64(batch*100_000+i)), bytes.Repeat([]byte{byte(i)}, 40)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(f, st.Size()); err != nil {
			b.Fatal(err)
		}
	}
}
