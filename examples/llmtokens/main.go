// LLM tokens: each tenant has a budget of tokens a second for a language
// model. A job reserves its estimated tokens up front (Request.Reserve):
// if the budget is short, the reservation still succeeds, into debt, and
// RetryAfter says when the job may start; the worker schedules it then,
// plus jitter so that deferred jobs do not all start at once, instead of
// retrying in a loop. MaxReserved caps the debt: beyond it a job is
// refused outright. When a job has run, the tokens it did not use are
// given back (Credit), so the next job can start sooner.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

func main() {
	dir, err := os.MkdirTemp("", "llmtokens")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := ratelimit.Open(ratelimit.Options{
		// Durable: a restart does not hand every tenant a fresh budget.
		Path: filepath.Join(dir, "ratelimit.db"),
		Limits: map[string]ratelimit.Config{
			// 4,000 tokens a second per tenant, 4,000 at once; up to 8,000
			// reserved ahead. Not sharded: one tenant's budget is not a
			// hot limit, and a request may need the whole capacity.
			"llmTokens": {Kind: ratelimit.TokenBucket, Rate: 4000, Period: time.Second, MaxReserved: 8000},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Printf("%5dms  "+format+"\n", append([]any{time.Since(start).Milliseconds()}, args...)...)
	}

	jobs := []struct {
		tenant, name     string
		estimate, actual float64
	}{
		{"acme", "summarize-report", 2500, 1800},
		{"acme", "translate-docs", 2000, 2000},
		{"acme", "classify-tickets", 1500, 900},
		{"acme", "release-notes", 3000, 3000},
		{"acme", "embed-corpus", 6000, 6000},
		{"globex", "answer-question", 1200, 700},
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		st, err := l.Limit(ctx, ratelimit.Request{Name: "llmTokens", Key: j.tenant, Count: j.estimate, Reserve: true})
		if err != nil { // could not decide: fail closed, do not call the model
			log.Fatal(err)
		}
		if err := st.Err(); err != nil {
			logf("%-7s %-17s %5.0f tokens: refused, too much reserved ahead: %v", j.tenant, j.name, j.estimate, err)
			continue
		}
		wait := ratelimit.Jitter(st.RetryAfter, 50*time.Millisecond)
		if st.RetryAfter == 0 {
			wait = 0
		}
		logf("%-7s %-17s %5.0f tokens: reserved, starts in %v", j.tenant, j.name, j.estimate, wait.Round(time.Millisecond))
		wg.Add(1)
		time.AfterFunc(wait, func() {
			defer wg.Done()
			time.Sleep(20 * time.Millisecond) // the model call
			logf("%-7s %-17s ran, used %.0f tokens", j.tenant, j.name, j.actual)
			if unused := j.estimate - j.actual; unused > 0 {
				if err := l.Credit(ctx, "llmTokens", j.tenant, unused); err != nil {
					log.Print(err)
					return
				}
				logf("%-7s %-17s %.0f unused tokens given back", j.tenant, j.name, unused)
			}
		})
	}
	wg.Wait()
	for _, tenant := range []string{"acme", "globex"} {
		v, err := l.Value(ctx, "llmTokens", tenant)
		if err != nil {
			log.Fatal(err)
		}
		logf("%-7s budget now %.0f tokens", tenant, v.Value)
	}
}
