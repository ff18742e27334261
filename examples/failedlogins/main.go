// Failed logins: check before verifying a password, take a token only when
// the password is wrong, and reset the user's bucket on success. So a user
// who types their password right never uses the budget, and an attacker
// gets a few guesses per hour.
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
			// 10 failures per hour, at most 3 in a burst.
			"failedLogins": {Kind: ratelimit.TokenBucket, Rate: 10, Period: time.Hour, Capacity: 3},
		},
		Now: func() time.Time { return now }, // a scripted clock, so the output is the same every run
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()

	login := func(user, password string) {
		req := ratelimit.Request{Name: "failedLogins", Key: user}
		st, err := l.Check(ctx, req) // writes nothing
		if err != nil {
			log.Fatal(err)
		}
		if !st.OK {
			fmt.Printf("%s  %-7s %-8s -> locked out, try again in %v\n", now.Format("15:04"), user, password, st.RetryAfter)
			return
		}
		if password != "hunter2" {
			if _, err := l.Limit(ctx, req); err != nil { // a failure costs a token
				log.Fatal(err)
			}
			fmt.Printf("%s  %-7s %-8s -> wrong password\n", now.Format("15:04"), user, password)
			return
		}
		if err := l.Reset(ctx, "failedLogins", user); err != nil { // success forgives
			log.Fatal(err)
		}
		fmt.Printf("%s  %-7s %-8s -> welcome (failure budget reset)\n", now.Format("15:04"), user, password)
	}

	login("alice", "hunter1")
	login("alice", "hunter2")
	for _, pw := range []string{"123456", "qwerty", "letmein", "hunter2"} {
		login("mallory", pw)
	}
	now = now.Add(6 * time.Minute) // one failure's worth refills (10 per hour)
	login("mallory", "password")
	login("mallory", "hunter2")
	now = now.Add(6 * time.Minute)
	login("mallory", "hunter2")
}
