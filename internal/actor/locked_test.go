package actor

// Deciding under the partitions' mutexes (locked.go).

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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
	for _, m := range logModes {
		t.Run(m.name, func(t *testing.T) { testDecideAloneMatchesCallOn(t, m.log) })
	}
}

func testDecideAloneMatchesCallOn(t *testing.T, newLog func() Log) {
	lims := mixedLims()
	now := t0
	alone, called := aloneAndCalled(t, 1, func() int64 { return now }, newLog)
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
		if !decideAlone(alone, &it, &got) {
			t.Fatalf("step %d: DecideAlone on an idle partition declined", step)
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
	sameRecords(t, alone, called)
}

// An atomic call that a published denial denies is decided without that
// partition's mutex (decideDenied) and decides as the partitions'
// goroutines do: over a random stream of calls over a hot bucket and
// others (takes and checks, reservations, the hot bucket named twice, its
// partition shared with another bucket) between lone requests that
// publish its denials, credits that change it, and a clock that steps
// forward and back, a group deciding under mutexes gives the same
// members, waits, counts and stored states as one that queues every
// message. The stream must decide calls from published denials, or it
// tests nothing.
func TestDeniedCallMatchesQueued(t *testing.T) {
	lims := mixedLims()
	now := t0
	clock := func() int64 { return now }
	locked := NewGroup(3, NopLog{}, clock)
	locked.Start()
	t.Cleanup(locked.Stop)
	queued := NewGroup(3, NopLog{}, clock)
	queued.QueueOnly()
	queued.Start()
	t.Cleanup(queued.Stop)

	rng := rand.New(rand.NewPCG(5, 6))
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5"}
	type pick struct {
		li   int
		key  string
		mem  Member
		same int // >= 0: the bucket of member same again
	}
	build := func(g *Group, picks []pick) *Call {
		c := NewCall()
		c.Atomic = true
		for m, p := range picks {
			mem := p.mem
			mem.First = c.AddItem(itemFor(g, lims[p.li], string(rune('p'+p.li)), p.key, 0), int32(m), false)
			c.Members = append(c.Members, mem)
		}
		return c
	}
	member := func(op Op, count float64, reserve bool) Member {
		return Member{Op: op, Count: count, Reserve: reserve, Second: -1}
	}
	applied := 0
	for step := range 20000 {
		li := rng.IntN(len(lims))
		hot := pick{li: li, key: "hot", same: -1}
		switch r := rng.IntN(100); {
		case r < 10:
			now += rng.Int64N(int64(20 * time.Millisecond))
		case r < 11:
			now -= rng.Int64N(int64(5 * time.Millisecond))
		case r < 13:
			hot.mem = member(OpCredit, float64(rng.IntN(2)+1), false)
			for _, g := range []*Group{locked, queued} {
				c := build(g, []pick{hot})
				decide(t, g, c)
				c.Release()
			}
		case r < 40: // a lone request, which publishes the hot bucket's denials
			mem := member(OpTake, 1, rng.IntN(4) == 0)
			it := itemFor(locked, lims[li], string(rune('p'+li)), "hot", 0)
			got := mem
			if !decideAlone(locked, &it, &got) {
				t.Fatalf("step %d: DecideAlone on an idle memory partition declined", step)
			}
			if want := byCall(t, queued, itemFor(queued, lims[li], string(rune('p'+li)), "hot", 0), mem); got != want {
				t.Fatalf("step %d: alone %+v, queued %+v", step, got, want)
			}
		default:
			hot.mem = member([]Op{OpTake, OpTake, OpTake, OpCheck}[rng.IntN(4)], float64(rng.IntN(4)/3+1), rng.IntN(4) == 0)
			picks := []pick{hot}
			for range rng.IntN(2) + 1 {
				u := pick{li: rng.IntN(len(lims)), key: users[rng.IntN(len(users))], same: -1}
				u.mem = member([]Op{OpTake, OpTake, OpCheck}[rng.IntN(3)], float64(rng.IntN(3)+1), rng.IntN(4) == 0)
				picks = append(picks, u)
			}
			if rng.IntN(8) == 0 {
				again := hot
				again.mem = member(OpTake, 1, false)
				picks = append(picks, again)
			}
			a, q := build(locked, picks), build(queued, picks)
			hi := a.Items[0]
			published := locked.parts[hi.Part].denials.read(&hi, &a.Members[0], new(record))
			decide(t, locked, a)
			decide(t, queued, q)
			if published && !a.Members[0].OK {
				applied++
			}
			for m := range a.Members {
				if a.Members[m] != q.Members[m] {
					t.Fatalf("step %d, member %d of %+v at %d:\nlocked %+v\nqueued %+v", step, m, picks, now, a.Members[m], q.Members[m])
				}
			}
			if a.Wait != q.Wait || a.FirstErr() != q.FirstErr() {
				t.Fatalf("step %d: wait %d, error %v locked; %d, %v queued", step, a.Wait, a.FirstErr(), q.Wait, q.FirstErr())
			}
			a.Release()
			q.Release()
		}
	}
	if applied < 1000 {
		t.Errorf("%d calls were denied with a published denial of their hot bucket: the stream does not exercise the path", applied)
	}
	sameEnd(t, locked, queued, lims, append([]string{"hot"}, users...))
}

// A call denied by a published denial of one of its buckets does not wait
// for that bucket's partition: it is decided while another caller holds
// the partition's mutex.
func TestDeniedCallLeavesThePublishedMutex(t *testing.T) {
	g, hot, user := deniedHot(t)
	mu := &g.parts[hot.Part].mu
	mu.Lock()
	held := true
	t.Cleanup(func() { // before Stop, which would wait for the mutex
		if held {
			mu.Unlock()
		}
	})
	c := takeCall(1, hot, user)
	waitChan(t, async(func() { decide(t, g, c) }), "a denied call while the hot partition's mutex is held")
	mu.Unlock()
	held = false
	if c.Members[0].OK || !c.Members[1].OK || c.Members[0].RetryAfter != int64(time.Hour) {
		t.Errorf("members %+v: want the hot bucket denied for an hour, the other grantable", c.Members)
	}
	if v := value(t, g, user); v != 1 {
		t.Errorf("the other bucket holds %v tokens after a denied call, want 1", v)
	}
	c.Release()
}

// Calls over overlapping sets of partitions, in every order, from many
// goroutines, while lone requests and calls of one partition run beside
// them, all end (the mutexes cannot deadlock) and account exactly: on a
// frozen clock, every bucket grants exactly its capacity.
func TestLockedCallsUnderContention(t *testing.T) {
	const parts, buckets, capacity = 4, 8, 300
	g := NewGroup(parts, NopLog{}, frozen)
	g.Start()
	t.Cleanup(g.Stop)
	lim := tokenLim(capacity)
	items := make([]Item, buckets)
	for i := range items {
		items[i] = itemFor(g, lim, "n", keyOn(g, "n", int32(i%parts), i/parts), 0)
	}
	granted := make([]atomic.Int64, buckets)
	done := spawn(16, 7, 8, func(r *rand.Rand) {
		for range 400 {
			if r.IntN(4) == 0 {
				i := r.IntN(buckets)
				it, m := items[i], Member{Op: OpTake, Count: 1, Second: -1}
				if !decideAlone(g, &it, &m) {
					t.Error("DecideAlone on an idle memory partition declined")
					return
				}
				if m.OK {
					granted[i].Add(1)
				}
				continue
			}
			pick := r.Perm(buckets)[:2+r.IntN(2)]
			var its []Item
			for _, i := range pick {
				its = append(its, items[i])
			}
			c := takeCall(1, its...)
			if _, err := g.Decide(context.Background(), c); err != nil {
				t.Error(err)
			}
			all := true
			for _, m := range c.Members {
				all = all && m.OK
			}
			if all {
				for _, i := range pick {
					granted[i].Add(1)
				}
			}
			c.Release()
		}
	})
	waitChan(t, done, "the callers")
	for i := range items {
		if n, v := granted[i].Load(), value(t, g, items[i]); float64(n)+v != capacity || n == 0 {
			t.Errorf("bucket %d: %d granted and %v left, want %d in all", i, n, v, capacity)
		}
	}
}

// A published denial that stops being true while a call is decided from
// it (the bucket is credited meanwhile) does not decide the call: it is
// decided again under every mutex, and granted.
func TestDeniedCallSeesTheBucketChange(t *testing.T) {
	g, hot, user := deniedHot(t)
	g.besideHook = func() {
		g.besideHook = nil
		it, m := hot, Member{Op: OpCredit, Count: 1, Second: -1}
		if !decideAlone(g, &it, &m) {
			t.Error("the credit was not decided")
		}
	}
	c := takeCall(1, hot, user)
	defer c.Release()
	decide(t, g, c)
	if g.besideHook != nil {
		t.Fatal("the call was not decided from the published denial")
	}
	if !c.Members[0].OK || !c.Members[1].OK {
		t.Errorf("members %+v: want both granted after the credit", c.Members)
	}
	if v := value(t, g, hot); v != 0 {
		t.Errorf("the hot bucket holds %v tokens, want 0", v)
	}
}

// A call first decided from a published denial, denied there with a wait
// for a bucket it names twice, and decided again under every mutex once
// the record proves stale (the bucket credited meanwhile), is granted
// with no wait left over from the first attempt.
func TestDeniedCallDecidedAgainStartsAfresh(t *testing.T) {
	g := NewGroup(2, NopLog{}, frozen)
	g.Start()
	t.Cleanup(g.Stop)
	hot, user := twoParts(g, tokenLim(2))
	for i := range publishAfter + 1 { // empty hot, then have its take of 1 published
		x, m := hot, Member{Op: OpTake, Count: 1, Second: -1}
		if i == 0 {
			m.Count = 2
		}
		decideAlone(g, &x, &m)
	}
	g.besideHook = func() {
		g.besideHook = nil
		c := oneCall(OpCredit, 2, hot)
		decide(t, g, c)
		c.Release()
	}
	c := takeCall(1, hot, user)
	i := c.AddItem(hot, 2, false) // hot again: a bucket named twice
	c.Members = append(c.Members, Member{Op: OpTake, Count: 1, First: i, Second: -1})
	defer c.Release()
	decide(t, g, c)
	if g.besideHook != nil {
		t.Fatal("the call was not decided from the published denial first")
	}
	for k, m := range c.Members {
		if !m.OK || m.InWait {
			t.Errorf("member %d: %+v, want granted and not in a wait", k, m)
		}
	}
	if c.Wait != 0 {
		t.Errorf("granted call: Wait %d, want 0", c.Wait)
	}
}

// On a partition with a log, DecideAlone answers a request that wrote
// its bucket once the log has committed the bucket's record, and one that
// wrote nothing at once: a grant waits for its commit (and a failed
// commit is the item's error), a denial or a check waits for nothing,
// a caller whose context ends first hears so while the grant stays
// decided, and a log that has failed leaves the request to a call.
func TestDecideAloneWithALog(t *testing.T) {
	boom := errors.New("disk on fire")
	take := func() Member { return Member{Op: OpTake, Count: 1, Second: -1} }
	for _, tc := range []struct {
		name      string
		mem       Member
		empty     bool  // the bucket holds no token
		commitErr error // what the held commit reports
		cancel    bool  // ctx ends while the commit is held
		logErr    error // the log has failed
		waits     bool  // a record is appended and its commit awaited
		decided   bool
		ok        bool
	}{
		{name: "grant", mem: take(), waits: true, decided: true, ok: true},
		{name: "grant whose commit fails", mem: take(), commitErr: boom, waits: true, decided: true, ok: true},
		{name: "grant whose caller gives up", mem: take(), cancel: true, waits: true, decided: true, ok: true},
		{name: "credit", mem: Member{Op: OpCredit, Count: 1, Second: -1}, empty: true, waits: true, decided: true, ok: true},
		{name: "denial", mem: take(), empty: true, decided: true},
		{name: "check", mem: Member{Op: OpCheck, Count: 1, Second: -1}, decided: true, ok: true},
		{name: "failed log", mem: take(), logErr: boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := &fakeLog{hold: true}
			g := NewGroup(1, fl, frozen)
			g.Start()
			t.Cleanup(g.Stop)
			it := itemFor(g, tokenLim(1), "n", "k", 0)
			if tc.empty {
				x, m := it, take()
				done := async(func() { decideAlone(g, &x, &m) })
				waitUntil(t, "the emptying take's record", func() bool { return fl.held() == 1 })
				fl.release(nil)
				waitChan(t, done, "the emptying take")
				fl.mu.Lock()
				fl.hold, fl.recs, fl.owned = true, nil, 0
				fl.mu.Unlock()
			}
			fl.setErr(tc.logErr)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			x, m := it, tc.mem
			var decided bool
			var err error
			done := async(func() { decided, err = g.DecideAlone(ctx, &x, &m, t0) })
			if tc.waits {
				waitUntil(t, "the record", func() bool { return fl.held() == 1 })
				select {
				case <-done:
					t.Fatal("DecideAlone returned before the commit")
				default:
				}
				if tc.cancel {
					cancel()
					waitChan(t, done, "DecideAlone after ctx ended")
				}
				fl.release(tc.commitErr)
			}
			waitChan(t, done, "DecideAlone")
			if decided != tc.decided || m.OK != tc.ok {
				t.Fatalf("decided %v, OK %v; want %v, %v", decided, m.OK, tc.decided, tc.ok)
			}
			switch {
			case tc.cancel && !errors.Is(err, context.Canceled):
				t.Errorf("err %v, want context.Canceled", err)
			case !tc.cancel && err != nil:
				t.Errorf("err %v, want nil", err)
			case !tc.cancel && !errors.Is(x.Err, tc.commitErr):
				t.Errorf("item error %v, want %v", x.Err, tc.commitErr)
			}
			if recs := fl.records(); tc.waits != (len(recs) == 1) || len(recs) > 1 {
				t.Errorf("records %+v, want one: %v", recs, tc.waits)
			}
			if owned, open := fl.ownState(); tc.waits && (owned != 1 || open) {
				t.Errorf("AppendOwn calls %d (open %v): want one, followed by CommitNow", owned, open)
			}
		})
	}
}

