package wal

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// usedBytes is the end of the pages bbolt uses in l's file.
func usedBytes(t *testing.T, l *Log) int64 {
	t.Helper()
	var n int64
	if err := l.DB().View(func(tx *bolt.Tx) error { n = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestPreallocateWritesZerosPastTheUsedPages(t *testing.T) {
	const n = 1 << 20
	path := tempPath(t)
	l := mustOpen(t, path, Options{Preallocate: -1})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	sizeBefore := fileSize(t, path)
	allocBefore, canTell := allocatedBytes(path)

	l = mustOpen(t, path, Options{Preallocate: n})
	used := usedBytes(t, l)
	page := int64(l.pageSize)
	want := (used + n + page - 1) / page * page
	if got := fileSize(t, path); got != want {
		t.Fatalf("file size %d after Open, want %d (%d used + %d preallocated, in pages)", got, want, used, n)
	}
	if alloc, _ := allocatedBytes(path); canTell && alloc-allocBefore < want-sizeBefore {
		t.Fatalf("%d bytes allocated for the %d bytes added: the preallocated space is sparse", alloc-allocBefore, want-sizeBefore)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data[used:], make([]byte, want-used)) {
		t.Fatal("the preallocated space is not zeros")
	}

	// Records written into it replay after reopening, and the reopened
	// file reaches n past the pages now used (or stays as it was, if it
	// already does).
	var recs []Record
	for i := range 40 {
		r := Record{Name: "n", Key: strings.Repeat("k", 900) + string(rune('a'+i%26)), Value: float64(i), TS: int64(i)}
		recs = append(recs, r)
		appendWait(t, l, r)
	}
	if got := fileSize(t, path); got != want {
		t.Fatalf("file size %d after appends within the preallocated space, want %d", got, want)
	}
	used = usedBytes(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, path, Options{Preallocate: n})
	checkRecords(t, "after reopen", replayAll(t, l, 0), recs)
	if got := fileSize(t, path); got != (used+n+page-1)/page*page && got != want {
		t.Fatalf("file size %d after reopen, want %d (unchanged) or %d", got, want, (used+n+page-1)/page*page)
	}
}

func TestPreallocateFollowsTheLogOnReopen(t *testing.T) {
	const n = 1 << 20
	path := tempPath(t)
	l := mustOpen(t, path, Options{Preallocate: n})
	// Outgrow the preallocated space: ~1.5 MiB of records.
	const count = 150
	for i := range count {
		appendWait(t, l, Record{Name: "n", Key: strings.Repeat("x", 10_000) + string(rune('a'+i%26))})
	}
	used := usedBytes(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if used < n {
		t.Fatalf("only %d bytes used: the log did not outgrow %d preallocated", used, n)
	}
	if fileSize(t, path) >= used+n {
		t.Skip("bbolt grew the file by more than the preallocation itself; nothing to extend")
	}
	l = mustOpen(t, path, Options{Preallocate: n})
	if got := fileSize(t, path); got < used+n {
		t.Fatalf("file size %d after reopen, want at least %d (%d used + %d)", got, used+n, used, n)
	}
	if got := len(replayAll(t, l, 0)); got != count {
		t.Fatalf("replayed %d records, want %d", got, count)
	}
}

// The zeros go past the used pages only, even in a file that ends right
// where they do.
func TestPreallocateLeavesUsedPagesAlone(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{Preallocate: -1})
	var recs []Record
	for i := range 30 {
		recs = append(recs, Record{Name: "n", Key: strings.Repeat("u", 500) + string(rune('a'+i%26)), Value: float64(i)})
		appendWait(t, l, recs[i])
	}
	used := usedBytes(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, used); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, path, Options{Preallocate: 1 << 20})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(after)) < used+1<<20 {
		t.Fatalf("file size %d, want at least %d", len(after), used+1<<20)
	}
	if !bytes.Equal(after[:used], before) {
		t.Fatal("preallocation changed the used pages")
	}
	l = mustOpen(t, path, Options{Preallocate: 1 << 20})
	checkRecords(t, "after preallocation", replayAll(t, l, 0), recs)
}

func TestPreallocateNegativeWritesNothing(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{Preallocate: -1})
	if got, used := fileSize(t, path), usedBytes(t, l); got > used+64<<10 {
		t.Fatalf("file size %d with Preallocate < 0, %d used", got, used)
	}
}

func TestPreallocateDefault(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	if got, used := fileSize(t, path), usedBytes(t, l); got < used+DefaultPreallocate {
		t.Fatalf("file size %d, want at least %d used + DefaultPreallocate", got, used)
	}
}

func TestPreallocateAboveMaxIsRefused(t *testing.T) {
	path := tempPath(t)
	_, err := Open(path, Options{Preallocate: MaxPreallocate + 1})
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Open: %v, want ErrInvalidOptions", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a refused Open left the file behind: %v", err)
	}
}

// A failure to write the zeros (a full disk) costs only speed: Open
// succeeds, says why in a warning, and commits work.
func TestPreallocateFailureIsAWarning(t *testing.T) {
	full := errors.New("no space left on device (test)")
	orig := writeZeros
	writeZeros = func(*os.File, []byte, int64) (int, error) { return 0, full }
	t.Cleanup(func() { writeZeros = orig })

	var logs bytes.Buffer
	path := tempPath(t)
	l := mustOpen(t, path, Options{Preallocate: 1 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), full.Error()) {
		t.Fatalf("no warning naming the failure; log:\n%s", logs.String())
	}
	want := Record{Name: "n", Key: "k", Value: 1, TS: 2}
	appendWait(t, l, want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	writeZeros = orig
	l = mustOpen(t, path, Options{Preallocate: -1})
	checkRecords(t, "after a failed preallocation", replayAll(t, l, 0), []Record{want})
}

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
	// Use most of it, and tell p, as the log's commits do.
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), bytes.Repeat([]byte("v"), 2600<<10))
	}); err != nil {
		t.Fatal(err)
	}
	if used, _, err := p.extents(); err != nil {
		t.Fatal(err)
	} else {
		p.saw(used)
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

// A lone caller that commits its own appends (AppendOwn, CommitNow), and
// so never wakes the writer with an append, uses up the zeros; once less
// than half a step is left, the writer is woken to top them up, so the log
// never runs on a sparse tail for long.
func TestPreallocateToppedUpAfterCallersCommit(t *testing.T) {
	const n = 1 << 20
	path := tempPath(t)
	l := mustOpen(t, path, Options{Preallocate: n})
	defer l.Close()
	start := fileSize(t, path)
	key := strings.Repeat("k", 4000)
	for i := 0; fileSize(t, path) == start; i++ {
		if i == 4000 {
			t.Fatalf("%d commits of 4 KB, %d bytes used: the file was never topped up past %d", i, usedBytes(t, l), start)
		}
		w := make(chanWaiter, 1)
		l.AppendOwn([]Record{{Name: "n", Key: key + strconv.Itoa(i), Value: 1, TS: int64(i)}}, w)
		l.CommitNow()
		if err := <-w; err != nil {
			t.Fatal(err)
		}
	}
	// The file grows while the writer writes the chunk, inside a write
	// transaction: a commit waits for it to end.
	appendWait(t, l, Record{Name: "n", Key: "after", Value: 1})
	if used := usedBytes(t, l); fileSize(t, path)-used < n/2 {
		t.Fatalf("topped up to %d with %d used: less than half a step ahead", fileSize(t, path), used)
	}
}
