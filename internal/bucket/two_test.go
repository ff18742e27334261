package bucket

import "testing"

func TestTakeTwo(t *testing.T) {
	l := &Limit{Kind: TokenBucket, Rate: 5, Period: M, Capacity: 5} // one of two shards of {10, M}
	full := l.Fresh(t0, 0)
	cases := []struct {
		name         string
		a, b         float64
		count        float64
		reserve      bool
		ok, wa, wb   bool
		wantA, wantB float64
		retry        int64
	}{
		{"both can, b has more", 3, 5, 2, false, true, false, true, 3, 3, 0},
		{"both can, a has more", 5, 3, 2, false, true, true, false, 3, 3, 0},
		{"only b can", 1, 4, 3, false, true, false, true, 1, 1, 0},
		{"split evenly", 3, 5, 6, false, true, true, true, 1, 1, 0},
		{"split fails", 2, 2, 5, false, false, false, false, 2, 2, 6 * S},
		{"reserve: a alone (tie)", 2, 2, 6, true, true, true, false, -4, 2, 48 * S},
		{"negative part refused", 5, -20, 6, false, true, true, false, -1, -20, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := State{c.a, full.TS}, State{c.b, full.TS}
			if c.name == "negative part refused" {
				// a alone cannot (5-6 < 0 without reserve); the split would
				// need b to give -7: denied, not minted.
				p := l.TakeTwo(a, b, t0, c.count, false)
				if p.OK {
					t.Fatalf("got %+v, want denial", p)
				}
				return
			}
			p := l.TakeTwo(a, b, t0, c.count, c.reserve)
			if p.OK != c.ok || p.WriteA != c.wa || p.WriteB != c.wb {
				t.Fatalf("got %+v", p)
			}
			if p.A.Value != c.wantA || p.B.Value != c.wantB || p.RetryAfter != c.retry {
				t.Fatalf("got %+v, want a=%v b=%v retry=%d", p, c.wantA, c.wantB, c.retry)
			}
			if !p.OK {
				if !l.TakeTwo(a, b, t0+p.RetryAfter, c.count, c.reserve).OK || l.TakeTwo(a, b, t0+p.RetryAfter-1, c.count, c.reserve).OK {
					t.Fatalf("retry %d is not the earliest success", p.RetryAfter)
				}
			}
		})
	}
}

func TestTakeTwoSplitWithMaxReserved(t *testing.T) {
	// One of two shards of {10, M, maxReserved 2}: each shard may owe 1.
	l := &Limit{Kind: TokenBucket, Rate: 5, Period: M, Capacity: 5, MaxReserved: 1}
	a, b := State{2, t0}, State{2, t0}
	p := l.TakeTwo(a, b, t0, 6, true) // alone: -4 < -1; split: -1 each
	if !p.OK || !p.WriteA || !p.WriteB || p.A.Value != -1 || p.B.Value != -1 || p.RetryAfter != 12*S {
		t.Fatalf("got %+v", p)
	}
	p = l.TakeTwo(a, b, t0, 7, true) // split: -1.5 each > maxReserved
	if p.OK || p.RetryAfter != 6*S {
		t.Fatalf("got %+v, want denied, retry 6s", p)
	}
}
