package actor

// Deciding under the partitions' mutexes (locked.go).

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// DecideAlone (clock read before the mutex, wait worked out after it)
// decides as a call of the same one member does: the same outputs, the
// same stored states and the same counts, over a random stream of takes
// and checks (what Limit and Check send it), with and without
// reservations, on token buckets and fixed windows, while the clock steps
// forward and, now and then, back.
func TestDecideAloneMatchesCall(t *testing.T) {
	lims := []*bucket.Limit{
		{Kind: bucket.TokenBucket, Rate: 10, Period: int64(time.Second), Capacity: 5},
		{Kind: bucket.TokenBucket, Rate: 3, Period: int64(time.Second), Capacity: 3, MaxReserved: 4},
		{Kind: bucket.FixedWindow, Rate: 4, Period: int64(time.Second), Capacity: 4, MaxReserved: 2},
	}
	now := t0
	clock := func() int64 { return now }
	alone := NewGroup(1, NopLog{}, clock) // never QueueOnly: the path under test
	alone.Start()
	t.Cleanup(alone.Stop)
	called := newGroup(t, 1, NopLog{}, clock)
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"a", "b", "c"}
	for step := range 4000 {
		switch r := rng.IntN(10); {
		case r < 6:
			now += rng.Int64N(int64(300 * time.Millisecond))
		case r == 6:
			now -= rng.Int64N(int64(50 * time.Millisecond))
		}
		li := rng.IntN(len(lims))
		lim := lims[li]
		key := keys[rng.IntN(len(keys))]
		mem := Member{
			Op:      []Op{OpTake, OpTake, OpTake, OpCheck}[rng.IntN(4)],
			Count:   float64(rng.IntN(4) + 1),
			Reserve: rng.IntN(2) == 0,
			Second:  -1,
		}
		name := string(rune('p' + li))

		it := itemFor(alone, lim, name, key, 0)
		got := mem
		if !alone.DecideAlone(&it, &got) {
			t.Fatalf("step %d: DecideAlone on an idle memory partition declined", step)
		}

		c := NewCall()
		c.Atomic = true
		want := mem
		want.First = c.AddItem(itemFor(called, lim, name, key, 0), 0, false)
		c.Members = append(c.Members, want)
		decide(t, called, c)
		want = c.Members[0]
		want.First = 0
		c.Release()

		if got != want {
			t.Fatalf("step %d (%v %v of %s/%s at %d):\nalone %+v\ncall  %+v", step, mem.Op, mem.Count, name, key, now, got, want)
		}
		sa, oka := state(t, alone, it)
		sc, okc := state(t, called, it)
		if sa != sc || oka != okc {
			t.Fatalf("step %d: stored %v %v alone, %v %v by call", step, sa, oka, sc, okc)
		}
	}
	if a, c := alone.Counts(), called.Counts(); a != c {
		t.Errorf("counts alone %+v, by call %+v", a, c)
	}
	if n := alone.Counts(); n.Reservations == 0 || n.Denials == 0 || n.Grants == 0 {
		t.Errorf("the stream never reserved, denied or granted: %+v", n)
	}
}
