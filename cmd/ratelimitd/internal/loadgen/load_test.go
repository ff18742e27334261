package loadgen

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i))
	}
	cases := []struct {
		q    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0, 1}}
	for _, c := range cases {
		if got := percentile(s, c.q); got != c.want {
			t.Errorf("percentile(1..100, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing")
	}
}

func TestSummarize(t *testing.T) {
	runs := []Result{{Callers: 16, PerSecond: 300, P50: 3, P99: 30}, {Callers: 16, PerSecond: 100, P50: 1, P99: 90}, {Callers: 16, PerSecond: 200, P50: 2, P99: 10}}
	s := Summarize(runs)
	if s.Callers != 16 || s.PerSecond != 200 || s.P50 != 2 || s.P99 != 30 {
		t.Errorf("%+v", s)
	}
}
