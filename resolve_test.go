package ratelimit

import (
	"testing"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// twoShards draws a uniformly random shard and its pair mate, which lives on
// the same partition; the last shard of an odd count has no mate and is
// drawn with every other shard in turn.
func TestTwoShards(t *testing.T) {
	g := actor.NewGroup(16, actor.NopLog{}, func() int64 { return 0 })
	const draws = 20000
	for _, n := range []int{2, 3, 4, 5, 16, 17, 64} {
		first := make([]int, n)
		lonePartners := map[int]bool{}
		for k := 0; k < draws; k++ {
			i, j := twoShards(n)
			if i == j || i < 0 || j < 0 || i >= n || j >= n {
				t.Fatalf("n=%d: drew %d, %d", n, i, j)
			}
			first[i]++
			if i^1 >= n {
				lonePartners[j] = true
				continue
			}
			if j != i^1 {
				t.Fatalf("n=%d: drew %d with %d, not with its mate %d", n, i, j, i^1)
			}
			for h := range uint64(32) {
				if pi, pj := g.Route(h, uint32(i)), g.Route(h, uint32(j)); pi != pj {
					t.Fatalf("n=%d hash %d: mates %d and %d on partitions %d and %d", n, h, i, j, pi, pj)
				}
			}
		}
		for s, f := range first {
			if f < draws/n/2 {
				t.Fatalf("n=%d: shard %d drawn first only %d times of %d", n, s, f, draws)
			}
		}
		if n%2 == 1 && len(lonePartners) != n-1 {
			t.Fatalf("n=%d: the lone shard %d was drawn with %d shards, want all %d others", n, n-1, len(lonePartners), n-1)
		}
	}
}
