package actor

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

var benchLim = &bucket.Limit{Kind: bucket.TokenBucket, Rate: 1e9, Period: 1e9, Capacity: 1e9}

func benchCall(g *Group, key string) *Call {
	c := NewCall()
	c.Atomic = true
	h := bucket.Hash("user", key)
	i := c.AddItem(Item{ID: BucketID{Name: "user", Key: key}, Hash: bucket.ShardHash(bucket.TableHash(bucket.NameHash("user"), key), 0), Lim: benchLim, Part: g.Route(h, 0)}, 0, false)
	c.Members = append(c.Members, Member{Op: OpTake, Count: 1, First: i, Second: -1})
	return c
}

// BenchmarkRoundTrip is one single-bucket decision, serial and from many
// goroutines: path=inline is the default (a caller that finds the
// partition idle decides on its own goroutine; otherwise it queues);
// path=queued always queues: the partition's goroutine decides and wakes
// the caller, a real round trip.
func BenchmarkRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		path string
		par  int
	}{{"inline", 0}, {"inline", 64}, {"queued", 0}, {"queued", 64}} {
		b.Run("path="+bc.path+"/parallelism="+strconv.Itoa(bc.par), func(b *testing.B) {
			par := bc.par
			g := NewGroup(2, NopLog{}, func() int64 { return 1e18 })
			if bc.path == "queued" {
				g.QueueOnly()
			}
			g.Start()
			b.Cleanup(g.Stop)
			ctx := context.Background()
			keys := make([]string, 1024)
			for i := range keys {
				keys[i] = "k" + strconv.Itoa(i)
			}
			var seq atomic.Int64
			b.ReportAllocs()
			body := func(i int) {
				c := benchCall(g, keys[i%len(keys)])
				if _, err := g.Decide(ctx, c); err != nil || !c.Members[0].OK {
					b.Fatal(err)
				}
				c.Release()
			}
			if par == 0 {
				for i := 0; i < b.N; i++ {
					body(i)
				}
				return
			}
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				i := int(seq.Add(1)) * 131
				for pb.Next() {
					i++
					body(i)
				}
			})
		})
	}
}

// benchTable is a table of n buckets of limit "user", with their ids and
// table hashes.
func benchTable(n int) (t table, ids []BucketID, hs []uint64) {
	t = newTable()
	ids, hs = make([]BucketID, n), make([]uint64, n)
	for i := range ids {
		ids[i] = BucketID{Name: "user", Key: "user-" + strconv.Itoa(i)}
		hs[i] = bucket.ShardHash(bucket.TableHash(bucket.NameHash("user"), ids[i].Key), 0)
		t.put(hs[i], entry{id: ids[i], lim: benchLim})
	}
	return t, ids, hs
}

// BenchmarkTableGet is a partition's bucket lookup.
func BenchmarkTableGet(b *testing.B) {
	const n = 1 << 15
	t, ids, hs := benchTable(n)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := (i * 7919) % n
		if _, ok := t.get(hs[j], ids[j]); !ok {
			b.Fatal("missing")
		}
	}
}

// BenchmarkTableBatch looks up batches of 64 random buckets among a
// million, as a partition does for a batch of requests, with and without
// touching them all first (as Partition.touchAhead does). ns/op is per lookup.
func BenchmarkTableBatch(b *testing.B) {
	const n = 1 << 20
	t, ids, hs := benchTable(n)
	// The batches are drawn up front, so that only the table's misses are
	// timed (a partition has the batch's items at hand).
	const batches = 1 << 14
	type req struct {
		h  uint64
		id BucketID
	}
	reqs := make([][64]req, batches)
	for i, j := 0, 0; i < batches; i++ {
		for k := range reqs[i] {
			j = (j + 7919*k + 104729) % n
			reqs[i][k] = req{hs[j], ids[j]}
		}
	}
	// The same lookups in a Go map, as the partitions used before.
	b.Run("gomap", func(b *testing.B) {
		m := make(map[uint64]entry)
		for i := range hs {
			m[hs[i]] = entry{id: ids[i], lim: benchLim}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += 64 {
			batch := &reqs[(i/64)%batches]
			for k := range batch {
				if e, ok := m[batch[k].h]; !ok || e.id != batch[k].id {
					b.Fatal("missing")
				}
			}
		}
	})
	for _, touch := range []bool{false, true} {
		b.Run("prefetch="+strconv.FormatBool(touch), func(b *testing.B) {
			var sink uint64
			b.ReportAllocs()
			for i := 0; i < b.N; i += 64 {
				batch := &reqs[(i/64)%batches]
				if touch {
					for k := range batch {
						sink += t.touch(batch[k].h)
					}
				}
				for k := range batch {
					if _, ok := t.get(batch[k].h, batch[k].id); !ok {
						b.Fatal("missing")
					}
				}
			}
			_ = sink
		})
	}
}
