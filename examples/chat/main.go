// Chat: per-user message limits with burst capacity. Each user may send 10
// messages a minute on average, and up to 3 at once; one user's flood does
// not touch another's budget.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

func main() {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	l, err := ratelimit.Open(ratelimit.Options{
		Limits: map[string]ratelimit.Config{
			"sendMessage": {Kind: ratelimit.TokenBucket, Rate: 10, Period: time.Minute, Capacity: 3},
		},
		Now: func() time.Time { return now },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	send := func(user, text string) {
		st, err := l.Limit(context.Background(), ratelimit.Request{Name: "sendMessage", Key: user})
		if err != nil {
			log.Fatal(err)
		}
		if err := st.Err(); err != nil { // a denial as an error: errors.Is(err, ratelimit.ErrRateLimited)
			fmt.Printf("+%-4v %-5s %-12q refused: %v\n", now.Sub(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)), user, text, err)
			return
		}
		fmt.Printf("+%-4v %-5s %-12q sent (%.0f left in the burst)\n", now.Sub(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)), user, text, st.Remaining)
	}
	for i := 1; i <= 5; i++ {
		send("alice", fmt.Sprintf("spam %d", i))
	}
	send("bob", "hi all")
	now = now.Add(6 * time.Second) // one message's worth
	send("alice", "sorry")
	send("alice", "really")
}
