package actor

// prefetchWindow is how many items' lookups a partition touches ahead of
// the one it decides: enough to overlap the cache misses of a batch
// (each lookup of a million buckets misses), few enough (~2 lines each)
// that the touched lines are still cached when their turn comes.
const prefetchWindow = 32

// prefetcher tracks the touching ahead within one batch.
type prefetcher struct {
	next    int    // the next message to touch
	pending int    // items touched and not yet decided
	sum     uint64 // of the touched words, so that the loads are kept
}

// touchAhead is called before handling batch[i]: it touches the lookups of
// the messages from batch[i] on, up to prefetchWindow items ahead (of a
// message with more items, its first prefetchWindow; decide touches the
// rest as it goes, see touchItem). A lone message of one or two items is
// not touched: there is nothing to overlap one miss with, and two items
// alone are mostly a sharded request's pair, whose hot lines are cached.
func (p *Partition) touchAhead(batch []msg, i int) {
	f := &p.ahead
	if i > 0 {
		f.pending -= min(int(batch[i-1].hi-batch[i-1].lo), prefetchWindow)
	}
	if len(batch) == 1 && batch[0].hi-batch[0].lo <= 2 {
		return
	}
	for f.next < len(batch) && (f.pending < prefetchWindow || f.next <= i) {
		m := batch[f.next]
		f.next++
		n := min(int(m.hi-m.lo), prefetchWindow)
		f.pending += n
		if m.kind == kindRun {
			continue
		}
		for _, it := range m.call.Items[m.lo : m.lo+int32(n)] {
			f.sum += p.buckets.touch(it.Hash)
		}
	}
}

// touchItem touches the lookup of item j of m if m has it: decide calls it
// prefetchWindow items ahead of the one it decides.
func (p *Partition) touchItem(m msg, j int32) {
	if j < m.hi {
		p.ahead.sum += p.buckets.touch(m.call.Items[j].Hash)
	}
}
