//go:build unix

package server

import (
	"os"
	"syscall"
)

// openNonBlocking opens name for reading without waiting for a writer,
// should it be a pipe.
func openNonBlocking(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
