// HTTP server: httplimit.Middleware in front of a handler, on a real
// server at 127.0.0.1:0, with a durable limiter: each client IP may send
// 60 requests a minute (3 at once), and all clients together 1,000 a
// second. Behind the middleware, the /generate handler also spends a
// per-client budget of model tokens it decides itself, and denies with the
// middleware's own 429 (httplimit.WriteDenied). The program calls itself a
// few times with a client, prints each answer, and shuts down.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/httplimit"
)

func main() {
	dir, err := os.MkdirTemp("", "httpserver")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := ratelimit.Open(ratelimit.Options{
		Path: filepath.Join(dir, "ratelimit.db"), // grants survive a restart
		Limits: map[string]ratelimit.Config{
			"perIP":     {Kind: ratelimit.TokenBucket, Rate: 60, Period: time.Minute, Capacity: 3},
			"global":    {Kind: ratelimit.TokenBucket, Rate: 1000, Period: time.Second},
			"genTokens": {Kind: ratelimit.TokenBucket, Rate: 2000, Period: time.Minute},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	limit, err := httplimit.Middleware(l, httplimit.Options{
		Limits:       []string{"perIP"},  // under the client's key
		GlobalLimits: []string{"global"}, // one bucket shared by every client
		// Key defaults to httplimit.ClientIP(): RemoteAddr. Behind a proxy:
		// httplimit.ClientIP(netip.MustParsePrefix("10.0.0.0/8")).
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /generate", func(w http.ResponseWriter, r *http.Request) {
		key, err := httplimit.ClientIP()(r)
		if err != nil {
			http.Error(w, "no client address", http.StatusBadRequest)
			return
		}
		const estimate = 800 // tokens this request will cost the model
		st, err := l.Limit(r.Context(), ratelimit.Request{Name: "genTokens", Key: key, Count: estimate})
		switch {
		case err != nil: // the limiter could not decide: fail closed
			http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
		case !st.OK:
			httplimit.WriteDenied(w, l, st)
		default:
			fmt.Fprintf(w, "generated (%.0f model tokens left)\n", st.Remaining)
		}
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: limit(mux), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	url := "http://" + ln.Addr().String() + "/generate"
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 1; i <= 4; i++ {
		resp, err := client.Get(url)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("request %d: %s\n", i, resp.Status)
		for _, h := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
			if v := resp.Header.Get(h); v != "" {
				fmt.Printf("  %s: %s\n", h, v)
			}
		}
		fmt.Printf("  body: %s\n", strings.TrimSpace(string(body)))
	}
}
