package httplimit

// Helpers shared by the package's tests: a limiter with a frozen clock
// (ratelimittest.Clock) behind a real HTTP server, scripted requests, and
// configs.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

var t0 = time.Unix(1_700_000_000, 0)

// env is a limiter with a frozen clock behind a real HTTP server.
type env struct {
	l      *ratelimit.Limiter
	clock  *ratelimittest.Clock
	srv    *httptest.Server
	mw     *middleware
	mu     sync.Mutex
	served int               // handler calls
	waits  []time.Duration   // reservation waits
	wait   func() error      // what the sleep hook returns; nil: nil
	last   ratelimit.Status  // StatusFromContext in the handler
	hooks  func(*middleware) // adjusts the middleware before serving
}

func newEnv(t *testing.T, limits map[string]ratelimit.Config, opts Options) *env {
	t.Helper()
	e := &env{clock: ratelimittest.NewClock(t0)}
	l, err := ratelimit.Open(ratelimit.Options{Limits: limits, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.l = l
	t.Cleanup(func() { l.Close() })
	e.mw, err = newMiddleware(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.mw.sleep = func(ctx context.Context, d time.Duration) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.waits = append(e.waits, d)
		if e.wait != nil {
			return e.wait()
		}
		return nil
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st, ok := StatusFromContext(r.Context())
		e.mu.Lock()
		e.served++
		if ok {
			e.last = st
		}
		e.mu.Unlock()
		io.WriteString(w, "ok")
	})
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.mw.serve(w, r, next) }))
	t.Cleanup(e.srv.Close)
	return e
}

// response is what a test checks of an HTTP response.
type response struct {
	code                      int
	policy, limit, retryAfter string
	body                      string
}

func (e *env) get(t *testing.T, header ...string) response {
	t.Helper()
	req, err := http.NewRequest("GET", e.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{
		code:       resp.StatusCode,
		policy:     resp.Header.Get("RateLimit-Policy"),
		limit:      resp.Header.Get("RateLimit"),
		retryAfter: resp.Header.Get("Retry-After"),
		body:       strings.TrimSpace(string(b)),
	}
}

// step is one scripted request: advance the clock, send, expect.
type step struct {
	advance time.Duration
	want    response // zero policy/body: not checked
}

func (e *env) run(t *testing.T, steps []step) {
	t.Helper()
	for i, s := range steps {
		e.clock.Advance(s.advance)
		got := e.get(t)
		w := s.want
		if got.code != w.code || got.limit != w.limit || got.retryAfter != w.retryAfter ||
			(w.policy != "" && got.policy != w.policy) || (w.body != "" && got.body != w.body) {
			t.Fatalf("step %d (+%v): got %+v, want %+v", i, s.advance, got, w)
		}
	}
}

func tb(rate float64, period time.Duration, capacity float64) ratelimit.Config {
	return ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: rate, Period: period, Capacity: capacity}
}

// expectKey checks kf's key for r: want, or an error when want is "".
func expectKey(t *testing.T, name string, kf KeyFunc, r *http.Request, want string) {
	t.Helper()
	got, err := kf(r)
	if want == "" {
		if err == nil {
			t.Errorf("%s: %q, want an error", name, got)
		}
		return
	}
	if err != nil || got != want {
		t.Errorf("%s: %q, %v; want %q", name, got, err, want)
	}
}
