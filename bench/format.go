package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// fmtX formats a ratio: "217x", "2.49x", "0.0031x"; "-" for none.
func fmtX(x float64) string {
	switch {
	case x == 0 || math.IsInf(x, 0) || math.IsNaN(x):
		return "-"
	case x >= 100:
		return fmt.Sprintf("%.0fx", x)
	case x >= 10:
		return fmt.Sprintf("%.1fx", x)
	case x >= 0.1:
		return fmt.Sprintf("%.2fx", x)
	}
	return fmt.Sprintf("%.2gx", x) // two significant digits
}

// fmtRate formats a rate: "3.19M", "922.0k", "417".
func fmtRate(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}

// fmtDur formats nanoseconds: "181ns", "2.1us", "2.79ms"; "-" for 0.
func fmtDur(ns float64) string {
	d := time.Duration(ns)
	switch {
	case ns == 0:
		return "-"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fus", ns/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", ns/1e6)
	}
	return fmt.Sprintf("%.2fs", ns/1e9)
}

// fmtPct formats a fraction as a whole percentage; "-" for 0.
func fmtPct(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

// fmtCount formats an integer with thousands separators: "1,000,000".
func fmtCount(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// trimWriter drops trailing blanks from every line it is given, written
// out by flush (tabwriter pads the last column).
type trimWriter struct {
	w   io.Writer
	buf []byte
}

func (t *trimWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	return len(p), nil
}

func (t *trimWriter) flush() {
	lines := strings.Split(string(t.buf), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	io.WriteString(t.w, strings.Join(lines, "\n"))
	t.buf = t.buf[:0]
}
