package cputime

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		stat string
		want time.Duration
	}{
		{"4242 (rate limit) d) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 100 1000 10 18446744073709551615\n", 3250 * time.Millisecond},
		{"garbage", 0},
		{"1 (x) S 1 2 3", 0},
		{"1 (x) S 1 1 1 0 -1 0 0 0 0 0 oops 75 0", 0},
	} {
		if got := parseStat(c.stat); got != c.want {
			t.Errorf("parseStat(%q) = %v, want %v", c.stat, got, c.want)
		}
	}
}

func TestOf(t *testing.T) {
	if got := Of(0); got != 0 {
		t.Errorf("Of(0) = %v, want 0", got)
	}
	if runtime.GOOS != "linux" {
		t.Skip("Of reads /proc, which only Linux has")
	}
	burn(t)
	if got := Of(os.Getpid()); got <= 0 {
		t.Errorf("Of(self) = %v after a busy loop, want positive", got)
	}
}
