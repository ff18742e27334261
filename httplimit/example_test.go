package httplimit_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/httplimit"
)

// Two requests a minute per client address, and a third refused with
// 429 and the time to wait.
func ExampleMiddleware() {
	l, err := ratelimit.Open(ratelimit.Options{Limits: map[string]ratelimit.Config{
		"api": {Kind: ratelimit.TokenBucket, Rate: 2, Period: time.Minute},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	limit, err := httplimit.Middleware(l, httplimit.Options{Limits: []string{"api"}})
	if err != nil {
		log.Fatal(err)
	}
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))
	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "192.0.2.7:50000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Printf("%d policy %s retry-after %q\n", rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Header().Get("Retry-After"))
	}
	// Output:
	// 200 policy "api";q=2;w=60 retry-after ""
	// 200 policy "api";q=2;w=60 retry-after ""
	// 429 policy "api";q=2;w=60 retry-after "30"
}
