//go:build unix

package filestate

import (
	"os"
	"syscall"
)

// openRead opens path for reading without waiting for a writer should it
// be a FIFO: Open then refuses it.
func openRead(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
