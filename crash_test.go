package ratelimit

// Crash tests: a child process (this test binary, re-executed) works under
// concurrency and prints each acknowledgement; the parent kills it with
// SIGKILL at a random moment, several rounds on the same file, and after
// each round checks that everything acknowledged is still counted, and
// nothing beyond what was in flight. The clock is frozen, so a bucket's
// value is exactly capacity minus what was granted (plus what was
// credited). TestCrashRecovery grants (LimitAll and large LimitMany
// batches among them); TestRecoveryCrashRecoveryCreditsAndResets credits
// (sharded credits cross partitions) and runs sequential grant/reset
// workers, with snapshots under load.

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	crashChildEnv = "RATELIMIT_CRASH_CHILD"
	crashWorkers  = 48
	crashCap      = 1e12
	// Every crashManyEvery-th worker calls LimitMany with crashMany
	// one-token requests instead, so that log batches are large enough to
	// be stored in chunks (wal/chunk.go) when the kill lands.
	crashManyEvery = 8
	crashMany      = 2000
)

var crashKeys = []string{"a", "b", "c", "d"}

// crashOptions are the child's and the parent's options: a frozen clock
// and no background work.
func crashOptions(path string) Options {
	return Options{
		Path: path,
		Now:  newClock().Now,
		Limits: map[string]Config{
			"key":    {Kind: TokenBucket, Rate: crashCap, Period: time.Hour},
			"global": {Kind: TokenBucket, Rate: crashCap, Period: time.Hour, Shards: 4},
		},
		SnapshotBytes: -1, SnapshotInterval: -1, SweepInterval: -1,
	}
}

// crashChild starts the body of a crash test's child process: unless the
// environment variable env names a file (the parent re-executed the test
// binary), it skips, saying which test runs it. It opens the limiter on
// that file with opts, snapshots it every pace under load (so crashes land
// on both sides of one; the child's own pacing, not a test wait), and
// reports "ready". report writes one line per acknowledgement to stdout,
// flushed at once: the parent's ledger.
func crashChild(t *testing.T, env, by string, opts func(string) Options, pace time.Duration) (l *Limiter, report func(string)) {
	path := os.Getenv(env)
	if path == "" {
		t.Skip("run by " + by)
	}
	l, err := Open(opts(path))
	if err != nil {
		fmt.Println("open-error", err)
		os.Exit(3)
	}
	var out sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	report = func(line string) {
		out.Lock()
		w.WriteString(line)
		w.WriteByte('\n')
		w.Flush()
		out.Unlock()
	}
	go func() {
		for {
			time.Sleep(pace)
			l.Snapshot()
		}
	}()
	report("ready")
	return l, report
}

// TestCrashChild is the child's body; it does nothing unless re-executed.
func TestCrashChild(t *testing.T) {
	l, report := crashChild(t, crashChildEnv, "TestCrashRecovery", crashOptions, 15*time.Millisecond)
	ctx := context.Background()
	for i := 0; i < crashWorkers; i++ {
		go func(i int) {
			r := rand.New(rand.NewPCG(uint64(i), uint64(os.Getpid())))
			if i%crashManyEvery == 0 {
				crashManyWorker(l, report)
			}
			for {
				key := crashKeys[r.IntN(len(crashKeys))]
				n := float64(1 + r.IntN(3))
				switch r.IntN(3) {
				case 0:
					if s, err := l.Limit(ctx, Request{Name: "key", Key: key, Count: n}); err == nil && s.OK {
						report(fmt.Sprintf("key %s %v", key, n))
					}
				case 1:
					if s, err := l.Limit(ctx, Request{Name: "global", Count: n}); err == nil && s.OK {
						report(fmt.Sprintf("global - %v", n))
					}
				default:
					if s, err := l.LimitAll(ctx, Request{Name: "key", Key: key, Count: n}, Request{Name: "global", Count: n}); err == nil && s.OK {
						report(fmt.Sprintf("all %s %v", key, n))
					}
				}
			}
		}(i)
	}
	select {}
}

// crashManyKeys are the keys of crashManyWorker's requests: one each per
// call, so that its records are distinct buckets.
var crashManyKeys = func() []string {
	keys := make([]string, crashMany)
	for i := range keys {
		keys[i] = fmt.Sprintf("m%04d", i)
	}
	return keys
}()

