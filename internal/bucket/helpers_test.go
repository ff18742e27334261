package bucket

// Helpers shared by the package's tests: nanosecond units, the start
// instant, and scripted steps.

import "testing"

const (
	S = int64(1e9)
	M = 60 * S
	H = 60 * M
)

var t0 = int64(1_700_000_000) * S

type step struct {
	at       int64
	count    float64
	reserve  bool
	ok       bool
	value    float64 // expected stored value after the step
	retry    int64
	checkVal bool
}

func run(t *testing.T, l *Limit, s State, steps []step) {
	t.Helper()
	for i, st := range steps {
		d := l.Take(s, st.at, st.count, st.reserve)
		if d.OK != st.ok {
			t.Fatalf("step %d: ok = %v, want %v", i, d.OK, st.ok)
		}
		if d.RetryAfter != st.retry {
			t.Fatalf("step %d: retryAfter = %d, want %d", i, d.RetryAfter, st.retry)
		}
		if d.OK {
			s = d.Next
		} else if d.Next != s {
			t.Fatalf("step %d: denial changed state %v -> %v", i, s, d.Next)
		}
		if got := l.Project(s, st.at).Value; got != st.value {
			t.Fatalf("step %d: value = %v, want %v", i, got, st.value)
		}
	}
}
