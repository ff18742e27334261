package main

import (
	"bytes"
	"testing"
)

// Off a terminal, progress writes nothing and notes are plain lines.
func TestProgressOffATerminal(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b)
	p.update("[%d/%d] keys", 1, 2)
	p.clear()
	p.note("bench: FAIL %s", "x")
	if got := b.String(); got != "bench: FAIL x\n" {
		t.Errorf("wrote %q", got)
	}
}

// On a terminal, the progress line is rewritten in place, a shorter line
// blanks what the longer one left, and a note first clears the line.
func TestProgressOnATerminal(t *testing.T) {
	var b bytes.Buffer
	p := &progress{w: &b, tty: true}
	p.update("long line")
	p.update("short")
	p.note("done")
	want := "\rlong line" + "\rshort    \rshort" + "\r     \r" + "done\n"
	if got := b.String(); got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
}
