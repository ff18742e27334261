//go:build unix

package wal

import (
	"path/filepath"
	"syscall"
	"testing"
)

// allocatedBytes is how much disk space the file at path has allocated.
func allocatedBytes(path string) (int64, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, false
	}
	return st.Blocks * 512, true
}

// statfsFree reads the file system holding a path: some space, and no
// more free than there is; a missing path is an error.
func TestStatfsFree(t *testing.T) {
	dir := t.TempDir()
	free, total, err := statfsFree(dir)
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 || free > total {
		t.Errorf("statfsFree(%s) = %d free of %d", dir, free, total)
	}
	if _, _, err := statfsFree(filepath.Join(dir, "missing")); err == nil {
		t.Error("statfsFree of a missing path: no error")
	}
}
