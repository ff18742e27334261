// HTTP server: httplimit.Middleware in front of a handler, on a real
// server at 127.0.0.1:0. The program calls itself a few times with a
// client and prints each answer's status and rate-limit header fields, then
// shuts down.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/httplimit"
)

func main() {
	l, err := ratelimit.Open(ratelimit.Options{
		Limits: map[string]ratelimit.Config{
			// Per client IP: 60 a minute, 3 at once; and a service-wide 1000 a second.
			"perIP":  {Kind: ratelimit.TokenBucket, Rate: 60, Period: time.Minute, Capacity: 3},
			"global": {Kind: ratelimit.TokenBucket, Rate: 1000, Period: time.Second},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	limit, err := httplimit.Middleware(l, httplimit.Options{
		Limits: []string{"perIP"}, // GlobalLimits: []string{"global"} would add a budget shared by all clients
		// Key defaults to httplimit.ClientIP(): RemoteAddr. Behind a proxy:
		// httplimit.ClientIP(netip.MustParsePrefix("10.0.0.0/8")).
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		st, _ := httplimit.StatusFromContext(r.Context())
		fmt.Fprintf(w, "hello (%.0f left)\n", st.Remaining)
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: limit(mux), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	url := "http://" + ln.Addr().String() + "/hello"
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 1; i <= 5; i++ {
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
