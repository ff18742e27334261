//go:build unix

package wal

import "syscall"

// statfsFree reports the bytes available to unprivileged users and the
// size of the file system holding path.
func statfsFree(path string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
