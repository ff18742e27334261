package redislimit

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
)

// Crash tests: a redis-server killed under load and restarted from its
// append-only file, and a client process killed between the two phases
// of a LimitAll across slots.

var crashLimits = map[string]ratelimit.Config{
	"a": {Kind: ratelimit.TokenBucket, Rate: 1e6, Period: H},
	"b": {Kind: ratelimit.FixedWindow, Rate: 1e6, Period: H},
}

// TestServerCrash: 32 goroutines on two limiters take tokens (Limit,
// LimitMany, LimitAll across slots) on a frozen clock until the server is
// SIGKILLed. Restarted from its append-only file, every bucket still
// counts every grant a caller heard "ok" for, and at most the calls that
// got errors on top (their fate was unknown to them).
func TestServerCrash(t *testing.T) {
	srv := ownServer(t)
	clk := newFakeClock(t0)
	prefix := testPrefix(t)
	client := redis.NewClient(&redis.Options{Network: "unix", Addr: srv.Addr(), DialTimeout: 200 * time.Millisecond,
		ReadTimeout: time.Second, MaxRetries: -1, DialerRetries: 1, PoolSize: 64})
	defer client.Close()
	ls := []*ratelimit.Limiter{
		openPrefix(t, client, prefix, ratelimit.Options{Now: clk.Now, Limits: crashLimits}),
		openPrefix(t, client, prefix, ratelimit.Options{Now: clk.Now, Limits: crashLimits}),
	}
	keys := keysOnDistinctTags("a", "b")
	ka, kb := keys[0], keys[1]
	var heard, unsure [2]atomic.Int64 // tokens heard granted, and asked by calls that failed
	ctx := context.Background()
	var wg sync.WaitGroup
	var killed atomic.Bool
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := ls[g%2]
			for i := 0; ; i++ {
				if killed.Load() && i%8 == 0 {
					return
				}
				switch i % 3 {
				case 0:
					st, err := l.Limit(ctx, ratelimit.Request{Name: "a", Key: ka, Count: 2})
					switch {
					case err != nil:
						unsure[0].Add(2)
					case st.OK:
						heard[0].Add(2)
					}
				case 1:
					for k, d := range l.LimitMany(ctx, []ratelimit.Request{{Name: "a", Key: ka}, {Name: "b", Key: kb}}, nil) {
						switch {
						case d.Err != nil:
							unsure[k].Add(1)
						case d.OK:
							heard[k].Add(1)
						}
					}
				default:
					st, err := l.LimitAll(ctx, ratelimit.Request{Name: "a", Key: ka}, ratelimit.Request{Name: "b", Key: kb, Count: 3})
					switch {
					case err != nil:
						unsure[0].Add(1)
						unsure[1].Add(3)
					case st.OK:
						heard[0].Add(1)
						heard[1].Add(3)
					}
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // load on the server's clock
	srv.Kill()
	killed.Store(true)
	wg.Wait()
	if heard[0].Load() == 0 || heard[1].Load() == 0 {
		t.Fatal("no grant before the crash")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for k, name := range []string{"a", "b"} {
		var v ratelimit.Value
		var err error
		// go-redis's pool waits a moment before it dials again a server
		// that refused it.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if v, err = ls[0].Value(ctx, name, keys[k]); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		taken := int64(1e6 - v.Value)
		if taken < heard[k].Load() || taken > heard[k].Load()+unsure[k].Load() {
			t.Fatalf("%s: %d tokens taken after the restart; %d were heard granted, %d more asked by calls that failed",
				name, taken, heard[k].Load(), unsure[k].Load())
		}
		t.Logf("%s: %d heard granted, %d counted after the restart", name, heard[k].Load(), taken)
	}
	// The restarted server runs the function (persisted with the data).
	if st, err := ls[1].Limit(ctx, ratelimit.Request{Name: "a", Key: ka}); err != nil || !st.OK {
		t.Fatal(st, err)
	}
}

// Child process roles (see runChild).
const (
	childHoldMidway = "hold-midway" // stop after the first step of phase one
	childHoldAll    = "hold-all"    // stop after the whole of phase one
)

// runChild runs the test binary as a client process that starts a
// LimitAll across slots, announces "held" once it has reached its role's
// point, and waits there to be killed.
func runChild(role string) int {
	client := redis.NewClient(&redis.Options{Network: "unix", Addr: os.Getenv("REDISLIMIT_SOCK")})
	ttl, _ := time.ParseDuration(os.Getenv("REDISLIMIT_HOLD"))
	l, err := Open(client, ratelimit.Options{Limits: crashLimits}, KeyPrefix(os.Getenv("REDISLIMIT_PREFIX")), HoldTimeout(ttl))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	afterStep = func(k, n int) {
		if role == childHoldAll && k < n-1 {
			return
		}
		fmt.Println("held")
		select {} // killed here
	}
	rs := []ratelimit.Request{
		{Name: "a", Key: os.Getenv("REDISLIMIT_KA"), Count: 10},
		{Name: "b", Key: os.Getenv("REDISLIMIT_KB"), Count: 20},
	}
	_, err = l.LimitAll(context.Background(), rs...)
	fmt.Fprintln(os.Stderr, "LimitAll returned:", err)
	return 1
}

// TestClientCrashBetweenPhases: a client process SIGKILLed between the
// phases of a LimitAll across slots (after its first step, or after all
// of them) leaves its tokens taken, which only under-admits: nothing more
// than the capacity is ever granted; and its holds expire.
func TestClientCrashBetweenPhases(t *testing.T) {
	for _, role := range []string{childHoldMidway, childHoldAll} {
		t.Run(role, func(t *testing.T) {
			srv := ownServer(t)
			client := srv.client()
			defer client.Close()
			prefix := testPrefix(t)
			keys := keysOnDistinctTags("a", "b")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+role, "REDISLIMIT_SOCK="+srv.Addr(), "REDISLIMIT_PREFIX="+prefix,
				"REDISLIMIT_HOLD=2s", "REDISLIMIT_KA="+keys[0], "REDISLIMIT_KB="+keys[1])
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || line != "held\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child: %q, %v", line, err)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if n := countKeys(t, client, prefix+"*h:*"); n != 1 {
				t.Fatalf("%d holds after the kill, want 1", n)
			}

			l := openPrefix(t, client, prefix, ratelimit.Options{Limits: crashLimits})
			ctx := context.Background()
			wantA, wantB := 1e6-10.0, 1e6-20.0
			if role == childHoldMidway {
				wantB = 1e6 // the second step never ran
			}
			va, _ := l.Value(ctx, "a", keys[0])
			vb, _ := l.Value(ctx, "b", keys[1])
			// The token bucket refills meanwhile (1e6 an hour): allow for it.
			if va.Value < wantA || va.Value > wantA+1e6*time.Second.Hours() || vb.Value != wantB {
				t.Fatalf("after the kill a holds %v (want %v), b %v (want %v)", va.Value, wantA, vb.Value, wantB)
			}
			// Nothing beyond what is left can be taken.
			if st, err := l.Limit(ctx, ratelimit.Request{Name: "b", Key: keys[1], Count: vb.Value}); err != nil || !st.OK {
				t.Fatal(st, err)
			}
			if st, err := l.Limit(ctx, ratelimit.Request{Name: "b", Key: keys[1], Count: 1}); err != nil || st.OK {
				t.Fatal("over-admitted:", st, err)
			}
			// The hold expires on the server's clock. (It lasts long enough
			// to be counted above well after the kill is reaped.)
			deadline := time.Now().Add(6 * time.Second)
			for countKeys(t, client, prefix+"*h:*") != 0 {
				if time.Now().After(deadline) {
					t.Fatal("the hold did not expire")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
