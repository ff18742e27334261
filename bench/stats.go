package main

import (
	"math"
	"math/bits"
	"time"
)

// hist is a log-linear latency histogram in nanoseconds, HDR style: values
// below 2*histSub are exact, above that each power of two is split into
// histSub linear buckets, so a recorded value is off by at most 1/histSub
// (3%) of itself. Recording is a few arithmetic instructions and one
// increment, with no locks: every worker owns one, and they are merged after
// the cell ends.
type hist struct {
	counts [histBuckets]uint32
	n      uint64
	max    int64
}

const (
	histSubBits = 5
	histSub     = 1 << histSubBits // linear buckets per power of two
	// Values up to 2^40 ns (18 minutes) have their own bucket; larger
	// ones land in the last.
	histBuckets = (40-histSubBits)*histSub + histSub
)

// bucketOf returns the bucket index of v (>= 0).
func bucketOf(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1 // v>>shift is in [histSub, 2*histSub)
	i := (shift+1)*histSub + int(v>>uint(shift)) - histSub
	if i >= histBuckets {
		return histBuckets - 1
	}
	return i
}

// bucketRange returns the smallest and largest value that map to bucket i.
func bucketRange(i int) (lo, hi uint64) {
	if i < 2*histSub {
		return uint64(i), uint64(i)
	}
	shift := uint(i/histSub - 1)
	m := uint64(i%histSub + histSub)
	return m << shift, (m+1)<<shift - 1
}

func (h *hist) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.n++
	if int64(d) > h.max {
		h.max = int64(d)
	}
}

func (h *hist) reset() { *h = hist{} }

// merge adds o into h.
func (h *hist) merge(o *hist) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile (0 < q <= 1) as the midpoint of the
// bucket holding it, capped at the largest value recorded; 0 when empty.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := max(nearestRankOf(q, h.n), 1)
	var cum uint64
	for i, c := range h.counts {
		cum += uint64(c)
		if cum >= rank {
			lo, hi := bucketRange(i)
			return min(time.Duration(lo+(hi-lo)/2), time.Duration(h.max))
		}
	}
	return time.Duration(h.max)
}

// nearestRankOf is the rank (1-based) of the q-quantile of n values by the
// nearest-rank method: ceil(q*n), less a hair, so that floating-point
// error above a whole product cannot raise the rank.
func nearestRankOf(q float64, n uint64) uint64 {
	return uint64(math.Ceil(q*float64(n) - 1e-9))
}
