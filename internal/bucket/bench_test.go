package bucket

import "testing"

func BenchmarkTake(b *testing.B) {
	l := &Limit{Kind: TokenBucket, Rate: 1e9, Period: S, Capacity: 1e9}
	s := l.Fresh(t0, 0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d := l.Take(s, t0+int64(i), 1, false)
		s = d.Next
	}
}

func BenchmarkTakeDenied(b *testing.B) {
	l := &Limit{Kind: TokenBucket, Rate: 7, Period: 3 * S, Capacity: 7}
	s := l.Take(l.Fresh(t0, 0), t0, 7, false).Next
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if l.Take(s, t0, 5, false).OK {
			b.Fatal("granted")
		}
	}
}

func BenchmarkTakeFixedWindow(b *testing.B) {
	l := &Limit{Kind: FixedWindow, Rate: 1e9, Period: S, Capacity: 1e9}
	s := l.Fresh(t0, 0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s = l.Take(s, t0+int64(i), 1, false).Next
	}
}

func BenchmarkTakeTwo(b *testing.B) {
	l := &Limit{Kind: TokenBucket, Rate: 1e9, Period: S, Capacity: 1e9}
	a, c := l.Fresh(t0, 0), l.Fresh(t0, 0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p := l.TakeTwo(a, c, t0+int64(i), 1, false)
		a, c = p.A, p.B
	}
}

func BenchmarkHash(b *testing.B) {
	b.ReportAllocs()
	nh := NameHash("user")
	for i := 0; i < b.N; i++ {
		_ = HashWith(nh, "user:000000000000042")
	}
}
