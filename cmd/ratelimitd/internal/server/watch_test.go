package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The fingerprint changes with anything config.Load would read
// differently, and only then.
func TestFingerprint(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	writeFile(t, a, "domain: a\n")
	fp := fingerprintOf(dir, TLSFiles{})
	if fingerprintOf(dir, TLSFiles{}) != fp {
		t.Fatal("fingerprint of unchanged files changed")
	}
	steps := []struct {
		name   string
		change func()
		same   bool
	}{
		{"hidden file added", func() { writeFile(t, filepath.Join(dir, ".swp"), "x") }, true},
		{"file added", func() { writeFile(t, filepath.Join(dir, "b.yaml"), "domain: b\n") }, false},
		{"same size, same time, other bytes", func() {
			info, _ := os.Stat(a)
			writeFile(t, a, "domain: z\n")
			os.Chtimes(a, info.ModTime(), info.ModTime())
		}, false},
		{"touched", func() { os.Chtimes(a, time.Now().Add(time.Hour), time.Now().Add(time.Hour)) }, false},
		{"subdirectory file", func() {
			os.Mkdir(filepath.Join(dir, "sub"), 0o755)
			writeFile(t, filepath.Join(dir, "sub", "c.yaml"), "domain: c\n")
		}, false},
		{"file removed", func() { os.Remove(filepath.Join(dir, "b.yaml")) }, false},
		{"symlink to a directory", func() { os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "link")) }, false},
	}
	for _, s := range steps {
		s.change()
		next := fingerprintOf(dir, TLSFiles{})
		if (next == fp) != s.same {
			t.Errorf("%s: fingerprint unchanged %v, want %v", s.name, next == fp, s.same)
		}
		fp = next
	}
	if fingerprintOf(filepath.Join(dir, "absent"), TLSFiles{}) == fingerprintOf(filepath.Join(dir, "absent2"), TLSFiles{}) {
		t.Error("two missing paths share a fingerprint")
	}
}
