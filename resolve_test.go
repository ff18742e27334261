package ratelimit

import "testing"

func TestTwoShards(t *testing.T) {
	for _, c := range []struct{ n, parts int }{{16, 2}, {16, 3}, {4, 8}, {2, 2}, {2, 1}, {5, 4}, {3, 2}} {
		seen := map[[2]int]bool{}
		first := make([]int, c.n)
		for k := 0; k < 20000; k++ {
			i, j := twoShards(c.n, c.parts)
			if i == j || i < 0 || j < 0 || i >= c.n || j >= c.n {
				t.Fatalf("n=%d parts=%d: drew %d, %d", c.n, c.parts, i, j)
			}
			mates := 0
			for s := i % c.parts; s < c.n; s += c.parts {
				mates++
			}
			if mates >= 2 && i%c.parts != j%c.parts {
				t.Fatalf("n=%d parts=%d: %d and %d on different partitions though %d has mates", c.n, c.parts, i, j, i)
			}
			seen[[2]int{i, j}] = true
			first[i]++
		}
		for s, f := range first {
			if f < 20000/c.n/2 {
				t.Fatalf("n=%d parts=%d: shard %d drawn first only %d times", c.n, c.parts, s, f)
			}
		}
	}
}
