//go:build unix

package server

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// What config.Load skips, a pipe or a link to a device, the fingerprint
// skips too, without opening it (a pipe would block it, /dev/zero never
// end).
func TestFingerprintSkipsWhatLoadSkips(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "domain: a\n")
	fp := fingerprintOf(dir, TLSFiles{})
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
		t.Fatal(err)
	}
	if fingerprintOf(dir, TLSFiles{}) != fp {
		t.Error("a pipe and a device beside the files changed the fingerprint")
	}
}
