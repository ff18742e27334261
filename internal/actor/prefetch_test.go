package actor

// Prefetching the buckets of a batch's next messages (prefetch.go).

import (
	"math/rand/v2"
	"testing"
)

// touchAhead's accounting against a model: before batch[i] is handled,
// messages [i, next) are touched, pending is the sum of their touched
// items (at most prefetchWindow each), message i itself is touched, and it
// stops only once prefetchWindow items are pending (or the batch ends),
// overshooting by at most one message. A lone one-item batch is not
// touched. Items' hashes are looked up in a populated table.
func TestTouchAheadAccounting(t *testing.T) {
	r := rand.New(rand.NewPCG(111, 112))
	p := newPartition(NopLog{}, frozen)
	m := tableModel{}
	for k := 0; k < 5000; k++ {
		modelPut(&p.buckets, m, modelID("a", k), forgeHash(&p.buckets, r.Uint64(), false), 1, false)
	}
	touched := func(msg msg) int { return min(int(msg.hi-msg.lo), prefetchWindow) }
	for iter := 0; iter < 500; iter++ {
		nmsg := 1 + r.IntN(12)
		batch := make([]msg, nmsg)
		for b := range batch {
			c := NewCall()
			items := r.IntN(3)
			if r.IntN(4) == 0 {
				items = r.IntN(100)
			}
			for i := 0; i < items+2; i++ {
				c.Items = append(c.Items, Item{Hash: r.Uint64()})
			}
			lo := r.IntN(2)
			batch[b] = msg{call: c, kind: kindDecide, lo: int32(lo), hi: int32(lo + items)}
			if r.IntN(6) == 0 {
				batch[b] = msg{call: &Call{}, kind: kindRun}
			}
		}
		p.ahead = prefetcher{}
		for i := range batch {
			p.touchAhead(batch, i)
			f := p.ahead
			if nmsg == 1 && batch[0].hi-batch[0].lo <= 2 {
				if f != (prefetcher{}) {
					t.Fatalf("lone batch of %d items touched: %+v", batch[0].hi-batch[0].lo, f)
				}
				continue
			}
			want := 0
			for k := i; k < f.next; k++ {
				want += touched(batch[k])
			}
			switch {
			case f.next <= i || f.next > nmsg:
				t.Fatalf("batch %d, before #%d: next %d", iter, i, f.next)
			case f.pending != want:
				t.Fatalf("batch %d, before #%d: pending %d, touched-and-undecided %d", iter, i, f.pending, want)
			case f.next < nmsg && f.pending < prefetchWindow:
				t.Fatalf("batch %d, before #%d: stopped at %d with %d pending", iter, i, f.next, f.pending)
			case f.next-1 > i && f.pending-touched(batch[f.next-1]) >= prefetchWindow:
				t.Fatalf("batch %d, before #%d: touched past the window (%d pending)", iter, i, f.pending)
			}
		}
	}
	checkTable(t, &p.buckets, m)
}
