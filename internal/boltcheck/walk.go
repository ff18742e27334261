package boltcheck

import (
	"fmt"
	"io"
)

// Walk reads what it can of the bbolt file r of size bytes, for salvage:
// it uses the newer valid meta page (as bbolt does), and calls visit with
// every leaf entry of every bucket it can reach, path naming the bucket
// (nil for the top level), in key order within each page. A damaged page
// or element is skipped with its subtree and listed in problems; err is
// set only when no meta page is valid. Keys and values stay valid after
// visit returns.
func Walk(r io.ReaderAt, size int64, visit func(path [][]byte, key, value []byte, bucket bool)) (problems []error, err error) {
	f, err := Open(r, size, false)
	if err != nil {
		return nil, err
	}
	w := walker{f: f, visit: visit}
	if f.metaErr != nil {
		w.problems = append(w.problems, fmt.Errorf("%w (read from the other meta page: the file's last transaction may be lost)", f.metaErr))
	}
	_ = w.tree(f.root, nil, 0, nil) // lenient: never returns an error
	return w.problems, nil
}
