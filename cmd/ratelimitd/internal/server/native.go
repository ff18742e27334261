package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// The native API's JSON. Durations are seconds, as numbers.
type (
	nativeEntry struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	nativeDescriptor struct {
		Entries []nativeEntry `json:"entries"`
		// Hits is the descriptor's count; unset means the request's.
		Hits *uint64 `json:"hits,omitempty"`
	}
	nativeRequest struct {
		Domain      string             `json:"domain"`
		Descriptors []nativeDescriptor `json:"descriptors"`
		// Hits is every descriptor's count unless it sets its own; 0 means 1.
		Hits    uint64 `json:"hits,omitempty"`
		Reserve bool   `json:"reserve,omitempty"`
	}
	nativeStatus struct {
		OK         bool     `json:"ok"`
		Limit      string   `json:"limit,omitempty"` // the limiter's name for the rule
		Rule       string   `json:"rule,omitempty"`  // rate_limit.name
		Key        string   `json:"key,omitempty"`   // the bucket within the limit
		Unlimited  bool     `json:"unlimited,omitempty"`
		Replaced   bool     `json:"replaced,omitempty"`
		Shadowed   bool     `json:"shadowed,omitempty"` // over a shadow_mode rule's limit, reported OK
		Never      bool     `json:"never,omitempty"`    // the hits exceed what the limit can ever grant
		Remaining  *float64 `json:"remaining,omitempty"`
		RetryAfter float64  `json:"retry_after,omitempty"`
		ResetAfter float64  `json:"reset_after,omitempty"`
	}
	nativeResponse struct {
		OK         bool           `json:"ok"`
		RetryAfter float64        `json:"retry_after,omitempty"`
		FailedOpen bool           `json:"failed_open,omitempty"`
		Statuses   []nativeStatus `json:"statuses"`
	}
	nativeBucketRequest struct {
		Domain  string        `json:"domain"`
		Entries []nativeEntry `json:"entries"`
		// Count is what a credit gives back.
		Count float64 `json:"count,omitempty"`
	}
	nativeConfig struct {
		Algorithm   string  `json:"algorithm"`
		Rate        float64 `json:"rate"`
		Period      float64 `json:"period"`
		Capacity    float64 `json:"capacity"`
		MaxReserved float64 `json:"max_reserved,omitempty"`
		Shards      int     `json:"shards,omitempty"`
	}
	nativeBucket struct {
		Limit  string        `json:"limit"`
		Rule   string        `json:"rule,omitempty"`
		Key    string        `json:"key"`
		Value  *float64      `json:"value,omitempty"`
		TS     *time.Time    `json:"ts,omitempty"`
		Config *nativeConfig `json:"config,omitempty"`
	}
)

func seconds(d time.Duration) float64 { return d.Seconds() }

func entries(es []nativeEntry) []config.Entry {
	out := make([]config.Entry, len(es))
	for i, e := range es {
		out[i] = config.Entry(e)
	}
	return out
}

// handleNative answers /v1/limit (a == apiLimit) and /v1/check: the
// request decided all or nothing, 200 when granted, 429 (with
// Retry-After) when denied.
func (s *Server) handleNative(w http.ResponseWriter, r *http.Request, a api) {
	body, ok := s.readBody(w, r)
	var in nativeRequest
	if !ok || !decodeJSON(w, body, s.requestObjects(), &in) {
		s.requests.add(a, resultInvalid)
		return
	}
	req := engine.Request{Domain: in.Domain, Reserve: in.Reserve, CheckOnly: a == apiCheck,
		Descriptors: make([]engine.Descriptor, len(in.Descriptors))}
	for i, d := range in.Descriptors {
		req.Descriptors[i] = engine.Descriptor{Entries: entries(d.Entries), Hits: max(in.Hits, 1)}
		if d.Hits != nil {
			req.Descriptors[i].Hits = *d.Hits
		}
	}
	var res engine.Result
	ctx, cancel := s.deadline(r.Context())
	err := s.eng.Decide(ctx, &req, &res)
	cancel()
	if err != nil {
		result, _, code := classify(err)
		s.requests.add(a, result)
		if result == resultUnavailable {
			s.health.refresh()
		}
		writeError(w, code, err)
		return
	}
	out := nativeResponse{OK: res.Code == engine.OK, RetryAfter: seconds(res.RetryAfter), FailedOpen: res.FailedOpen,
		Statuses: make([]nativeStatus, len(res.Statuses))}
	for i := range res.Statuses {
		out.Statuses[i] = nativeStatusOf(&res.Statuses[i])
	}
	if res.FailedOpen {
		s.health.refresh()
	}
	code := http.StatusOK
	if out.OK {
		s.requests.add(a, resultOK)
	} else {
		s.requests.add(a, resultOverLimit)
		code = http.StatusTooManyRequests
	}
	if res.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((res.RetryAfter+time.Second-1)/time.Second), 10))
	}
	writeJSON(w, code, out)
}

func nativeStatusOf(st *engine.Status) nativeStatus {
	ns := nativeStatus{OK: st.Code == engine.OK, Replaced: st.Replaced, Unlimited: st.Kind == engine.Unlimited}
	if st.Limit != nil {
		ns.Limit, ns.Rule = st.Limit.Name, st.Limit.RuleName
	}
	if st.Kind != engine.Limited {
		return ns
	}
	rem := st.Remaining
	ns.Key, ns.Shadowed, ns.Never, ns.Remaining = st.Key, st.Shadowed, st.Never, &rem
	ns.RetryAfter, ns.ResetAfter = seconds(st.RetryAfter), seconds(st.ResetAfter)
	return ns
}

// handleValue answers /v1/value: a descriptor's bucket, projected to
// now, and its limit.
func (s *Server) handleValue(w http.ResponseWriter, r *http.Request) {
	in, ok := s.readBucketRequest(w, r, false)
	if !ok {
		s.requests.add(apiValue, resultInvalid)
		return
	}
	ctx, cancel := s.deadline(r.Context())
	defer cancel()
	b, err := s.eng.Value(ctx, in.Domain, entries(in.Entries))
	if err != nil {
		result, _, code := classify(err)
		s.requests.add(apiValue, result)
		writeError(w, code, err)
		return
	}
	s.requests.add(apiValue, resultOK)
	out := bucketOf(b)
	v, ts := b.Value.Value, b.Value.TS.UTC()
	c := b.Value.Config
	out.Value, out.TS = &v, &ts
	out.Config = &nativeConfig{Algorithm: algorithm(c.Kind), Rate: c.Rate, Period: seconds(c.Period), Capacity: c.Capacity,
		MaxReserved: c.MaxReserved, Shards: c.Shards}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) readBucketRequest(w http.ResponseWriter, r *http.Request, count bool) (nativeBucketRequest, bool) {
	var in nativeBucketRequest
	body, ok := s.readBody(w, r)
	if !ok || !decodeJSON(w, body, s.bucketObjects(), &in) {
		return in, false
	}
	if !count && in.Count != 0 {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: count is for /v1/credit only", engine.ErrInvalidRequest))
		return in, false
	}
	return in, true
}

func bucketOf(b engine.Bucket) nativeBucket {
	return nativeBucket{Limit: b.Limit.Name, Rule: b.Limit.RuleName, Key: b.Key}
}

func algorithm(k ratelimit.Kind) string {
	if k == ratelimit.TokenBucket {
		return "token_bucket"
	}
	return "fixed_window"
}