// crashManyWorker calls LimitMany forever, one token on every key of
// crashManyKeys, and reports each call's grants in one write.
func crashManyWorker(l *Limiter, report func(string)) {
	rs := make([]Request, crashMany)
	for i, k := range crashManyKeys {
		rs[i] = Request{Name: "key", Key: k, Count: 1}
	}
	var out []Decision
	var lines strings.Builder
	for {
		out = l.LimitMany(context.Background(), rs, out[:0])
		lines.Reset()
		for i, d := range out {
			if d.Err == nil && d.OK {
				if lines.Len() > 0 {
					lines.WriteByte('\n')
				}
				fmt.Fprintf(&lines, "key %s 1", rs[i].Key)
			}
		}
		if lines.Len() > 0 {
			report(lines.String())
		}
	}
}

// startCrashChild runs the test named test of this binary in a child
// process, with env set to path, and waits for its "ready" line; its
// further lines follow on the returned scanner.
func startCrashChild(t *testing.T, round int, test, env, path string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("round %d: child did not start: %q", round, sc.Text())
	}
	return cmd, sc
}

// waitKilled reaps cmd and fails the test unless SIGKILL ended it.
func waitKilled(t *testing.T, round int, cmd *exec.Cmd) {
	t.Helper()
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("round %d: child ended by %v, not SIGKILL", round, err)
	}
}

// After every round each bucket counts every acknowledged grant, and
// nothing beyond what was in flight.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	acked := map[string]float64{} // "key/a", "global/" -> tokens acknowledged, all rounds
	const rounds = 4
	for round := 0; round < rounds; round++ {
		cmd, sc := startCrashChild(t, round, "TestCrashChild", crashChildEnv, path)
		// The kill lands a random time after the first acknowledgement,
		// so that a slow start (under -race, the LimitMany workers make
		// the first commit take a while) cannot leave a round empty; a
		// child that acknowledges nothing at all is killed after a minute.
		kill := func() { cmd.Process.Signal(syscall.SIGKILL) }
		killAfter := time.Duration(100+rand.IntN(400)) * time.Millisecond
		timer := time.AfterFunc(time.Minute, kill)
		lines := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 {
				continue // a line torn by the kill was never fully acknowledged
			}
			n, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				continue
			}
			if lines++; lines == 1 {
				timer.Stop()
				timer = time.AfterFunc(killAfter, kill)
			}
			switch f[0] {
			case "key":
				acked["key/"+f[1]] += n
			case "global":
				acked["global/"] += n
			case "all":
				acked["key/"+f[1]] += n
				acked["global/"] += n
			}
		}
		timer.Stop()
		waitKilled(t, round, cmd)
		if lines == 0 {
			t.Fatalf("round %d: child acknowledged nothing in a minute", round)
		}

		l, err := Open(crashOptions(path))
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		// In flight at the kill: at most one call per worker per round.
		// On keys a-d and the global limit, a request of at most 3 tokens
		// from each of the other workers; on each key of crashManyKeys, one
		// token from each LimitMany worker.
		many := (crashWorkers + crashManyEvery - 1) / crashManyEvery
		check := func(name, key string, slack float64) {
			v := value(t, l, name, key).Value
			used := crashCap - v
			want := acked[name+"/"+key]
			if used < want {
				t.Errorf("round %d: %s/%s counts %v tokens, but %v were acknowledged: lost grants", round, name, key, used, want)
			}
			if used > want+slack {
				t.Errorf("round %d: %s/%s counts %v tokens, acknowledged %v, more than in flight", round, name, key, used, want)
			}
		}
		slack := float64((crashWorkers - many) * 3 * (round + 1))
		for _, k := range crashKeys {
			check("key", k, slack)
		}
		check("global", "", slack)
		for _, k := range crashManyKeys {
			check("key", k, float64(many*(round+1)))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed %v after its first acknowledgement, %d acknowledged grant lines so far; global %v, key/a %v, key/m0000 %v tokens",
			round, killAfter, lines, acked["global/"], acked["key/a"], acked["key/m0000"])
	}
}

// The crash test with credits (sharded ones cross partitions) and
// sequential grant/reset workers.
const (
	creditCrashEnv     = "RATELIMIT_CREDIT_CRASH_CHILD"
	creditCrashWorkers = 16
	creditCrashCap     = 1e12
)

var creditCrashKeys = []string{"a", "b", "c", "d"}

// creditCrashOptions are crashOptions over more partitions.
func creditCrashOptions(path string) Options {
	o := crashOptions(path)
	o.Partitions = 8
	return o
}

