package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// Options configure Middleware.
type Options struct {
	// Limits are the names of the limiter's limits that every request uses,
	// all under the request's key; at least one name across Limits and
	// GlobalLimits. Several are taken all or none (Limiter.LimitAll).
	Limits []string
	// GlobalLimits are limits every request also takes from, in the
	// limit's one shared bucket (key "") rather than under the request's
	// key: a whole-service budget next to per-client ones. All of Limits
	// and GlobalLimits are taken all or none.
	GlobalLimits []string
	// Key returns a request's key; nil means ClientIP() (RemoteAddr, no
	// trusted proxies).
	Key KeyFunc
	// Cost returns the tokens a request takes from each limit; nil means 1.
	// A cost of 0 lets the request through without asking the limiter and
	// without RateLimit fields; a negative, NaN or infinite cost is a bug
	// in Cost and answered 500.
	Cost func(*http.Request) float64
	// Reserve takes the tokens as a reservation (ratelimit.Request.Reserve):
	// instead of a 429, a request over the limit waits its turn, holding the
	// connection for Status.RetryAfter before reaching the handler, and gets
	// a 429 only beyond the limits' MaxReserved, which must be set on every
	// limit (0, unlimited, is refused by Middleware).
	// If the client goes away while waiting, its tokens are credited back.
	Reserve bool
	// FailOpen lets a request through to the handler when the limiter
	// cannot decide, because it is closed (ratelimit.ErrClosed) or its
	// store failed (ratelimit.ErrUnavailable), instead of answering 503.
	// DANGEROUS: a fault in the limiter then silently disables rate
	// limiting. The error is still logged (Warn). Every other error is
	// refused as without FailOpen, since it is no fault of the limiter and
	// letting it through could turn limiting off for good: a cost the limit
	// can never grant; a new key beyond Options.MaxBuckets
	// (ratelimit.ErrTooManyKeys), as a flood of keys must not; a limit
	// SetLimits removed (ratelimit.ErrUnknownLimit); a request the limits'
	// configs do not allow (ErrOptions, see Middleware).
	FailOpen bool
	// OnError, if set, writes the response for a request the middleware
	// refuses for a reason other than a denial: a key error (wrapping
	// ErrKey), a cost the limit can never grant (ratelimit.ErrInvalidCount),
	// a bad cost (ErrCost), or a limiter error (or ErrOptions) when
	// FailOpen is false. Nil means 400, 413, 500 and 503 respectively, with
	// a JSON body.
	OnError func(w http.ResponseWriter, r *http.Request, err error)
	// Logger receives limiter errors (Error), fail-open passes (Warn) and
	// refused requests (Debug, or Error for a 5xx refusal such as a bad
	// Cost); nil discards.
	Logger *slog.Logger
}

// Errors passed to Options.OnError besides the limiter's.
var (
	// ErrKey wraps the error of Options.Key.
	ErrKey = errors.New("httplimit: no rate-limit key")
	// ErrCost: Options.Cost returned a negative, NaN or infinite cost.
	ErrCost = errors.New("httplimit: invalid cost")
	// ErrOptions: Middleware's options are invalid.
	ErrOptions = errors.New("httplimit: invalid options")
)

// middleware is a validated Options bound to a limiter.
type middleware struct {
	l      *ratelimit.Limiter
	opts   Options
	key    KeyFunc
	logger *slog.Logger
	policy atomic.Pointer[policy] // as of the limits' configs last read
	limits []limitRef

	// sleep waits d or until ctx ends (a test hook).
	sleep func(ctx context.Context, d time.Duration) error
}

// Middleware returns a function that wraps handlers with rate limiting as
// opts describe. It fails (ErrOptions, or ratelimit.ErrUnknownLimit) if l
// is nil, no limit is named, a name is repeated, unknown to l, or not
// printable ASCII (it must fit a header field), Reserve is set and a
// limit's MaxReserved is 0, or (with no Cost function, so every request
// costs 1) a limit can never grant one token to a request
// (Limiter.Grantable).
//
// The middleware reads the limits' configs on every request, so it
// follows Limiter.SetLimits: RateLimit-Policy describes the configs of
// the moment, and a limit that SetLimits gives MaxReserved 0 while
// Reserve is set makes requests fail with ErrOptions (503, or OnError)
// until it is set again.
func Middleware(l *ratelimit.Limiter, opts Options) (func(http.Handler) http.Handler, error) {
	m, err := newMiddleware(l, opts)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}, nil
}

// limitRef is one limit the middleware takes from.
type limitRef struct {
	name   string
	global bool // the limit's shared bucket, not the request's key
}

// keyFor is the bucket key of ref for a request whose key is key.
func (ref limitRef) keyFor(key string) string {
	if ref.global {
		return ""
	}
	return key
}

