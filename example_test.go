package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// Open a limiter with named limits and take tokens per key.
func Example() {
	clk := ratelimittest.NewClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)) // a clock the example moves by hand; real code leaves Now nil
	l, err := ratelimit.Open(ratelimit.Options{
		// Path: "ratelimit.db" makes every grant durable; "" is memory only.
		Limits: map[string]ratelimit.Config{
			"sendMessage": {Kind: ratelimit.TokenBucket, Rate: 10, Period: time.Minute, Capacity: 3},
		},
		Now: clk.Now,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	for i := 0; i < 4; i++ {
		st, err := l.Limit(context.Background(), ratelimit.Request{Name: "sendMessage", Key: "alice"})
		switch {
		case err != nil: // could not decide: fail closed
			log.Fatal(err)
		case !st.OK:
			fmt.Printf("message %d: denied, retry after %v\n", i+1, st.RetryAfter)
		default:
			fmt.Printf("message %d: sent, %v left\n", i+1, st.Remaining)
		}
	}
	// Output:
	// message 1: sent, 2 left
	// message 2: sent, 1 left
	// message 3: sent, 0 left
	// message 4: denied, retry after 6s
}

// Check answers as Limit would but takes nothing: ask first, take only
// when the thing being limited happens (here, a failed login).
func ExampleLimiter_Check() {
	clk := ratelimittest.NewClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	l, err := ratelimit.Open(ratelimit.Options{
		Limits: map[string]ratelimit.Config{
			"failedLogins": {Kind: ratelimit.TokenBucket, Rate: 10, Period: time.Hour, Capacity: 2},
		},
		Now: clk.Now,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	req := ratelimit.Request{Name: "failedLogins", Key: "bob"}

	for _, password := range []string{"wrong", "wronger", "right"} {
		if st, _ := l.Check(ctx, req); !st.OK {
			fmt.Printf("%s: locked out for %v\n", password, st.RetryAfter)
			continue
		}
		fmt.Printf("%s: checked\n", password)
		l.Limit(ctx, req) // the password was wrong: that costs a token
	}
	// Output:
	// wrong: checked
	// wronger: checked
	// right: locked out for 6m0s
}

// LimitAll takes from several limits at once, all or none: here a
// per-user and a global limit. A denial names the limit that denied.
func ExampleLimiter_LimitAll() {
	clk := ratelimittest.NewClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	l, err := ratelimit.Open(ratelimit.Options{
		Limits: map[string]ratelimit.Config{
			"perUser": {Kind: ratelimit.TokenBucket, Rate: 100, Period: time.Minute},
			"global":  {Kind: ratelimit.FixedWindow, Rate: 2, Period: time.Hour, Start: clk.Now()},
		},
		Now: clk.Now,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()

	for _, user := range []string{"ann", "bob", "cat"} {
		st, err := l.LimitAll(ctx,
			ratelimit.Request{Name: "perUser", Key: user},
			ratelimit.Request{Name: "global"}) // "" is the limit's one shared bucket
		if err != nil {
			log.Fatal(err)
		}
		if !st.OK {
			fmt.Printf("%s: denied by %s, retry after %v\n", user, st.Limit, st.RetryAfter)
			continue
		}
		fmt.Printf("%s: ok\n", user)
	}
	v, _ := l.Value(ctx, "perUser", "cat")
	fmt.Println("cat's perUser tokens:", v.Value) // the denial took nothing
	// Output:
	// ann: ok
	// bob: ok
	// cat: denied by global, retry after 1h0m0s
	// cat's perUser tokens: 100
}

// A reservation is granted even when tokens are short, leaving debt;
// RetryAfter is when to run the work. MaxReserved bounds the debt.
func ExampleRequest_reserve() {
	clk := ratelimittest.NewClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	l, err := ratelimit.Open(ratelimit.Options{
		Limits: map[string]ratelimit.Config{
			"jobs": {Kind: ratelimit.TokenBucket, Rate: 10, Period: time.Minute, MaxReserved: 10},
		},
		Now: clk.Now,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()

	for _, n := range []float64{5, 10, 5, 5} {
		st, err := l.Limit(ctx, ratelimit.Request{Name: "jobs", Count: n, Reserve: true})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("reserve %v: ok=%v run in %v, %v left\n", n, st.OK, st.RetryAfter, st.Remaining)
	}
	// Output:
	// reserve 5: ok=true run in 0s, 5 left
	// reserve 10: ok=true run in 30s, -5 left
	// reserve 5: ok=true run in 1m0s, -10 left
	// reserve 5: ok=false run in 30s, -10 left
}

// Tell a request that no wait will ever grant (it asks for more than the
// limit holds) from one that must wait, before sending it.
func ExampleLimiter_Grantable() {
	l, err := ratelimit.Open(ratelimit.Options{Limits: map[string]ratelimit.Config{
		"upload": {Kind: ratelimit.TokenBucket, Rate: 100, Period: time.Minute, MaxReserved: 50},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	for _, r := range []ratelimit.Request{
		{Name: "upload", Key: "bob", Count: 120},
		{Name: "upload", Key: "bob", Count: 120, Reserve: true},
		{Name: "upload", Key: "bob", Count: 200, Reserve: true},
	} {
		ok, err := l.Grantable(r)
		fmt.Printf("count %v, reserve %v: %v %v\n", r.Count, r.Reserve, ok, err)
	}
	// Output:
	// count 120, reserve false: false <nil>
	// count 120, reserve true: true <nil>
	// count 200, reserve true: false <nil>
}

// Reset deletes a key's bucket (it is full again); Value reads it without
// taking anything.
func ExampleLimiter_Reset() {
	clk := ratelimittest.NewClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	l, err := ratelimit.Open(ratelimit.Options{
		Limits: map[string]ratelimit.Config{
			"api": {Kind: ratelimit.TokenBucket, Rate: 10, Period: time.Minute},
		},
		Now: clk.Now,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()

	l.Limit(ctx, ratelimit.Request{Name: "api", Key: "k", Count: 8})
	v, _ := l.Value(ctx, "api", "k")
	fmt.Println("after taking 8:", v.Value)
	clk.Advance(30 * time.Second)
	v, _ = l.Value(ctx, "api", "k")
	fmt.Println("30 s later:", v.Value)
	l.Reset(ctx, "api", "k")
	v, _ = l.Value(ctx, "api", "k")
	fmt.Println("after Reset:", v.Value, "of capacity", v.Config.Capacity)
	// Output:
	// after taking 8: 2
	// 30 s later: 7
	// after Reset: 10 of capacity 10
}

// Err turns a denial into an error, for code that prefers to return one:
// match it with errors.Is(err, ErrRateLimited), read it with errors.As.
func ExampleStatus_Err() {
	clk := ratelimittest.NewClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	l, err := ratelimit.Open(ratelimit.Options{
		Limits: map[string]ratelimit.Config{
			"export": {Kind: ratelimit.FixedWindow, Rate: 1, Period: time.Hour, Start: clk.Now()},
		},
		Now: clk.Now,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	export := func() error {
		st, err := l.Limit(context.Background(), ratelimit.Request{Name: "export", Key: "acme"})
		if err != nil {
			return err
		}
		return st.Err()
	}
	fmt.Println("first:", export())
	err = export()
	var rl *ratelimit.RateLimitedError
	if errors.Is(err, ratelimit.ErrRateLimited) && errors.As(err, &rl) {
		fmt.Printf("second: %s, retry after %v\n", rl.Limit, rl.RetryAfter)
	}
	// Output:
	// first: <nil>
	// second: export, retry after 1h0m0s
}

// LimitMany hands many independent requests to the limiter at once, as a
// game server does every tick; reuse the output slice.
func ExampleLimiter_LimitMany() {
	clk := ratelimittest.NewClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	l, err := ratelimit.Open(ratelimit.Options{
		Limits: map[string]ratelimit.Config{
			"fire": {Kind: ratelimit.TokenBucket, Rate: 5, Period: time.Second, Capacity: 2},
		},
		Now: clk.Now,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	reqs := []ratelimit.Request{
		{Name: "fire", Key: "ann"}, {Name: "fire", Key: "ann"}, {Name: "fire", Key: "ann"},
		{Name: "fire", Key: "bob"},
		{Name: "nope", Key: "cat"},
	}
	var out []ratelimit.Decision
	out = l.LimitMany(context.Background(), reqs, out)
	for i, d := range out {
		fmt.Printf("%s %s: ok=%v err=%v\n", reqs[i].Name, reqs[i].Key, d.OK, d.Err)
	}
	// Output:
	// fire ann: ok=true err=<nil>
	// fire ann: ok=true err=<nil>
	// fire ann: ok=false err=<nil>
	// fire bob: ok=true err=<nil>
	// nope cat: ok=false err=ratelimit: unknown limit: "nope"
}

// Credit gives tokens back, capped at capacity: an LLM call that used
// fewer tokens than it reserved returns the rest.
func ExampleLimiter_Credit() {
	clk := ratelimittest.NewClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	l, err := ratelimit.Open(ratelimit.Options{
		Limits: map[string]ratelimit.Config{
			"llmTokens": {Kind: ratelimit.TokenBucket, Rate: 1000, Period: time.Minute},
		},
		Now: clk.Now,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()

	st, _ := l.Limit(ctx, ratelimit.Request{Name: "llmTokens", Key: "team-a", Count: 800}) // the estimate
	fmt.Println("after the estimate:", st.Remaining)
	l.Credit(ctx, "llmTokens", "team-a", 800-350) // the call used 350
	v, _ := l.Value(ctx, "llmTokens", "team-a")
	fmt.Println("after the credit:", v.Value)
	l.Credit(ctx, "llmTokens", "team-a", 5000)
	v, _ = l.Value(ctx, "llmTokens", "team-a")
	fmt.Println("credit is capped at capacity:", v.Value)
	// Output:
	// after the estimate: 200
	// after the credit: 650
	// credit is capped at capacity: 1000
}

// Jitter spreads the retries of callers a limit turned away, so they do
// not all come back at the same instant.
func ExampleJitter() {
	retryAfter := 30 * time.Second
	d := ratelimit.Jitter(retryAfter, 5*time.Second)
	fmt.Println(d >= 30*time.Second && d < 35*time.Second)
	// Output: true
}
