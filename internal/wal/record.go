package wal

// Record is one state change: the absolute state a bucket has after it, or
// its deletion. Records never carry deltas, so replaying a record twice, or
// replaying records of different buckets in any order, gives the same state.
type Record struct {
	Name   string  // limit name
	Key    string  // key; "" is the limit's global bucket
	Shard  uint32  // shard index, 0 for unsharded limits
	Delete bool    // the bucket was removed (reset, or found full); Value and TS are zero
	Value  float64 // tokens; negative is reserved debt
	TS     int64   // Unix nanoseconds
}

// Waiter learns the outcome of the commit that made an Append durable.
// Committed is called exactly once, from the log's writer goroutine (or, if
// the log has already failed or closed, from the goroutine calling Append),
// with nil once the records are on disk (fsynced), or with the error that
// kept them off it. Committed must not block.
type Waiter interface {
	Committed(err error)
}
