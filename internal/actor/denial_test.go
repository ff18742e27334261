package actor

// Repeating denials without the mutex (denial.go).

import (
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// A denial repeated without the mutex is the decision a call makes: over a
// random stream that keeps one bucket at its limit (small clock steps, the
// same request again and again) and, in between, writes it and its
// neighbours every way the partition can (grants, credits, resets, calls
// over two partitions, executor runs), DecideAlone answers as calls do, and
// the counts and stored states agree at the end. The stream must repeat
// denials without the mutex, or it tests nothing.
func TestRepeatedDenialMatchesCall(t *testing.T) {
	for _, m := range logModes {
		t.Run(m.name, func(t *testing.T) { testRepeatedDenialMatchesCallOn(t, m.log) })
	}
}

func testRepeatedDenialMatchesCallOn(t *testing.T, newLog func() Log) {
	lims := mixedLims()
	now := t0
	alone, called := aloneAndCalled(t, 2, func() int64 { return now }, newLog)
	rng := rand.New(rand.NewPCG(3, 4))
	long := strings.Repeat("k", denialKeyBytes) // published; one byte more is not
	keys := []string{"hot", "hot", "hot", "a", long, long + "k"}
	both := func(c func() *Call, run func(*Group, *Call)) {
		for _, g := range []*Group{alone, called} {
			x := c()
			run(g, x)
			x.Release()
		}
	}
	decideCall := func(g *Group, c *Call) { decide(t, g, c) }
	for step := range 20000 {
		li := rng.IntN(len(lims))
		lim, name := lims[li], string(rune('p'+li))
		key := keys[rng.IntN(len(keys))]
		item := func(g *Group) Item { return itemFor(g, lim, name, key, 0) }
		switch r := rng.IntN(100); {
		case r < 10:
			now += rng.Int64N(int64(20 * time.Millisecond))
		case r < 11:
			now -= rng.Int64N(int64(5 * time.Millisecond))
		case r < 14:
			count := float64(rng.IntN(3) + 1)
			both(func() *Call { return oneCall(OpCredit, count, item(alone)) }, decideCall)
		case r < 16:
			both(func() *Call {
				c := NewCall()
				c.AddItem(item(alone), -1, false)
				return c
			}, func(g *Group, c *Call) { g.Reset(c) })
		case r < 18:
			alone.Run(int(item(alone).Part), func(*Partition) {})
		case r < 22: // a call over both partitions (under their mutexes in memory, two-phase with a log)
			it := item(alone)
			other := itemFor(alone, lim, name, keyOn(alone, name, 1-it.Part, 0), 0)
			count := float64(rng.IntN(2) + 1)
			both(func() *Call { return takeCall(count, it, other) }, decideCall)
		default:
			mem := Member{
				Op:      []Op{OpTake, OpTake, OpTake, OpCheck}[rng.IntN(4)],
				Count:   float64(rng.IntN(4)/3 + 1), // mostly 1: the same request again
				Reserve: rng.IntN(4) == 0,
				Second:  -1,
			}
			it := item(alone)
			got := mem
			if !decideAlone(alone, &it, &got) {
				t.Fatalf("step %d: DecideAlone on an idle partition declined", step)
			}
			if want := byCall(t, called, item(called), mem); got != want {
				t.Fatalf("step %d (%v %v of %s/%s at %d):\nalone %+v\ncall  %+v", step, mem.Op, mem.Count, name, key, now, got, want)
			}
		}
	}
	var repeated uint64
	for _, p := range alone.parts {
		repeated += p.denials.denied()
	}
	if repeated < 500 {
		t.Errorf("%d denials were repeated without the mutex: the stream does not exercise the path", repeated)
	}
	sameEnd(t, alone, called, lims, keys)
	sameRecords(t, alone, called)
}

// The published key matches itself only: every other key of up to
// denialKeyBytes bytes, whichever byte differs and whatever its length,
// and no key longer than that.
func TestPublishedKeyIs(t *testing.T) {
	long := strings.Repeat("k", denialKeyBytes)
	for _, key := range []string{"", "a", "user-1234", "12345678", "123456789", long} {
		var d denials
		var w [denialKeyBytes / 8]uint64
		packKey(&w, key)
		for i := range w {
			d.key[i].Store(w[i])
		}
		d.keyLen.Store(uint32(len(key)))
		if !d.keyIs(key) {
			t.Errorf("%q published: keyIs(%q) = false", key, key)
		}
		others := []string{key + "x", long + "k"}
		for i := range len(key) {
			b := []byte(key)
			b[i] ^= 1
			others = append(others, string(b))
		}
		if len(key) > 0 {
			others = append(others, key[:len(key)-1])
		}
		for _, o := range others {
			if o != key && d.keyIs(o) {
				t.Errorf("%q published: keyIs(%q) = true", key, o)
			}
		}
	}
}

// packKey packs every length of key, whatever its bytes, as a byte at a
// time would: little-endian words, zero past the key.
func TestPackKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 0; n <= denialKeyBytes; n++ {
		for range 50 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			var want [denialKeyBytes / 8]uint64
			for i, c := range b {
				want[i/8] |= uint64(c) << (8 * (i % 8))
			}
			got := [denialKeyBytes / 8]uint64{1, 2, 3, 4} // packKey overwrites every word
			packKey(&got, string(b))
			if got != want {
				t.Fatalf("packKey(%x) = %x, want %x", b, got, want)
			}
		}
	}
}

