//go:build !unix

package wal

import "errors"

// statfsFree is not available here: preallocation stays off.
func statfsFree(string) (free, total uint64, err error) {
	return 0, 0, errors.New("statfs: not supported on this platform")
}