// With a log, DecideAlone hands each bucket's records to the log in the
// order it decided them, however many callers decide at once: on a
// frozen clock, every grant of a bucket leaves one token less, so its
// records must count down by one, in the order the log took them.
func TestDecideAloneLogsInDecisionOrder(t *testing.T) {
	const callers, takes = 8, 400
	const capacity = callers * takes
	fl := &fakeLog{}
	g := NewGroup(2, fl, frozen)
	g.Start()
	t.Cleanup(g.Stop)
	lim := tokenLim(capacity)
	a, b := twoParts(g, lim)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range takes {
				it := a
				if (c+i)%2 == 1 {
					it = b
				}
				m := Member{Op: OpTake, Count: 1, Second: -1}
				if !decideAlone(g, &it, &m) || !m.OK {
					t.Errorf("caller %d, take %d: decided %+v, want granted alone", c, i, m)
					return
				}
			}
		}()
	}
	wg.Wait()
	next := map[string]float64{a.ID.Key: capacity - 1, b.ID.Key: capacity - 1}
	for i, r := range fl.records() {
		if r.Value != next[r.Key] {
			t.Fatalf("record %d of %q holds %v tokens, want %v: logged out of decision order", i, r.Key, r.Value, next[r.Key])
		}
		next[r.Key]--
	}
	if n := len(fl.records()); n != callers*takes {
		t.Errorf("%d records, want %d", n, callers*takes)
	}
}
