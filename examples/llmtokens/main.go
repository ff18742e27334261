// LLM tokens: a budget of 40,000 tokens a minute shared by a worker. Each
// job reserves its estimated tokens up front (Request.Reserve): if the
// budget is short the reservation still succeeds, into debt, and RetryAfter
// says when the job may run. The worker schedules it then, plus jitter so
// deferred jobs do not all start at once, instead of retrying in a loop.
// A job that used fewer tokens than estimated gives the rest back (Credit).
// MaxReserved caps the debt: beyond it, the job is refused outright.
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
			"llmTokens": {Kind: ratelimit.TokenBucket, Rate: 40000, Period: time.Minute, MaxReserved: 40000},
		},
		Now: func() time.Time { return now },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()

	const spread = 2 * time.Second
	jobs := []struct {
		name             string
		estimate, actual float64
	}{
		{"summarize-report", 25000, 18000},
		{"translate-docs", 20000, 20000},
		{"classify-tickets", 15000, 9000},
		{"write-release-notes", 30000, 30000},
		{"embed-corpus", 30000, 30000},
	}
	for _, j := range jobs {
		st, err := l.Limit(ctx, ratelimit.Request{Name: "llmTokens", Count: j.estimate, Reserve: true})
		if err != nil { // could not decide: fail closed
			log.Fatal(err)
		}
		if err := st.Err(); err != nil {
			fmt.Printf("%-20s %6.0f tokens: refused, the queue is full: %v\n", j.name, j.estimate, err)
			continue
		}
		if st.RetryAfter == 0 {
			fmt.Printf("%-20s %6.0f tokens: run now\n", j.name, j.estimate)
		} else {
			at := ratelimit.Jitter(st.RetryAfter, spread)
			if at < st.RetryAfter || at >= st.RetryAfter+spread {
				log.Fatalf("jitter %v out of range", at)
			}
			fmt.Printf("%-20s %6.0f tokens: reserved, run in %v plus up to %v of jitter\n", j.name, j.estimate, st.RetryAfter, spread)
		}
		// The job ran (now or later) and reports what it really used.
		if unused := j.estimate - j.actual; unused > 0 {
			if err := l.Credit(ctx, "llmTokens", "", unused); err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%-20s used %.0f: %.0f tokens credited back\n", "", j.actual, unused)
		}
	}
	v, err := l.Value(ctx, "llmTokens", "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("budget now: %.0f tokens (negative: reserved ahead)\n", v.Value)
}
