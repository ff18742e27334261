//go:build unix

package filetool

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The tools class every file alike: sound, damaged (each lists the
// problems), or one they cannot read at all (an error: exit code 2).
func TestToolsAgree(t *testing.T) {
	sound := writeFile(t)
	data, err := os.ReadFile(sound)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Inspect(io.Discard, sound, at)
	if err != nil {
		t.Fatal(err)
	}
	inUse := int(c.Pages) * c.PageSize // the file holds preallocated pages beyond
	dir := t.TempDir()
	file := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	meta := append([]byte(nil), data...)
	for i := 4096 + 16; i < 4096+64; i++ { // the second meta page's fields
		meta[i] ^= 0x5a
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const (
		ok = iota
		damaged
		unreadable
	)
	for _, c := range []struct {
		name string
		path string
		want int
	}{
		{"sound", sound, ok},
		{"a damaged meta page", file("meta.db", meta), damaged},
		{"cut short below its pages", file("cut.db", data[:inUse-c.PageSize]), damaged},
		{"another program's bytes", file("other.db", []byte("not a limiter's file")), unreadable},
		{"zero bytes", file("empty.db", nil), unreadable},
		{"a FIFO", fifo, unreadable},
		{"a directory", t.TempDir(), unreadable},
		{"absent", filepath.Join(dir, "absent.db"), unreadable},
	} {
		t.Run(c.name, func(t *testing.T) {
			verify := func() int {
				switch err := Verify(io.Discard, c.path); {
				case err == nil:
					return ok
				case errors.Is(err, ErrDamaged):
					return damaged
				default:
					return unreadable
				}
			}
			contents := func(read func() (int, error)) func() int {
				return func() int {
					n, err := read()
					switch {
					case err != nil:
						return unreadable
					case n > 0:
						return damaged
					default:
						return ok
					}
				}
			}
			inspect := contents(func() (int, error) {
				c, err := Inspect(io.Discard, c.path, at)
				if err != nil {
					return 0, err
				}
				return len(c.Problems), nil
			})
			dump := contents(func() (int, error) {
				c, err := Dump(io.Discard, c.path)
				if err != nil {
					return 0, err
				}
				return len(c.Problems), nil
			})
			for name, tool := range map[string]func() int{"verify": verify, "inspect": inspect, "dump": dump} {
				got := make(chan int, 1)
				go func() { got <- tool() }()
				select {
				case g := <-got:
					if g != c.want {
						t.Errorf("%s: class %d, want %d (0 sound, 1 damaged, 2 unreadable)", name, g, c.want)
					}
				case <-time.After(10 * time.Second): // a failure detector, not a wait: the tools never block
					t.Fatalf("%s: no answer after 10s", name)
				}
			}
		})
	}
}
