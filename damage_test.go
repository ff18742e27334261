package ratelimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
	bolt "go.etcd.io/bbolt"
)

// damagedEnv names the file a child process of TestDamagedFilesNeverCrash
// opens.
const damagedEnv = "RATELIMIT_DAMAGED_FILE"

// salvageEnv, set with damagedEnv, makes the child salvage the file first
// and open the salvaged copy.
const salvageEnv = "RATELIMIT_DAMAGED_SALVAGE"

var (
	damagedT0     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	damagedLimits = map[string]Config{
		"api": {Kind: TokenBucket, Rate: 1000, Period: time.Hour, Capacity: 1000},
	}
)

// damagedKeys are the keys the base file holds, with what each took.
func damagedKeys() map[string]float64 {
	keys := make(map[string]float64)
	for i := range 600 {
		keys[fmt.Sprintf("user-%04d-%s", i, strings.Repeat("x", i%40))] = float64(1 + i%37)
	}
	return keys
}

// writeDamagedBase writes a small durable file: a snapshot of half the
// keys, then the log of the rest (preallocation off, so every page is the
// limiter's).
func writeDamagedBase(t *testing.T, path string) {
	t.Helper()
	clk := ratelimittest.NewClock(damagedT0)
	l, err := Open(Options{Path: path, Now: clk.Now, LogPreallocate: -1, Limits: damagedLimits})
	if err != nil {
		t.Fatal(err)
	}
	var rs []Request
	for key, n := range damagedKeys() {
		rs = append(rs, Request{Name: "api", Key: key, Count: n})
	}
	for half := range 2 {
		for _, d := range l.LimitMany(context.Background(), rs[half*len(rs)/2:(half+1)*len(rs)/2], nil) {
			if d.Err != nil || !d.OK {
				t.Fatalf("LimitMany: %+v", d)
			}
		}
		if half == 0 {
			if err := l.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// damage kinds applied to copies of the base file.
var damageKinds = []struct {
	name  string
	apply func(b []byte, r *rand.Rand, page int) []byte
}{
	{"truncated", func(b []byte, r *rand.Rand, _ int) []byte { return b[:1+r.IntN(len(b)-1)] }}, // an empty file is a new one
	{"page zeroed", func(b []byte, r *rand.Rand, page int) []byte {
		p := r.IntN(len(b) / page)
		clear(b[p*page : (p+1)*page])
		return b
	}},
	{"page header flipped", func(b []byte, r *rand.Rand, page int) []byte {
		p := r.IntN(len(b) / page)
		for i := range 16 {
			b[p*page+i] ^= byte(r.IntN(255) + 1)
		}
		return b
	}},
	{"page of garbage", func(b []byte, r *rand.Rand, page int) []byte {
		p := r.IntN(len(b) / page)
		for i := p * page; i < (p+1)*page; i++ {
			b[i] = byte(r.Uint32())
		}
		return b
	}},
	{"16 bytes flipped", func(b []byte, r *rand.Rand, _ int) []byte {
		for range 16 {
			b[r.IntN(len(b))] ^= byte(1 << r.IntN(8))
		}
		return b
	}},
}

// A damaged, truncated or foreign file makes Open return an error; it never
// crashes or hangs the process, and a file that does open holds exactly the
// state it was given (the damage hit only unused pages). Each copy is
// opened in a child process with a time bound.
func TestDamagedFilesNeverCrash(t *testing.T) {
	if path := os.Getenv(damagedEnv); path != "" {
		openDamagedChild(path)
		return
	}
	perKind := 60 // CI runs this size without the race detector
	if testing.Short() || raceEnabled {
		perKind = 8
	}
	dir := t.TempDir()
	base := filepath.Join(dir, "base.db")
	writeDamagedBase(t, base)
	good, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	want := childReport(damagedKeys())
	type result struct {
		kind, file, out string
		err             error
	}
	results := make(chan result)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	r := rand.New(rand.NewPCG(1, 2))
	for k, kind := range damageKinds {
		for i := range perKind {
			b := kind.apply(append([]byte(nil), good...), r, page)
			file := filepath.Join(dir, fmt.Sprintf("damaged-%d-%03d.db", k, i))
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				out, err := runDamagedChild(file, false)
				if err == nil && strings.HasPrefix(out, "error: ") {
					// Refused: the operator's way back is Salvage.
					sout, serr := runDamagedChild(file, true)
					results <- result{kind.name, file, sout, serr}
					if serr != nil || !strings.HasPrefix(sout, "salvaged ") && !strings.HasPrefix(sout, "error: salvage: ") {
						return
					}
				}
				results <- result{kind.name, file, out, err}
			}()
		}
	}
	go func() { wg.Wait(); close(results) }()
	counts := map[string]int{}
	for res := range results {
		lines := append(strings.Split(res.out, "\n"), "") // the report, then the child test's own PASS
		if strings.HasPrefix(lines[0], "salvaged ") || strings.HasPrefix(lines[0], "error: salvage: ") {
			checkSalvaged(t, res.kind, res.file, lines, counts)
			continue
		}
		switch {
		case res.err != nil:
			t.Errorf("%s (%s): the child process failed: %v\n%s", res.kind, res.file, res.err, res.out)
		case strings.HasPrefix(lines[0], "error: not ErrCorrupt"):
			t.Errorf("%s (%s): %s", res.kind, res.file, lines[0])
		case strings.HasPrefix(lines[0], "error: "):
			counts["error"]++
		case lines[0] == "opened" && lines[1] == want:
			counts["opened intact"]++
		default:
			got := strings.Split(lines[1], ",")
			exp := strings.Split(want, ",")
			diff := ""
			for i := range min(len(got), len(exp)) {
				if got[i] != exp[i] {
					diff = fmt.Sprintf("first difference: %s, want %s", got[i], exp[i])
					break
				}
			}
			t.Errorf("%s (%s, first damaged byte at %d): opened with a different state than was written (a silent partial state): %d keys, want %d; %s", res.kind, res.file, firstDifference(good, res.file), len(got), len(exp), diff)
		}
	}
	t.Logf("%d damaged copies: %v", perKind*len(damageKinds), counts)
}

// openDamagedChild opens path and prints "error: ..." or "opened" and the
// state, then returns (the test passes; the parent judges).
func openDamagedChild(path string) {
	if os.Getenv(salvageEnv) != "" {
		rep, err := Salvage(path, path+".salvaged")
		if err != nil {
			fmt.Printf("error: salvage: %v\n", err)
			return
		}
		fmt.Printf("salvaged %d problems\n", len(rep.Problems))
		path += ".salvaged"
	}
	l, err := Open(Options{Path: path, Now: ratelimittest.NewClock(damagedT0).Now,
		LogPreallocate: -1, LockTimeout: -1, Limits: damagedLimits})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			fmt.Printf("error: not ErrCorrupt: %v\n", err)
			return
		}
		fmt.Printf("error: %v\n", err)
		return
	}
	defer l.Close()
	took := make(map[string]float64)
	for key := range damagedKeys() {
		v, err := l.Value(context.Background(), "api", key)
		if err != nil {
			fmt.Printf("error: Value: %v\n", err)
			return
		}
		took[key] = 1000 - v.Value
	}
	fmt.Printf("opened\n%s\n", childReport(took))
}

