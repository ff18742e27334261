//go:build unix

package config

import (
	"syscall"
	"testing"
)

// makeFIFO makes a named pipe at path, which reading would block on.
func makeFIFO(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}