// A published denial applies to its own request only: not to another key
// with the same table hash (a forged collision), nor to a key that shares
// its first denialKeyBytes bytes, nor to another shard, which are other
// buckets, full, that grant; nor to the same bucket read under another
// limit, asked for another count or reserving, which are decided under
// the mutex.
func TestRepeatedDenialKeepsRequestsApart(t *testing.T) {
	g := NewGroup(1, NopLog{}, frozen)
	g.Start()
	t.Cleanup(g.Stop)
	lim := tokenLim(1)
	long := strings.Repeat("x", denialKeyBytes)
	for _, tc := range []struct {
		name   string
		key    string
		other  func(*Item, *Member)
		grants bool
	}{
		{"a key with the same hash", "x", func(it *Item, _ *Member) { it.ID.Key = "x\x00" }, true},
		{"a longer key with the same prefix", long, func(it *Item, _ *Member) { it.ID.Key = long + "x" }, true},
		{"another shard", "z", func(it *Item, _ *Member) { it.ID.Shard = 1 }, true},
		{"another limit", "y", func(it *Item, _ *Member) { it.Lim = tokenLim(1) }, false},
		{"another count", "w", func(_ *Item, m *Member) { m.Count = 0.5 }, false},
		{"a reservation", "v", func(_ *Item, m *Member) { m.Reserve = true }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := g.parts[0]
			it := itemFor(g, lim, "n", tc.key, 0)
			publishDenial(t, g, it)
			x, m := it, Member{Op: OpTake, Count: 1, Second: -1}
			before := p.denials.denied()
			if !decideAlone(g, &x, &m) || m.OK || p.denials.denied() != before+1 {
				t.Fatalf("the same request again: %+v, %d repeated (want %d)", m, p.denials.denied(), before+1)
			}
			x, m = it, Member{Op: OpTake, Count: 1, Second: -1}
			tc.other(&x, &m) // same Hash and Part as it
			before = p.denials.denied()
			if !decideAlone(g, &x, &m) || m.OK != tc.grants || p.denials.denied() != before {
				t.Fatalf("%+v: %+v, %d repeated (want %d): decided from %q's denial", x.ID, m, p.denials.denied(), before, tc.key)
			}
		})
	}
}