// TestRecoveryCrashChild is the child's body of
// TestRecoveryCrashRecoveryCreditsAndResets; it does nothing unless
// re-executed.
func TestRecoveryCrashChild(t *testing.T) {
	l, report := crashChild(t, creditCrashEnv, "TestRecoveryCrashRecoveryCreditsAndResets", creditCrashOptions, 10*time.Millisecond)
	for i := 0; i < creditCrashWorkers; i++ {
		go func(i int) {
			r := rand.New(rand.NewPCG(uint64(i), uint64(os.Getpid())))
			for {
				key := creditCrashKeys[r.IntN(len(creditCrashKeys))]
				n := float64(1 + r.IntN(3))
				name, rkey := "key", key
				if r.IntN(2) == 0 {
					name, rkey = "global", ""
				}
				if s, err := l.Limit(bg, Request{Name: name, Key: rkey, Count: n}); err == nil && s.OK {
					report(fmt.Sprintf("grant %s/%s %v", name, rkey, n))
					if r.IntN(2) == 0 {
						if err := l.Credit(bg, name, rkey, n); err == nil {
							report(fmt.Sprintf("credit %s/%s %v", name, rkey, n))
						}
					}
				}
			}
		}(i)
	}
	for i := range creditCrashKeys {
		go func(i int) { // sequential: grant, grant, ..., reset
			key := "r" + strconv.Itoa(i)
			for j := 0; ; j++ {
				if j%5 == 4 {
					if err := l.Reset(bg, "key", key); err == nil {
						report(fmt.Sprintf("reset key/%s 0", key))
					}
					continue
				}
				if s, err := l.Limit(bg, Request{Name: "key", Key: key, Count: 2}); err == nil && s.OK {
					report(fmt.Sprintf("grant key/%s 2", key))
				}
			}
		}(i)
	}
	select {}
}

// After every round each bucket holds its acknowledged grants minus its
// acknowledged credits, within what was in flight; for the reset keys an
// acknowledged reset is never undone and the grants after it are kept.
func TestRecoveryCrashRecoveryCreditsAndResets(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	used := map[string]float64{} // observed at the last reopen, then acknowledged since
	for round := 0; round < 4; round++ {
		cmd, sc := startCrashChild(t, round, "TestRecoveryCrashChild", creditCrashEnv, path)
		kill := func() { cmd.Process.Signal(syscall.SIGKILL) }
		killAfter := time.Duration(100+rand.IntN(400)) * time.Millisecond
		timer := time.AfterFunc(time.Minute, kill)
		lines := 0
		acked := map[string]float64{}
		resetSeen := map[string]bool{}
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 {
				continue
			}
			n, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				continue
			}
			if lines++; lines == 1 {
				timer.Stop()
				timer = time.AfterFunc(killAfter, kill)
			}
			switch f[0] {
			case "grant":
				acked[f[1]] += n
			case "credit":
				acked[f[1]] -= n
			case "reset":
				acked[f[1]] = 0
				resetSeen[f[1]] = true
			}
		}
		timer.Stop()
		waitKilled(t, round, cmd)
		l, err := Open(creditCrashOptions(path))
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		const flight = creditCrashWorkers * 3 // one op of at most 3 per worker
		check := func(nk string, lo, hi float64) {
			name, key, _ := cutRef(nk)
			got := creditCrashCap - value(t, l, name, key).Value
			if got < lo-1e-3 || got > hi+1e-3 {
				t.Errorf("round %d: %s counts %v used, want within [%v, %v]", round, nk, got, lo, hi)
			}
			used[nk] = got
		}
		for _, k := range creditCrashKeys {
			nk := "key/" + k
			want := used[nk] + acked[nk]
			check(nk, want-flight, want+flight)
		}
		check("global/", used["global/"]+acked["global/"]-flight, used["global/"]+acked["global/"]+flight)
		for i := range creditCrashKeys {
			nk := "key/r" + strconv.Itoa(i)
			base := used[nk]
			if resetSeen[nk] {
				base = 0
			}
			want := base + acked[nk]
			name, key, _ := cutRef(nk)
			got := creditCrashCap - value(t, l, name, key).Value
			// Exactly the acknowledged state, or one op more: a grant of 2
			// or a reset in flight.
			if got != want && got != want+2 && got != 0 {
				t.Errorf("round %d: %s counts %v used, acknowledged %v (reset seen %v)", round, nk, got, want, resetSeen[nk])
			}
			used[nk] = got
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d lines, killed after %v", round, lines, killAfter)
	}
}
