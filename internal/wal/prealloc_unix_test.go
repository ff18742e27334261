//go:build unix

package wal

import "syscall"

// allocatedBytes is how much disk space the file at path has allocated.
func allocatedBytes(path string) (int64, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, false
	}
	return st.Blocks * 512, true
}
