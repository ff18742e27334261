package redislimit

import (
	"sync"
)

// batcher queues parts per tag and sends them as function calls: one
// program per tag and round, holding every part queued on that tag since
// its previous program was sent (a tag has at most one program in
// flight, so those programs decide in order). A round sends the programs
// of every tag with parts waiting, pipelined in one exchange (on a single
// server, where a call's keys need not share a slot, the tags share
// programs: one function call decides for all of them); up to
// maxRounds rounds are in flight at once. A caller that finds fewer in
// flight runs one itself, unless its context can end; sender goroutines
// run the other rounds.
type batcher struct {
	s         *redisStore
	mu        sync.Mutex
	wake      sync.Cond
	q         [Slots]tagQueue
	ready     []int32 // tags with parts waiting and no program in flight
	rounds    int     // rounds in flight
	maxRounds int
	idle      int  // senders waiting for work
	merge     bool // one program for all of a round's tags (a single server)
	stop      bool
	senders   sync.WaitGroup
	scratch   []*part
}

type tagQueue struct {
	parts  []*part
	busy   bool // a program of this tag is in flight
	listed bool // in ready
}

// round is the programs of one exchange with the server.
type round struct {
	tags  []int32 // the tags it holds busy
	progs []*program
	drop  []*part // parts of abandoned jobs, finished without being sent
}

var roundPool = sync.Pool{New: func() any { return new(round) }}

func (b *batcher) start(s *redisStore, maxRounds int, merge bool) {
	b.s, b.maxRounds, b.merge = s, maxRounds, merge
	b.wake.L = &b.mu
	b.senders.Add(maxRounds)
	for range maxRounds {
		go b.sender()
	}
}

// close stops the senders once the queues are empty; callers must have
// stopped submitting.
func (b *batcher) close() {
	b.mu.Lock()
	b.stop = true
	b.wake.Broadcast()
	b.mu.Unlock()
	b.senders.Wait()
}

// submit queues parts, then, if fewer than maxRounds rounds are in
// flight, has a round sent: with inline, on the caller's goroutine (its
// parts and whatever else is waiting), with no goroutine switch; else by
// a sender goroutine, so that a caller whose context can end is never
// inside a round it must finish, and can stop waiting when the context
// ends. Work left waiting when a round ends goes to a sender goroutine.
func (b *batcher) submit(parts []part, inline bool) {
	b.mu.Lock()
	b.enqueue(parts)
	if b.rounds >= b.maxRounds || len(b.ready) == 0 {
		b.mu.Unlock()
		return
	}
	if !inline {
		// With fewer rounds in flight than senders, a sender that is not
		// waiting is on its way back to take the work.
		if b.idle > 0 {
			b.wake.Signal()
		}
		b.mu.Unlock()
		return
	}
	r := b.take()
	b.mu.Unlock()
	b.run(r)
	b.mu.Lock()
	if len(b.ready) > 0 && b.rounds < b.maxRounds && b.idle > 0 {
		b.wake.Signal()
	}
	b.mu.Unlock()
}

// enqueue, with b.mu held, appends parts to their tags' queues and lists
// the tags that become ready.
func (b *batcher) enqueue(parts []part) {
	for i := range parts {
		pt := &parts[i]
		q := &b.q[pt.tag]
		q.parts = append(q.parts, pt)
		if !q.busy && !q.listed {
			q.listed = true
			b.ready = append(b.ready, pt.tag)
		}
	}
}

// queue queues parts without sending them: they go with the next round
// (see dropHolds), or when flush is called.
func (b *batcher) queue(parts []part) {
	b.mu.Lock()
	b.enqueue(parts)
	b.mu.Unlock()
}

// flush has the senders send whatever is waiting.
func (b *batcher) flush() {
	b.mu.Lock()
	if len(b.ready) > 0 {
		b.wake.Broadcast()
	}
	b.mu.Unlock()
}

func (b *batcher) sender() {
	defer b.senders.Done()
	b.mu.Lock()
	for {
		for len(b.ready) == 0 || b.rounds >= b.maxRounds {
			if b.stop && len(b.ready) == 0 {
				b.mu.Unlock()
				return
			}
			b.idle++
			b.wake.Wait()
			b.idle--
		}
		r := b.take()
		b.mu.Unlock()
		b.run(r)
		b.mu.Lock()
	}
}

// take forms a round from the ready tags; b.mu is held. Each tag's parts
// (up to maxProgramItems items) form a section; with merge, sections share
// programs (up to maxMergedItems items each), else each has its own.
func (b *batcher) take() *round {
	r := roundPool.Get().(*round)
	var p *program
	for _, tag := range b.ready {
		q := &b.q[tag]
		q.listed = false
		n, k := 0, 0
		start := len(b.scratch)
		for ; k < len(q.parts); k++ {
			pt := q.parts[k]
			if pt.j.abandoned() {
				r.drop = append(r.drop, pt)
				continue
			}
			sz := pt.size()
			if n > 0 && n+sz > maxProgramItems {
				break
			}
			n += sz
			b.scratch = append(b.scratch, pt)
		}
		rest := copy(q.parts, q.parts[k:])
		clear(q.parts[rest:])
		q.parts = q.parts[:rest]
		if len(b.scratch) == start {
			continue
		}
		if p == nil || !b.merge || p.size+n > maxMergedItems {
			p = getProgram()
			r.progs = append(r.progs, p)
		}
		p.addSection(tag, b.scratch[start:], n)
		q.busy = true
		r.tags = append(r.tags, tag)
	}
	clear(b.scratch)
	b.scratch = b.scratch[:0]
	b.ready = b.ready[:0]
	b.rounds++
	return r
}

// run sends r, then marks its tags free; b.mu is not held.
func (b *batcher) run(r *round) {
	for _, pt := range r.drop {
		pt.j.partDone()
	}
	if len(r.progs) > 0 {
		b.s.exchange(r)
	}
	b.mu.Lock()
	for _, tag := range r.tags {
		q := &b.q[tag]
		q.busy = false
		if len(q.parts) > 0 && !q.listed {
			q.listed = true
			b.ready = append(b.ready, tag)
		}
	}
	b.rounds--
	if len(b.ready) > 0 && b.idle > 0 {
		b.wake.Signal() // work left waiting for the next round
	}
	b.mu.Unlock()
	for _, p := range r.progs {
		putProgram(p)
	}
	clear(r.progs)
	clear(r.drop)
	r.tags, r.progs, r.drop = r.tags[:0], r.progs[:0], r.drop[:0]
	roundPool.Put(r)
}

var programPool = sync.Pool{New: func() any { return &program{keyIdx: make(map[string]uint16)} }}

func getProgram() *program { return programPool.Get().(*program) }

func putProgram(p *program) {
	p.reset()
	programPool.Put(p)
}