// Callers racing on one bucket at its limit, while executor runs and grants
// of the bucket keep invalidating the published denial: every decision is
// counted once, grants never exceed what the bucket held plus its refill,
// and some denials were repeated without the mutex. Run it with -race: the
// record is read while it is written.
func TestRepeatedDenialsConcurrently(t *testing.T) {
	const (
		callers = 8
		takes   = 3000
		tick    = int64(time.Microsecond) // each clock reading moves time on
	)
	var clockNow atomic.Int64
	clockNow.Store(t0)
	clock := func() int64 { return clockNow.Add(tick) }
	g := NewGroup(1, NopLog{}, clock)
	g.Start()
	t.Cleanup(g.Stop)
	lim := &bucket.Limit{Kind: bucket.TokenBucket, Rate: 1000, Period: int64(time.Second), Capacity: 5}
	it := itemFor(g, lim, "hot", "", 0)
	var granted atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	runs := async(func() {
		for {
			select {
			case <-stop:
				return
			default:
				g.Run(0, func(*Partition) {})
			}
		}
	})
	for range callers {
		wg.Go(func() {
			for range takes {
				x := it
				m := Member{Op: OpTake, Count: 1, Second: -1}
				if !decideAlone(g, &x, &m) {
					c := oneCall(OpTake, 1, it) // the partition was busy: as Limit does
					decide(t, g, c)
					m = c.Members[0]
					c.Release()
				}
				if m.OK {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-runs
	n := g.Counts()
	if total := n.Grants + n.Denials; total != callers*takes || n.Grants != uint64(granted.Load()) {
		t.Errorf("counts %+v, want %d decisions of which %d grants", n, callers*takes, granted.Load())
	}
	elapsed := clockNow.Load() - t0
	if limit := lim.Capacity + lim.Rate*float64(elapsed)/float64(lim.Period); float64(granted.Load()) > limit {
		t.Errorf("%d grants in %v, more than the bucket's %v", granted.Load(), time.Duration(elapsed), limit)
	}
	if g.parts[0].denials.denied() == 0 {
		t.Error("no denial was repeated without the mutex")
	}
}

// A stopped partition repeats no denial: DecideAlone declines, as it does
// without one published, and the caller's call reports the stop.
func TestRepeatedDenialEndsAtStop(t *testing.T) {
	g := NewGroup(1, NopLog{}, frozen)
	g.Start()
	it := itemFor(g, tokenLim(1), "n", "k", 0)
	publishDenial(t, g, it)
	g.Stop()
	x, m := it, Member{Op: OpTake, Count: 1, Second: -1}
	if decideAlone(g, &x, &m) {
		t.Fatalf("DecideAlone on a stopped partition decided: %+v", m)
	}
}

// A message the partition's goroutine runs (queued, not run by its
// sender) ends the published denial too: after a credit run that way,
// the same request is not denied from the state before it.
func TestRepeatedDenialEndsWhenTheGoroutineRuns(t *testing.T) {
	g := NewGroup(1, NopLog{}, frozen)
	g.Start()
	t.Cleanup(g.Stop)
	it := itemFor(g, tokenLim(1), "n", "k", 0)
	publishDenial(t, g, it)
	g.QueueOnly() // from now on the goroutine runs every message
	c := oneCall(OpCredit, 1, it)
	decide(t, g, c)
	c.Release()
	x, m := it, Member{Op: OpTake, Count: 1, Second: -1}
	if decideAlone(g, &x, &m) && !m.OK {
		t.Fatalf("after a credit the goroutine ran, DecideAlone denied from the state before it: %+v", m)
	}
}

// A repeated denial is answered from the reading the record says the
// request is granted from: a nanosecond before it the request is denied
// without the mutex and waits exactly that nanosecond; at it the request
// is granted, through the mutex, as the mutex's holder would decide.
func TestRepeatedDenialUntilItsGrant(t *testing.T) {
	now := t0
	g := NewGroup(1, NopLog{}, func() int64 { return now })
	g.Start()
	t.Cleanup(g.Stop)
	lim := tokenLim(1) // one token an hour
	it := itemFor(g, lim, "n", "k", 0)
	publishDenial(t, g, it)
	p := g.parts[it.Part]
	x, m := it, Member{Op: OpTake, Count: 1, Second: -1}
	if !decideAlone(g, &x, &m) || m.OK || m.RetryAfter <= 1 {
		t.Fatalf("the same request again: %+v", m)
	}
	grantAt := now + m.RetryAfter
	for _, tc := range []struct {
		at       int64
		ok       bool
		retry    int64
		repeated uint64 // denials repeated without the mutex by this decision
	}{
		{grantAt - m.RetryAfter/2, false, m.RetryAfter - m.RetryAfter/2, 1},
		{grantAt - 1, false, 1, 1},
		{grantAt, true, 0, 0},
	} {
		now = tc.at
		x, got := it, Member{Op: OpTake, Count: 1, Second: -1}
		before := p.denials.denied()
		if !decideAlone(g, &x, &got) || got.OK != tc.ok || got.RetryAfter != tc.retry || p.denials.denied()-before != tc.repeated {
			t.Fatalf("at grant reading %+d ns: %+v, %d repeated; want OK %v, RetryAfter %d, %d repeated",
				tc.at-grantAt, got, p.denials.denied()-before, tc.ok, tc.retry, tc.repeated)
		}
	}
}

// A published denial ends when its bucket is written under another limit
// (a name's other inline config: another *bucket.Limit, the same bucket),
// by a credit alone or in a call: a request under the published limit then
// sees the token, both alone and in a call over two partitions.
func TestWriteUnderAnotherLimitEndsTheDenial(t *testing.T) {
	credits := []struct {
		name   string
		credit func(g *Group, it Item)
	}{
		{"DecideAlone", func(g *Group, it Item) {
			m := Member{Op: OpCredit, Count: 1, Second: -1}
			if !decideAlone(g, &it, &m) {
				t.Fatal("the credit was not decided alone")
			}
		}},
		{"call", func(g *Group, it Item) {
			c := oneCall(OpCredit, 1, it)
			decide(t, g, c)
			c.Release()
		}},
	}
	for _, cr := range credits {
		t.Run(cr.name+"/alone", func(t *testing.T) {
			g, hot, _ := deniedHot(t)
			other := hot
			other.Lim = tokenLim(1) // the same numbers, another limit
			cr.credit(g, other)
			it, m := hot, Member{Op: OpTake, Count: 1, Second: -1}
			if !decideAlone(g, &it, &m) || !m.OK {
				t.Errorf("the take after the credit: decided %+v, want granted", m)
			}
		})
		t.Run(cr.name+"/call", func(t *testing.T) {
			g, hot, user := deniedHot(t)
			other := hot
			other.Lim = tokenLim(1)
			cr.credit(g, other)
			c := takeCall(1, hot, user)
			defer c.Release()
			decide(t, g, c)
			if !c.Members[0].OK || !c.Members[1].OK {
				t.Errorf("the call after the credit: %+v, want both granted", c.Members)
			}
		})
	}
}
