package actor

// Two-choice takes over a shard pair on two partitions (twochoice.go).

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// shardPair is shards 0 and 2 of one key, on partitions 0 and 1 (shards 0
// and 1 are mates on one partition; see Route).
func shardPair(g *Group, lim *bucket.Limit) (a, b Item) {
	key := keyOn(g, "s", 0, 0)
	return itemFor(g, lim, "s", key, 0), itemFor(g, lim, "s", key, 2)
}

// The two-choice path, case by case, with a frozen clock.
func TestTwoChoicesCases(t *testing.T) {
	g := newGroup(t, 2, NopLog{}, frozen)
	lim := tokenLim(10)
	a, b := shardPair(g, lim)
	if a.Part == b.Part {
		t.Fatal("shards on one partition")
	}
	take := func(count float64) Member {
		c := twoCall(count, false, a, b)
		decide(t, g, c)
		if err := c.FirstErr(); err != nil {
			t.Fatalf("take %v: %v", count, err)
		}
		m := c.Members[0]
		c.Release()
		return m
	}
	// One shard serves it (the fresh pair: either).
	if m := take(4); !m.OK || m.Left != 16 {
		t.Fatalf("take 4: %+v, want OK with 16 left", m)
	}
	va, vb := value(t, g, a), value(t, g, b)
	if va+vb != 16 || (va != 6 && vb != 6) {
		t.Fatalf("after take 4: a %v b %v", va, vb)
	}
	// The fuller shard serves the next.
	if m := take(5); !m.OK || m.Left != 11 {
		t.Fatalf("take 5: %+v", m)
	}
	// Neither alone (6 and 5 left): split, both end equal.
	if m := take(9); !m.OK || m.Left != 2 {
		t.Fatalf("take 9 (split): %+v", m)
	}
	if va, vb := value(t, g, a), value(t, g, b); va != 1 || vb != 1 {
		t.Fatalf("after split: a %v b %v, want 1 1", va, vb)
	}
	// Too much for both: denied, nothing written.
	if m := take(3); m.OK || m.RetryAfter <= 0 {
		t.Fatalf("take 3 of 2: %+v, want denial with a wait", m)
	}
	if va, vb := value(t, g, a), value(t, g, b); va != 1 || vb != 1 {
		t.Fatalf("after denial: a %v b %v", va, vb)
	}
	n := g.Counts()
	if n.Grants != 3 || n.Denials != 1 {
		t.Fatalf("counts %+v, want 3 grants 1 denial", n)
	}
}

// A stale read races a concurrent take: the re-decision on the chosen
// shard (or the exact fallback) must still never over-admit. Many callers
// take random counts from one two-shard key on two partitions; with a
// frozen clock the shards lose exactly the acknowledged tokens, never go
// below zero, and Counts agree with what callers saw.
func TestTwoChoicesStressExact(t *testing.T) {
	for _, reserve := range []bool{false, true} {
		name := "plain"
		if reserve {
			name = "reserve"
		}
		t.Run(name, func(t *testing.T) {
			const (
				workers = 48
				iters   = 200
				capac   = 500
			)
			g := newGroup(t, 2, NopLog{}, frozen)
			lim := tokenLim(capac)
			if reserve {
				lim.MaxReserved = 100
			}
			a, b := shardPair(g, lim)
			var spent, grants, denials atomic.Int64
			done := spawn(workers, 77, 3, func(r *rand.Rand) {
				for i := 0; i < iters; i++ {
					count := float64(1 + r.IntN(12))
					x, y := a, b
					if r.IntN(2) == 0 {
						x, y = b, a
					}
					var c *Call
					if r.IntN(5) == 0 { // mixed with single takes on one shard
						c = takeCall(count, x)
					} else {
						c = twoCall(count, reserve, x, y)
					}
					decide(t, g, c)
					if err := c.FirstErr(); err != nil {
						t.Errorf("error: %v", err)
					} else if c.Members[0].OK {
						spent.Add(int64(count))
						grants.Add(1)
					} else {
						denials.Add(1)
					}
					c.Release()
				}
			})
			waitChan(t, done, "the callers")
			va, vb := value(t, g, a), value(t, g, b)
			floor := 0.0
			if reserve {
				floor = -lim.MaxReserved
			}
			if va < floor || vb < floor {
				t.Errorf("over-admitted: a %v b %v", va, vb)
			}
			if got := 2*capac - va - vb; got != float64(spent.Load()) {
				t.Errorf("shards lost %v, acknowledged %v", got, spent.Load())
			}
			n := g.Counts()
			if n.Grants != uint64(grants.Load()) || n.Denials != uint64(denials.Load()) {
				t.Errorf("Counts %+v, callers saw %d grants %d denials", n, grants.Load(), denials.Load())
			}
			if h, p := holdsAndParked(t, g); h != 0 || p != 0 {
				t.Errorf("held %d parked %d", h, p)
			}
		})
	}
}