// childReport is a canonical text of what each key took.
func childReport(took map[string]float64) string {
	lines := make([]string, 0, len(took))
	for k, v := range took {
		lines = append(lines, fmt.Sprintf("%s=%v", k, v))
	}
	slices.Sort(lines)
	return strings.Join(lines, ",")
}

func firstDifference(good []byte, file string) int {
	b, _ := os.ReadFile(file)
	for i := range min(len(b), len(good)) {
		if b[i] != good[i] {
			return i
		}
	}
	return min(len(b), len(good))
}

// runDamagedChild opens (or salvages, then opens) file in a child process
// with a time bound, and returns what it printed.
func runDamagedChild(file string, salvage bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDamagedFilesNeverCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), damagedEnv+"="+file)
	if salvage {
		cmd.Env = append(cmd.Env, salvageEnv+"=1")
	}
	out, err := cmd.Output()
	if ctx.Err() != nil {
		err = fmt.Errorf("hung: killed after 30 s")
	}
	return string(out), err
}

// salvageRefusals are the reasons Salvage may give for reading nothing of
// a file: no meta page to start from, no sign that a limiter wrote it, a
// version field that reads as a newer format's.
var salvageRefusals = []string{"no valid meta page", "not a limiter's file", "unsupported format version"}

// checkSalvaged judges a salvage: refused only for a file with nothing to
// read; otherwise the salvaged file opens, every key holds what it was
// given or reads as full (lost), and a loss is reported.
func checkSalvaged(t *testing.T, kind, file string, lines []string, counts map[string]int) {
	t.Helper()
	if strings.HasPrefix(lines[0], "error: salvage: ") {
		if !slices.ContainsFunc(salvageRefusals, func(s string) bool { return strings.Contains(lines[0], s) }) {
			t.Errorf("%s (%s): %s", kind, file, lines[0])
		}
		counts["salvage refused"]++
		return
	}
	if lines[1] != "opened" {
		t.Errorf("%s (%s): %s, then %s", kind, file, lines[0], lines[1])
		return
	}
	want := damagedKeys()
	lost := 0
	for _, kv := range strings.Split(lines[2], ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch got := v; {
		case got == fmt.Sprint(want[k]):
		case got == "0":
			lost++
		default:
			t.Errorf("%s (%s): salvaged %s took %s, want %v or lost", kind, file, k, got, want[k])
		}
	}
	if lost > 0 && lines[0] == "salvaged 0 problems" {
		t.Errorf("%s (%s): salvage lost %d buckets and reported no problem", kind, file, lost)
	}
	if lost == 0 {
		counts["salvaged whole"]++
	} else {
		counts["salvaged with losses reported"]++
	}
}

// A log batch whose version byte is damaged (it is outside the batch's
// checksum) is a damaged file, ErrCorrupt, not one a newer version wrote:
// the file's own format version, intact, says which version wrote it.
func TestDamagedBatchVersionIsCorrupt(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "rl.db")
	opts := Options{Path: path, Now: clk.Now, LogPreallocate: -1, Limits: map[string]Config{"api": tokenBucket(10, 10)}}
	l := open(t, opts)
	grant(t, l, Request{Name: "api", Key: "a", Count: 3})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	var batch []byte
	err = db.View(func(tx *bolt.Tx) error {
		_, v := tx.Bucket([]byte("log")).Cursor().Last()
		batch = bytes.Clone(v)
		return nil
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) == 0 || bytes.Count(b, batch) != 1 {
		t.Fatalf("the last batch (%d bytes) is not in the file once", len(batch))
	}
	b[bytes.Index(b, batch)] ^= 0x80 // version 1 -> 129
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(opts); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion) {
		t.Fatalf("Open: %v, want ErrCorrupt (not ErrVersion)", err)
	}
}
