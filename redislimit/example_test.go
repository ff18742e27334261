package redislimit_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/redislimit"
)

// Every process that opens a limiter on the same Redis, with the same
// limits and key prefix, shares its buckets. The server must persist
// every write before replying (appendonly yes, appendfsync always) and
// must not evict keys, or Open refuses it (see the Allow options). This
// example needs a server, so it is compiled, not run.
func ExampleOpen() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	l, err := redislimit.Open(client, ratelimit.Options{Limits: map[string]ratelimit.Config{
		"signup": {Kind: ratelimit.TokenBucket, Rate: 3, Period: time.Hour},
	}}, redislimit.KeyPrefix("myapp:rl:"))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	st, err := l.Limit(context.Background(), ratelimit.Request{Name: "signup", Key: "203.0.113.9"})
	if err != nil {
		log.Fatal(err) // ratelimit.ErrUnavailable: Redis did not confirm, so nothing was granted
	}
	if !st.OK {
		fmt.Println("too many sign-ups; retry after", st.RetryAfter)
	}
}