func newMiddleware(l *ratelimit.Limiter, opts Options) (*middleware, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: nil limiter", ErrOptions)
	}
	if len(opts.Limits)+len(opts.GlobalLimits) == 0 {
		return nil, fmt.Errorf("%w: no limits", ErrOptions)
	}
	var refs []limitRef
	for _, name := range opts.Limits {
		refs = append(refs, limitRef{name: name})
	}
	for _, name := range opts.GlobalLimits {
		refs = append(refs, limitRef{name: name, global: true})
	}
	seen := make(map[string]bool, len(refs))
	for _, ref := range refs {
		name := ref.name
		switch {
		case seen[name]:
			return nil, fmt.Errorf("%w: limit %q named twice", ErrOptions, name)
		case !validName(name):
			return nil, fmt.Errorf("%w: limit name %q is not printable ASCII", ErrOptions, name)
		}
		seen[name] = true
		if _, ok := l.Config(name); !ok {
			return nil, fmt.Errorf("%w: %q", ratelimit.ErrUnknownLimit, name)
		}
		if ok, err := l.Grantable(ratelimit.Request{Name: name, Count: 1, Reserve: opts.Reserve}); opts.Cost == nil && err == nil && !ok {
			return nil, fmt.Errorf("%w: limit %q can never grant a request one token, and every request costs 1: it would answer every request 413", ErrOptions, name)
		}
	}
	m := &middleware{l: l, opts: opts, key: opts.Key, logger: opts.Logger, limits: refs, sleep: sleep}
	if p := m.readPolicy(); p.err != nil {
		return nil, p.err
	}
	if m.key == nil {
		m.key = ClientIP()
	}
	if m.logger == nil {
		m.logger = slog.New(slog.DiscardHandler)
	}
	return m, nil
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ctx := r.Context()
	key, err := m.key(r)
	switch {
	case err != nil:
	case key == "":
		err = errors.New("empty key")
	case len(key) > ratelimit.MaxKeyLen:
		// The client's doing (a header it sent), so a 400 like any key
		// error, and not a limiter fault that FailOpen would let through.
		err = fmt.Errorf("%w: %d bytes, longer than %d", ratelimit.ErrInvalidKey, len(key), ratelimit.MaxKeyLen)
	}
	if err != nil {
		m.refuse(w, r, fmt.Errorf("%w: %w", ErrKey, err))
		return
	}
	cost := 1.0
	if m.opts.Cost != nil {
		cost = m.opts.Cost(r)
	}
	switch {
	case math.IsNaN(cost) || math.IsInf(cost, 0) || cost < 0:
		m.refuse(w, r, fmt.Errorf("%w: %v", ErrCost, cost))
		return
	case cost == 0:
		next.ServeHTTP(w, r)
		return
	}
	p := m.currentPolicy()
	st, err := ratelimit.Status{}, p.err
	if err == nil {
		st, err = m.decide(ctx, key, cost)
	}
	if err != nil {
		if m.opts.FailOpen && limiterFailed(err) && ctx.Err() == nil {
			m.logger.WarnContext(ctx, "httplimit: limiter failed, request let through (FailOpen)", "err", err, "key", key)
			next.ServeHTTP(w, r)
			return
		}
		m.refuse(w, r, err)
		return
	}
	h := w.Header()
	h.Set(fieldPolicy, p.field)
	if !st.OK {
		writeDenied(w, st)
		return
	}
	h.Set(fieldLimit, limitItem(st.Limit, st.Remaining, st.ResetAfter))
	if st.RetryAfter > 0 { // a reservation: wait for its turn
		if err := m.sleep(ctx, st.RetryAfter); err != nil {
			m.credit(key, cost)
			m.refuse(w, r, err)
			return
		}
	}
	next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, statusKey{}, st)))
}

// decide takes cost tokens from every limit under key.
func (m *middleware) decide(ctx context.Context, key string, cost float64) (ratelimit.Status, error) {
	if len(m.limits) == 1 {
		ref := m.limits[0]
		return m.l.Limit(ctx, ratelimit.Request{Name: ref.name, Key: ref.keyFor(key), Count: cost, Reserve: m.opts.Reserve})
	}
	rs := make([]ratelimit.Request, len(m.limits))
	for i, ref := range m.limits {
		rs[i] = ratelimit.Request{Name: ref.name, Key: ref.keyFor(key), Count: cost, Reserve: m.opts.Reserve}
	}
	return m.l.LimitAll(ctx, rs...)
}

// credit gives back a reservation whose client left before its turn.
func (m *middleware) credit(key string, cost float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, ref := range m.limits {
		if err := m.l.Credit(ctx, ref.name, ref.keyFor(key), cost); err != nil {
			m.logger.Error("httplimit: crediting an abandoned reservation", "err", err, "limit", ref.name, "key", ref.keyFor(key))
		}
	}
}

