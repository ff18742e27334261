package ratelimit

import (
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// sweep drops full buckets from every partition, all of them.
func (l *Limiter) sweep() int {
	now, dropped := l.now(), 0
	for i := 0; i < l.group.Partitions(); i++ {
		l.group.Run(i, func(p *actor.Partition) { dropped += p.Sweep(now, nil) })
	}
	return dropped
}

// sweepSlice is how many buckets one step of the periodic sweep examines:
// a few milliseconds of a partition's time at most, so requests queued
// behind it wait little.
const sweepSlice = 16 << 10

// sweepGently is the periodic sweep: as many bounded steps per partition
// as it holds buckets in slices, each a separate message, so requests
// interleave with it.
func (l *Limiter) sweepGently() (dropped int) {
	now := l.now()
	for i := 0; i < l.group.Partitions(); i++ {
		steps := -1 // planned by the first step
		for step := 0; steps < 0 || step < steps; step++ {
			ok := l.group.Run(i, func(p *actor.Partition) {
				if steps < 0 {
					steps = p.Len()/sweepSlice + 1
				}
				d, _ := p.SweepSome(now, sweepSlice)
				dropped += d
			})
			if !ok {
				return dropped
			}
		}
	}
	return dropped
}

// startBackground runs sweeps and snapshot triggers on wall-clock tickers.
func (l *Limiter) startBackground() {
	sweepEvery := orDefault(l.opts.SweepInterval, DefaultSweepInterval)
	snapEvery := orDefault(l.opts.SnapshotInterval, DefaultSnapshotInterval)
	snapBytes := orDefault(l.opts.SnapshotBytes, DefaultSnapshotBytes)
	l.bgDone.Add(1)
	go func() {
		defer l.bgDone.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		lastSweep := time.Now()
		for {
			select {
			case <-l.stopBG:
				return
			case now := <-tick.C:
				if sweepEvery > 0 && now.Sub(lastSweep) >= sweepEvery {
					l.sweepGently()
					lastSweep = now
				}
				if l.snapshotDue(now, snapBytes, snapEvery) {
					l.Snapshot()
				}
			}
		}
	}()
}

// snapshotDue reports whether a snapshot is due at now: the log holds
// everyBytes or more that no snapshot covers, or it holds some and every
// has passed since the last snapshot (or Open). A log tail recovered at
// Open counts (see recover). everyBytes or every <= 0 disables its trigger.
func (l *Limiter) snapshotDue(now time.Time, everyBytes int64, every time.Duration) bool {
	if l.wal == nil || l.wal.Err() != nil {
		return false
	}
	uncovered := l.wal.Written() - l.snapBytes.Load()
	return everyBytes > 0 && uncovered >= everyBytes ||
		every > 0 && uncovered > 0 && now.Sub(time.Unix(0, l.lastSnap.Load())) >= every
}
