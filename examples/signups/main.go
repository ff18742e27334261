// Sign-ups: a global free-trial window, durable. At most 3 free trials per
// hour for the whole service (the empty key is the limit's one shared
// bucket); the count survives a restart because every grant is in the
// write-ahead log before it is acknowledged.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

func main() {
	dir, err := os.MkdirTemp("", "signups")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	now := start.Add(20 * time.Minute)
	opts := ratelimit.Options{
		Path: filepath.Join(dir, "ratelimit.db"),
		Limits: map[string]ratelimit.Config{
			// Windows begin on the hour (Start), 3 sign-ups each.
			"freeTrialSignUp": {Kind: ratelimit.FixedWindow, Rate: 3, Period: time.Hour, Start: start},
		},
		Now: func() time.Time { return now },
	}
	l, err := ratelimit.Open(opts)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	signUp := func(email string) {
		st, err := l.Limit(ctx, ratelimit.Request{Name: "freeTrialSignUp"})
		if err != nil {
			log.Fatal(err)
		}
		if st.OK {
			fmt.Printf("%s  %-18s free trial started (%v left this hour)\n", now.Format("15:04"), email, st.Remaining)
		} else {
			fmt.Printf("%s  %-18s no free trials left, next window in %v\n", now.Format("15:04"), email, st.RetryAfter)
		}
	}
	signUp("ann@example.com")
	signUp("bob@example.com")

	fmt.Println("-- restart: close and reopen the file --")
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}
	if l, err = ratelimit.Open(opts); err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	signUp("cat@example.com")
	signUp("dan@example.com") // the window's 4th: denied, restart or not
	now = start.Add(time.Hour)
	signUp("dan@example.com")
}
