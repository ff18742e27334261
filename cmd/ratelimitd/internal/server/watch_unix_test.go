//go:build unix

package server

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
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

// hashFile opens before it checks what it opened, without blocking, so a
// file replaced by a pipe after it was listed cannot hold the watcher:
// opening a pipe that has no writer returns at once.
func TestOpenNonBlockingOfAPipe(t *testing.T) {
	pipe := filepath.Join(t.TempDir(), "pipe.yaml")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := openNonBlocking(pipe)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	var b bytes.Buffer
	hashFile(&b, pipe)
	if !strings.HasPrefix(b.String(), "missing") {
		t.Errorf("a pipe hashed as %q, want it left out", b.String())
	}
}
