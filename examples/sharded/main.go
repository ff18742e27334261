// Sharded: one global limit hit from many goroutines at once. Shards: 8
// splits the limit's rate and capacity over 8 buckets in 4 pairs, each pair
// on its own partition, so concurrent requests rarely meet on one; each
// request draws a random pair and takes from the better of its two shards,
// both decided in one step. The bound
// still holds: with the clock frozen, no more than the capacity is ever
// granted.
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

func main() {
	frozen := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	l, err := ratelimit.Open(ratelimit.Options{
		Limits: map[string]ratelimit.Config{
			"globalSearch": {Kind: ratelimit.TokenBucket, Rate: 1000, Period: time.Second, Shards: 8},
		},
		Now: func() time.Time { return frozen }, // no refill during the run
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	const workers, perWorker = 16, 200 // 3200 requests for 1000 tokens
	var granted, denied atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range perWorker {
				st, err := l.Limit(context.Background(), ratelimit.Request{Name: "globalSearch"})
				switch {
				case err != nil:
					log.Fatal(err)
				case st.OK:
					granted.Add(1)
				default:
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	v, err := l.Value(context.Background(), "globalSearch", "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d goroutines x %d requests against a capacity of 1000 over 8 shards\n", workers, perWorker)
	fmt.Printf("granted <= 1000: %v; granted + tokens left = %.0f; denied %d\n",
		granted.Load() <= 1000, float64(granted.Load())+v.Value, denied.Load())
}