// refuse answers a request the middleware could not or would not decide.
func (m *middleware) refuse(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := http.StatusServiceUnavailable, "rate limiter unavailable"
	switch {
	case errors.Is(err, ErrKey):
		code, msg = http.StatusBadRequest, "no rate-limit key"
	case errors.Is(err, ErrCost):
		code, msg = http.StatusInternalServerError, "internal error"
	case errors.Is(err, ratelimit.ErrInvalidCount):
		code, msg = http.StatusRequestEntityTooLarge, "request exceeds the rate limit's capacity"
	}
	if code >= 500 && r.Context().Err() == nil && !errors.Is(err, ratelimit.ErrTooManyKeys) { // those are counted (Stats.TooManyKeys); logging each would let a flood of keys flood the log
		m.logger.ErrorContext(r.Context(), "httplimit: request refused", "err", err, "status", code)
	} else {
		m.logger.DebugContext(r.Context(), "httplimit: request refused", "err", err, "status", code)
	}
	if m.opts.OnError != nil {
		m.opts.OnError(w, r, err)
		return
	}
	writeJSON(w, code, struct {
		Error string `json:"error"`
	}{msg})
}

// WriteDenied writes the response Middleware writes for a denial, for a
// handler that decides by itself (an LLM token budget taken inside the
// handler, say): 429 Too Many Requests with Retry-After, the RateLimit
// field and the JSON body (see the package doc), and, when l is not nil,
// RateLimit-Policy for the limit that denied, as l has it under that name:
// pass a nil l for a denial of a request that carried its own config
// (ratelimit.Request.Config), which the policy would not describe. st must
// be a denial (st.OK false) from a call that returned no error.
func WriteDenied(w http.ResponseWriter, l *ratelimit.Limiter, st ratelimit.Status) {
	if l != nil && validName(st.Limit) {
		if c, ok := l.Config(st.Limit); ok {
			w.Header().Set(fieldPolicy, policyItem(st.Limit, c))
		}
	}
	writeDenied(w, st)
}

func writeDenied(w http.ResponseWriter, st ratelimit.Status) {
	h := w.Header()
	if validName(st.Limit) {
		h.Set(fieldLimit, limitItem(st.Limit, st.Remaining, st.RetryAfter))
	}
	h.Set("Retry-After", retryAfter(st.RetryAfter))
	writeJSON(w, http.StatusTooManyRequests, denial{"rate limited", st.Limit, ceilSeconds(st.RetryAfter)})
}

// policy is what the middleware's limits' configs, as last read, give
// every request: the RateLimit-Policy field, or why the middleware cannot
// serve under them.
type policy struct {
	configs []ratelimit.Config // per limit; zero for one the limiter no longer has
	field   string
	err     error
}

// currentPolicy returns the policy of the limits' configs as they are now
// (SetLimits may have changed them since the last request), reading it
// again when one changed.
func (m *middleware) currentPolicy() *policy {
	p := m.policy.Load()
	for i, ref := range m.limits {
		if c, ok := m.l.Config(ref.name); ok && c != p.configs[i] {
			return m.readPolicy()
		}
	}
	return p
}

// readPolicy reads the limits' configs and stores their policy. A limit
// the limiter no longer has is left out of the field (the request then
// fails with ratelimit.ErrUnknownLimit). A limit whose MaxReserved is 0
// while Reserve is set is an error (ErrOptions): a request could hold its
// connection for as long as any debt takes to repay.
func (m *middleware) readPolicy() *policy {
	p := &policy{configs: make([]ratelimit.Config, len(m.limits))}
	items := make([]string, 0, len(m.limits))
	for i, ref := range m.limits {
		c, ok := m.l.Config(ref.name)
		if !ok {
			continue
		}
		if m.opts.Reserve && c.MaxReserved == 0 && p.err == nil {
			p.err = fmt.Errorf("%w: Reserve with limit %q, whose MaxReserved is 0 (unlimited): a request could hold its connection for as long as any debt takes to repay", ErrOptions, ref.name)
		}
		p.configs[i] = c
		items = append(items, policyItem(ref.name, c))
	}
	p.field = strings.Join(items, ", ")
	m.policy.Store(p)
	return p
}

// limiterFailed reports whether err says the limiter could not decide,
// the errors FailOpen lets through.
func limiterFailed(err error) bool {
	return errors.Is(err, ratelimit.ErrUnavailable) || errors.Is(err, ratelimit.ErrClosed)
}

// denial is the body of a 429.
type denial struct {
	Error      string `json:"error"`
	Limit      string `json:"limit"`
	RetryAfter int64  `json:"retry_after_seconds"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

type statusKey struct{}

// StatusFromContext returns the decision that let the request through, in
// a handler behind Middleware.
func StatusFromContext(ctx context.Context) (ratelimit.Status, bool) {
	st, ok := ctx.Value(statusKey{}).(ratelimit.Status)
	return st, ok
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
