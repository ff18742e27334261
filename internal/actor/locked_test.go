package actor

// Deciding under the partitions' mutexes (locked.go).

import (
	"math/rand/v2"
	"testing"
	"time"
)

// DecideAlone (clock read before the mutex, wait worked out after it)
// decides as a call of the same one member does: the same outputs, the
// same stored states and the same counts, over a random stream of takes
// and checks (what Limit and Check send it), with and without
// reservations, on token buckets and fixed windows, while the clock steps
// forward and, now and then, back.
func TestDecideAloneMatchesCall(t *testing.T) {
	lims := mixedLims()
	now := t0
	alone, called := aloneAndCalled(t, 1, func() int64 { return now })
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

		want := byCall(t, called, itemFor(called, lim, name, key, 0), mem)
		if got != want {
			t.Fatalf("step %d (%v %v of %s/%s at %d):\nalone %+v\ncall  %+v", step, mem.Op, mem.Count, name, key, now, got, want)
		}
		sameStates(t, alone, called, []Item{it})
		if t.Failed() {
			t.Fatalf("step %d", step)
		}
	}
	if a, c := alone.Counts(), called.Counts(); a != c {
		t.Errorf("counts alone %+v, by call %+v", a, c)
	}
	if n := alone.Counts(); n.Reservations == 0 || n.Denials == 0 || n.Grants == 0 {
		t.Errorf("the stream never reserved, denied or granted: %+v", n)
	}
}
