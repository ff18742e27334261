package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// progress reports how far a run is, on stderr and never in the results:
// on a terminal as one line rewritten in place, otherwise not at all
// (notes and failures are plain lines in both cases).
type progress struct {
	w     io.Writer
	tty   bool
	shown int // length of the line now on the terminal
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tty: isTerminal(w)}
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// update replaces the progress line with the formatted text (terminal
// only).
func (p *progress) update(format string, args ...any) {
	if !p.tty {
		return
	}
	s := fmt.Sprintf(format, args...)
	pad := max(p.shown-len(s), 0)
	fmt.Fprintf(p.w, "\r%s%s", s, strings.Repeat(" ", pad))
	if pad > 0 {
		fmt.Fprintf(p.w, "\r%s", s)
	}
	p.shown = len(s)
}

// clear removes the progress line.
func (p *progress) clear() {
	if p.tty && p.shown > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.shown))
		p.shown = 0
	}
}

// note writes a line of its own, below no progress line.
func (p *progress) note(format string, args ...any) {
	p.clear()
	fmt.Fprintf(p.w, format+"\n", args...)
}
