package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
)

const rules = `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: m
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: q1
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
  - key: none
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: tb
    rate_limit: {algorithm: token_bucket, period: 10s, requests_per_unit: 10}
  - key: tbr
    rate_limit: {algorithm: token_bucket, period: 10s, requests_per_unit: 10, max_reserved: 5}
  - key: sh6
    rate_limit: {algorithm: token_bucket, period: 1m, requests_per_unit: 8, max_reserved: 4, shards: 6}
  - key: sh4
    rate_limit: {algorithm: token_bucket, period: 1h, requests_per_unit: 8, shards: 4}
  - key: general
    rate_limit: {unit: hour, requests_per_unit: 5, name: general}
  - key: special
    rate_limit: {unit: hour, requests_per_unit: 50, replaces: [{name: general}]}
  - key: huge
    rate_limit: {unit: second, requests_per_unit: 1000000000}
`

// The codes and limit_remaining of envoyproxy/ratelimit for one
// descriptor hit repeatedly: a fixed window counted from the epoch.
func TestDecideFixedWindowAsEnvoy(t *testing.T) {
	f := newFixture(t, rules, Options{})
	f.clock.advance(20 * time.Second)
	want := []struct {
		code      Code
		remaining float64
	}{{OK, 2}, {OK, 1}, {OK, 0}, {OverLimit, 0}, {OverLimit, 0}}
	for i, w := range want {
		st := f.decide("d", desc(1, "m=x")).Statuses[0]
		if st.Code != w.code || st.Remaining != w.remaining || st.ResetAfter != 40*time.Second {
			t.Errorf("hit %d: code %v remaining %v reset %v, want %v %v 40s", i+1, st.Code, st.Remaining, st.ResetAfter, w.code, w.remaining)
		}
		if st.Code == OverLimit && st.RetryAfter != 40*time.Second {
			t.Errorf("hit %d: retry after %v, want 40s (the window's end)", i+1, st.RetryAfter)
		}
	}
	f.clock.advance(40 * time.Second) // the next minute: a new window
	if st := f.decide("d", desc(1, "m=x")).Statuses[0]; st.Code != OK || st.Remaining != 2 || st.ResetAfter != time.Minute {
		t.Errorf("next window: %+v, want OK, 2 remaining, reset in 1m", st)
	}
}

// A denied request takes nothing: envoyproxy/ratelimit would have counted
// b four times here.
func TestDecideDeniedRequestTakesNothing(t *testing.T) {
	f := newFixture(t, rules, Options{})
	for i := range 3 {
		if r := f.decide("d", desc(1, "a=x"), desc(1, "b=x")); r.Code != OK {
			t.Fatalf("request %d: %v, want OK", i+1, codes(r))
		}
	}
	r := f.decide("d", desc(1, "a=x"), desc(1, "b=x"))
	if got := codes(r); !slices.Equal(got, []Code{OverLimit, OverLimit, OK}) {
		t.Fatalf("4th request: codes %v, want [over over ok]", got)
	}
	if r.Statuses[1].Remaining != 97 {
		t.Errorf("b in the denied request reports %v remaining, want 97 (nothing taken)", r.Statuses[1].Remaining)
	}
	if r.RetryAfter != time.Hour {
		t.Errorf("retry after %v, want 1h", r.RetryAfter)
	}
	if got := f.remaining("d", "b=x"); got != 97 {
		t.Errorf("b holds %v after the denial, want 97", got)
	}
}

// Hits above what a limit can ever hold are over the limit, not an error,
// and take nothing.
func TestDecideHitsAboveTheLimit(t *testing.T) {
	f := newFixture(t, rules, Options{})
	r := f.decide("d", desc(5, "a=x"), desc(1, "b=x"))
	if got := codes(r); !slices.Equal(got, []Code{OverLimit, OverLimit, OK}) || !r.Statuses[0].Never {
		t.Fatalf("codes %v never %v, want [over over ok], never", got, r.Statuses[0].Never)
	}
	if got := f.remaining("d", "a=x"); got != 3 {
		t.Errorf("a holds %v, want 3", got)
	}
	if got := f.remaining("d", "b=x"); got != 100 {
		t.Errorf("b holds %v, want 100", got)
	}
	// With a descriptor that can never pass, the request cannot either:
	// no retry time, though another descriptor is merely exhausted.
	f.decide("d", desc(3, "a=y"))
	r = f.decide("d", desc(1, "a=y"), desc(5, "a=x"))
	if r.Code != OverLimit || !r.Statuses[1].Never || r.Statuses[0].RetryAfter <= 0 || r.RetryAfter != 0 {
		t.Fatalf("exhausted and never: %+v, want over, the request's retry 0, the exhausted one's > 0", r)
	}
	// Two descriptors on one bucket that together exceed it.
	r = f.decide("d", desc(2, "a=x"), desc(2, "a=x"))
	if got := codes(r); !slices.Equal(got, []Code{OverLimit, OK, OverLimit}) || !r.Statuses[1].Never {
		t.Fatalf("2+2 of 3: codes %v, want [over ok over(never)]", got)
	}
	if got := f.remaining("d", "a=x"); got != 3 {
		t.Errorf("a holds %v after 2+2, want 3", got)
	}
	// Hits the limiter can never grant, as it computes it: two full shards
	// of 8/6 tokens and 4/6 debt each split 4 into halves just past the
	// debt, though 2*(8/6+4/6) is 4.
	res, err := f.try(&Request{Domain: "d", Reserve: true, Descriptors: []Descriptor{desc(4, "sh6=x")}})
	if err != nil || res.Code != OverLimit || !res.Statuses[0].Never {
		t.Fatalf("reserve 4 of sh6: %+v, %v; want over, never", res, err)
	}
}

// Hits 0 checks: within the limit while the bucket holds no debt, with
// what remains (envoyproxy/ratelimit: OK while count <= limit).
func TestDecideHitsZero(t *testing.T) {
	f := newFixture(t, rules, Options{})
	for range 3 {
		f.decide("d", desc(1, "a=x"))
	}
	r := f.decide("d", desc(0, "a=x"), desc(1, "b=x"))
	if got := codes(r); !slices.Equal(got, []Code{OK, OK, OK}) {
		t.Fatalf("check of an exhausted bucket with another hit: %v, want all OK", got)
	}
	if r.Statuses[0].Remaining != 0 || r.Statuses[0].RetryAfter != 0 || r.Statuses[1].Remaining != 99 {
		t.Errorf("statuses %+v", r.Statuses)
	}
	if got := f.remaining("d", "b=x"); got != 99 {
		t.Errorf("b holds %v, want 99: the request was granted", got)
	}
	// A check that follows a take of the same bucket reports what the take left.
	r = f.decide("d", desc(3, "m=y"), desc(0, "m=y"))
	if got := codes(r); !slices.Equal(got, []Code{OK, OK, OK}) || r.Statuses[1].Remaining != 0 {
		t.Fatalf("take 3 then check: %v %+v", got, r.Statuses)
	}
	// A rule of requests_per_unit 0: a check is OK, a hit over.
	if got := codes(f.decide("d", desc(0, "none=x"))); !slices.Equal(got, []Code{OK, OK}) {
		t.Errorf("check of a 0 limit: %v", got)
	}
	r = f.decide("d", desc(1, "none=x"), desc(1, "b=x"))
	if got := codes(r); !slices.Equal(got, []Code{OverLimit, OverLimit, OK}) || r.Statuses[0].ResetAfter != time.Hour {
		t.Errorf("hit of a 0 limit: %v %+v", got, r.Statuses[0])
	}
}

func TestDecideShadowMode(t *testing.T) {
	f := newFixture(t, rules, Options{})
	f.decide("d", desc(1, "shadow=x"))
	r := f.decide("d", desc(1, "shadow=x"), desc(1, "b=x"))
	if got := codes(r); !slices.Equal(got, []Code{OK, OK, OK}) || !r.Statuses[0].Shadowed {
		t.Fatalf("over a shadow rule: %v shadowed %v, want all OK, shadowed", got, r.Statuses[0].Shadowed)
	}
	if got := f.remaining("d", "b=x"); got != 99 {
		t.Errorf("b holds %v, want 99: the request was granted", got)
	}
	// Within its limit, a shadow rule takes like any other.
	f.decide("d", desc(1, "shadow=y"))
	if st := f.decide("d", desc(0, "shadow=y")).Statuses[0]; st.Remaining != 0 || st.Shadowed {
		t.Errorf("shadow=y after one hit: %+v", st)
	}
}

func TestDecideQuotaMode(t *testing.T) {
	f := newFixture(t, rules, Options{})
	f.decide("d", desc(1, "q1=x"))
	r := f.decide("d", desc(1, "q1=x"), desc(1, "q2=x"), desc(1, "b=x"))
	if got := codes(r); !slices.Equal(got, []Code{OK, OverLimit, OK, OK}) {
		t.Fatalf("one quota over: %v, want [ok over ok ok]", got)
	}
	if got := f.remaining("d", "q2=x"); got != 0 {
		t.Errorf("q2 holds %v, want 0: taken", got)
	}
	r = f.decide("d", desc(1, "q1=x"), desc(1, "q2=x"), desc(1, "b=x"))
	if got := codes(r); !slices.Equal(got, []Code{OverLimit, OverLimit, OverLimit, OK}) {
		t.Fatalf("every quota over: %v, want [over over over ok]", got)
	}
	if got := f.remaining("d", "b=x"); got != 99 {
		t.Errorf("b holds %v, want 99", got)
	}
	// A quota that can never pass leaves the request to the others: it
	// waits for the one used up (q2=y); with every quota unpassable it
	// can never pass.
	f.decide("d", desc(1, "q2=y"))
	r = f.decide("d", desc(5, "q1=y"), desc(1, "q2=y"))
	if r.Code != OverLimit || !r.Statuses[0].Never || r.RetryAfter != r.Statuses[1].RetryAfter || r.RetryAfter <= 0 {
		t.Fatalf("a never quota and a used-up one: %+v, want over, the used-up one's wait", r)
	}
	r = f.decide("d", desc(5, "q1=y"), desc(5, "q2=y"))
	if r.Code != OverLimit || r.RetryAfter != 0 {
		t.Fatalf("two never quotas: %+v, want over, no wait", r)
	}
}

func TestDecideNoLimit(t *testing.T) {
	f := newFixture(t, rules, Options{})
	r := f.decide("d", desc(1, "free=x"), desc(1, "zzz=x"), desc(1, "general=x"), desc(1, "special=x"), Descriptor{Hits: 1})
	want := []struct {
		kind     Kind
		replaced bool
	}{{Unlimited, false}, {NoLimit, false}, {NoLimit, true}, {Limited, false}, {NoLimit, false}}
	for i, w := range want {
		st := r.Statuses[i]
		if st.Code != OK || st.Kind != w.kind || st.Replaced != w.replaced {
			t.Errorf("descriptor %d: %+v, want OK kind %v replaced %v", i, st, w.kind, w.replaced)
		}
	}
	if got := f.remaining("d", "general=x"); got != 5 {
		t.Errorf("replaced general holds %v, want 5", got)
	}
	r = f.decide("other", desc(1, "a=x"))
	if r.Code != OK || r.Statuses[0].Kind != NoLimit || f.e.Stats().UnknownDomain != 1 {
		t.Errorf("unknown domain: %+v, stats %+v", r, f.e.Stats())
	}
	s := f.e.Stats()
	if s.Unlimited != 1 || s.Unmatched != 3 || s.Replaced != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestDecideUnknownDomainError(t *testing.T) {
	f := newFixture(t, rules, Options{UnknownDomainError: true})
	if _, err := f.try(&Request{Domain: "other", Descriptors: []Descriptor{desc(1, "a=x")}}); !errors.Is(err, ErrUnknownDomain) {
		t.Fatalf("err %v, want ErrUnknownDomain", err)
	}
}

// A token bucket's denial says exactly when the same request passes.
func TestDecideTokenBucket(t *testing.T) {
	f := newFixture(t, rules, Options{})
	f.decide("d", desc(10, "tb=x"))
	st := f.decide("d", desc(3, "tb=x")).Statuses[0]
	if st.Code != OverLimit || st.RetryAfter != 3*time.Second {
		t.Fatalf("%+v, want over, retry after 3s", st)
	}
	f.clock.advance(3 * time.Second)
	if st := f.decide("d", desc(3, "tb=x")).Statuses[0]; st.Code != OK || st.ResetAfter != 10*time.Second {
		t.Fatalf("after 3s: %+v, want OK, full again in 10s", st)
	}
}

// Reservations (ratelimitd's own API) leave debt and say when to run.
func TestDecideReserve(t *testing.T) {
	f := newFixture(t, rules, Options{})
	res, err := f.try(&Request{Domain: "d", Reserve: true, Descriptors: []Descriptor{desc(14, "tbr=x")}})
	if err != nil || res.Code != OK || res.RetryAfter != 4*time.Second || res.Statuses[0].Remaining != -4 {
		t.Fatalf("reserve 14 of 10 (max 5 debt): %+v %v", res, err)
	}
	res, _ = f.try(&Request{Domain: "d", Reserve: true, Descriptors: []Descriptor{desc(2, "tbr=x")}})
	if res.Code != OverLimit || res.RetryAfter != time.Second {
		t.Fatalf("2 more would leave 6 debt: %+v, want over, retry after 1s", res)
	}
	// A check (hits 0) of a bucket in debt is over its limit.
	if st := f.decide("d", desc(0, "tbr=x")).Statuses[0]; st.Code != OverLimit {
		t.Errorf("check in debt: %+v, want over", st)
	}
}

func TestDecideCheckOnlyTakesNothing(t *testing.T) {
	f := newFixture(t, rules, Options{})
	res, err := f.try(&Request{Domain: "d", CheckOnly: true, Descriptors: []Descriptor{desc(2, "a=x"), desc(1, "b=x")}})
	if err != nil || res.Code != OK || res.Statuses[0].Remaining != 3 {
		t.Fatalf("check: %+v %v", res, err)
	}
	if got := f.remaining("d", "a=x"); got != 3 {
		t.Errorf("a holds %v, want 3", got)
	}
}

// A check answers with the codes a take would get, and reports each bucket
// as it stands: descriptors naming one bucket twice are checked as they
// would be taken, one after the other.
func TestDecideCheckAnswersAsATake(t *testing.T) {
	for _, c := range []struct {
		name  string
		taken []Descriptor // before
		ds    []Descriptor
	}{
		{"one bucket twice, fitting apart", []Descriptor{desc(1, "a=x")}, []Descriptor{desc(1, "a=x"), desc(1, "a=x")}},
		{"one bucket twice, fitting", nil, []Descriptor{desc(2, "a=x"), desc(1, "a=x")}},
		{"token bucket twice", []Descriptor{desc(7, "tb=x")}, []Descriptor{desc(2, "tb=x"), desc(2, "tb=x")}},
		{"twice, above the limit together", nil, []Descriptor{desc(6, "tb=x"), desc(6, "tb=x")}},
		{"a take then hits 0", []Descriptor{desc(8, "tb=x")}, []Descriptor{desc(2, "tb=x"), desc(0, "tb=x")}},
		{"a take emptying it then hits 0", []Descriptor{desc(8, "tb=x")}, []Descriptor{desc(3, "tb=x"), desc(0, "tb=x")}},
		{"two buckets", []Descriptor{desc(2, "a=x")}, []Descriptor{desc(1, "b=x"), desc(2, "a=x")}},
		{"a part that never fits, then one bucket twice", []Descriptor{desc(7, "tb=x")},
			[]Descriptor{desc(4, "a=x"), desc(2, "tb=x"), desc(2, "tb=x")}},
		{"twice, the first over alone", []Descriptor{desc(7, "tb=x")}, []Descriptor{desc(4, "tb=x"), desc(2, "tb=x")}},
		{"twice, the first over alone, after another bucket", []Descriptor{desc(7, "tb=x")},
			[]Descriptor{desc(1, "b=x"), desc(4, "tb=x"), desc(2, "tb=x")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var want []Code
			for _, check := range []bool{true, false} {
				f := newFixture(t, rules, Options{})
				for _, d := range c.taken {
					f.decide("d", d)
				}
				before := make([]float64, len(c.ds))
				for i, d := range c.ds {
					before[i] = f.remaining("d", d.Entries[0].Key+"="+d.Entries[0].Value)
				}
				res, err := f.try(&Request{Domain: "d", CheckOnly: check, Descriptors: c.ds})
				if err != nil {
					t.Fatal(err)
				}
				if check {
					want = codes(res)
					for i, st := range res.Statuses {
						if !st.Never && st.Remaining != before[i] { // never grantable: not read
							t.Errorf("check: status %d reports %v left, the bucket holds %v", i, st.Remaining, before[i])
						}
					}
				} else if got := codes(res); !slices.Equal(got, want) {
					t.Errorf("take: codes %v, the check's %v", got, want)
				}
			}
		})
	}
}

// A request of more descriptors than the engine scans pair by pair
// (linearParts) counts every earlier part on a bucket, those before the
// index was built too: the same answers as a short request.
func TestDecideManyDescriptors(t *testing.T) {
	repeat := func(n int, d Descriptor) []Descriptor { return slices.Repeat([]Descriptor{d}, n) }
	for _, c := range []struct {
		name string
		ds   []Descriptor
		code Code
		left map[string]float64 // what each bucket holds after
	}{
		{"one bucket, then a check", append(repeat(linearParts+1, desc(1, "b=x")), desc(0, "b=x")),
			OK, map[string]float64{"b=x": 100 - linearParts - 1}},
		{"the 11th take of 10, indexed", append(repeat(8, desc(1, "b=x")), repeat(11, desc(1, "tb=x"))...),
			OverLimit, map[string]float64{"b=x": 100, "tb=x": 10}},
		{"10 takes of 10 before the index, then checks", slices.Concat(repeat(linearParts-10, desc(1, "b=y")), repeat(10, desc(1, "tb=y")),
			[]Descriptor{desc(1, "b=y"), desc(0, "b=y"), desc(0, "tb=y")}),
			OK, map[string]float64{"b=y": 100 - (linearParts - 10) - 1, "tb=y": 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, rules, Options{Limits: Limits{MaxDescriptors: 64}})
			if len(c.ds) <= linearParts {
				t.Fatalf("%d descriptors: not above linearParts", len(c.ds))
			}
			r := f.decide("d", c.ds...)
			if r.Code != c.code {
				t.Fatalf("code %v, want %v (%v)", r.Code, c.code, codes(r))
			}
			for kv, want := range c.left {
				if got := f.remaining("d", kv); got != want {
					t.Errorf("%s holds %v, want %v", kv, got, want)
				}
			}
			if c.code != OK {
				return
			}
			// Each part reports what the bucket holds after the parts
			// before it and itself; a check, what the last take left.
			held := map[string]float64{"b": 100, "tb": 10}
			for i, d := range c.ds {
				k := d.Entries[0].Key
				held[k] -= float64(d.Hits)
				if got := r.Statuses[i].Remaining; got != held[k] {
					t.Errorf("status %d (%s, hits %d) reports %v left, want %v", i, k, d.Hits, got, held[k])
				}
			}
		})
	}
}

// BenchmarkDecideDescriptors decides requests of n descriptors, each on a
// bucket of its own, granted or (the buckets spent first) denied: the cost
// per descriptor should not grow with n.
func BenchmarkDecideDescriptors(b *testing.B) {
	for _, denied := range []bool{false, true} {
		for _, n := range []int{4, 64, 1024} {
			b.Run(fmt.Sprintf("denied=%v/descriptors=%d", denied, n), func(b *testing.B) {
				f := newFixture(&testing.T{}, rules, Options{Limits: Limits{MaxDescriptors: n}})
				ds := make([]Descriptor, n)
				for i := range ds {
					ds[i] = desc(1, fmt.Sprintf("huge=k%d", i))
					if denied {
						ds[i] = desc(3, fmt.Sprintf("a=k%d", i)) // spends a's 3 an hour, then 1 more is denied
					}
				}
				req := &Request{Domain: "d", Descriptors: ds}
				res := new(Result)
				if err := f.e.Decide(context.Background(), req, res); err != nil || res.Code != OK {
					b.Fatalf("first request: %v, %v", res.Code, err)
				}
				for i := range ds {
					ds[i].Hits = 1
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := f.e.Decide(context.Background(), req, res); err != nil {
						b.Fatal(err)
					}
					if (res.Code == OverLimit) != denied {
						b.Fatalf("code %v", res.Code)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/descriptor")
			})
		}
	}
}

// A denied request naming one bucket twice says when the whole request
// can be granted, and so does each descriptor on that bucket: the second
// counts the first's hits, though it would fit alone.
func TestDecideRepeatsRetryAfter(t *testing.T) {
	for _, check := range []bool{false, true} {
		f := newFixture(t, rules, Options{})
		f.decide("d", desc(7, "tb=x")) // 3 left, a token a second
		res, err := f.try(&Request{Domain: "d", CheckOnly: check, Descriptors: []Descriptor{desc(4, "tb=x"), desc(2, "tb=x")}})
		if err != nil {
			t.Fatal(err)
		}
		if got := codes(res); !slices.Equal(got, []Code{OverLimit, OverLimit, OverLimit}) {
			t.Errorf("check %v: codes %v, want all over", check, got)
		}
		if res.RetryAfter != 3*time.Second || res.Statuses[0].RetryAfter != time.Second || res.Statuses[1].RetryAfter != 3*time.Second {
			t.Errorf("check %v: retry after %v (statuses %v, %v), want 3s (1s, 3s)", check, res.RetryAfter, res.Statuses[0].RetryAfter, res.Statuses[1].RetryAfter)
		}
		for i, st := range res.Statuses {
			if st.Remaining != 3 {
				t.Errorf("check %v: status %d reports %v left, want 3", check, i, st.Remaining)
			}
		}
		if !check {
			f.clock.advance(3*time.Second - time.Nanosecond)
			if r := f.decide("d", desc(4, "tb=x"), desc(2, "tb=x")); r.Code != OverLimit {
				t.Errorf("granted before the retry time: %v", codes(r))
			}
			f.clock.advance(time.Nanosecond)
			if r := f.decide("d", desc(4, "tb=x"), desc(2, "tb=x")); r.Code != OK {
				t.Errorf("denied at the retry time: %v", codes(r))
			}
		}
	}
}

// Two descriptors on one sharded bucket, each within two shards' worth,
// together more than two shards hold but not more than the bucket: a
// denial is OVER_LIMIT, in a take and in a check, never an invalid count
// (the re-check counting the first's hits is no request the limiter takes).
func TestDecideRepeatsOnAShardedLimit(t *testing.T) {
	for _, check := range []bool{false, true} {
		f := newFixture(t, rules, Options{})
		for range 20 {
			f.decide("d", desc(1, "sh4=x"))
		}
		res, err := f.try(&Request{Domain: "d", CheckOnly: check, Descriptors: []Descriptor{desc(3, "sh4=x"), desc(3, "sh4=x")}})
		if err != nil || res.Code != OverLimit {
			t.Errorf("check %v: %v, %v; want OVER_LIMIT", check, codes(res), err)
		}
	}
}

// The re-check of a denied request naming a bucket twice is a second call,
// at a later clock reading: if the bucket refilled in between, the request
// is decided again rather than denied with every descriptor within its
// limit. The clock jumps at each of its readings in turn.
func TestDecideRepeatsAcrossARefill(t *testing.T) {
	for k := int64(1); k <= 12; k++ {
		cfg := parseConfig(t, rules)
		c := newClock(t0)
		var reads atomic.Int64
		reads.Store(math.MinInt64 / 2)
		now := func() time.Time {
			if reads.Add(1) == k {
				c.advance(2 * time.Second) // 2 tokens of tb
			}
			return c.now()
		}
		lim, err := ratelimit.Open(ratelimit.Options{Limits: cfg.LimiterConfigs(), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		f := &fixture{t: t, e: New(lim, cfg, Options{Now: c.now}), lim: lim, clock: c}
		f.decide("d", desc(5, "tb=x")) // 5 left
		reads.Store(0)
		res, err := f.try(&Request{Domain: "d", Descriptors: []Descriptor{desc(2, "tb=x"), desc(4, "tb=x")}})
		lim.Close()
		if err != nil {
			t.Fatal(err)
		}
		over := false
		for _, st := range res.Statuses {
			over = over || st.Code == OverLimit
		}
		if res.Code == OverLimit && !over {
			t.Errorf("jump at reading %d: denied (retry after %v) with every descriptor within its limit", k, res.RetryAfter)
		}
	}
}

// A check reports when its bucket, as it stands, is full again: now for a
// full one.
func TestDecideCheckResetAfter(t *testing.T) {
	f := newFixture(t, rules, Options{})
	for _, hits := range []uint64{0, 5} {
		res, err := f.try(&Request{Domain: "d", CheckOnly: hits > 0, Descriptors: []Descriptor{desc(hits, "tb=x")}})
		if st := res.Statuses[0]; err != nil || st.Code != OK || st.Remaining != 10 || st.ResetAfter != 0 {
			t.Errorf("check of %d on a full bucket: %+v, %v; want OK, 10 left, full now", hits, st, err)
		}
	}
	f.decide("d", desc(4, "tb=x"))
	res, err := f.try(&Request{Domain: "d", CheckOnly: true, Descriptors: []Descriptor{desc(3, "tb=x")}})
	if st := res.Statuses[0]; err != nil || st.Remaining != 6 || st.ResetAfter != 4*time.Second {
		t.Errorf("check of 3 with 6 left: %+v, %v; want 6 left, full in 4s", st, err)
	}
}

func TestDecideOverride(t *testing.T) {
	f := newFixture(t, rules, Options{Limits: Limits{MaxOverrides: 2}})
	o := desc(1, "zzz=x")
	o.Override = &Override{RequestsPerUnit: 2, Unit: config.Minute}
	for i, want := range []Code{OK, OK, OverLimit} {
		if st := f.decide("d", o).Statuses[0]; st.Code != want || st.Limit.RequestsPerUnit != 2 {
			t.Errorf("hit %d: %+v, want %v", i+1, st, want)
		}
	}
	bad := o
	bad.Override = &Override{RequestsPerUnit: 2}
	if _, err := f.try(&Request{Domain: "d", Descriptors: []Descriptor{bad}}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("override without a unit: %v, want ErrInvalidRequest", err)
	}
	for _, c := range []struct { // in order: the second distinct fits, a third does not
		rpu  uint32
		want bool
	}{{3, true}, {4, false}, {3, true}} {
		o.Override = &Override{RequestsPerUnit: c.rpu, Unit: config.Minute}
		_, err := f.try(&Request{Domain: "d", Descriptors: []Descriptor{o}})
		if (err == nil) != c.want {
			t.Errorf("override %d/minute (bound 2 distinct): err %v", c.rpu, err)
		}
	}
	// An unknown domain applies no limit, override or not.
	if st := f.decide("other", o).Statuses[0]; st.Kind != NoLimit {
		t.Errorf("override in an unknown domain: %+v", st)
	}
}

// When the limiter cannot decide, the request fails closed (an error) and
// the engine reports itself unhealthy; FailOpen answers OK instead.
func TestDecideFailsClosed(t *testing.T) {
	for _, open := range []bool{false, true} {
		f := newFixture(t, rules, Options{FailOpen: open})
		f.lim.Close()
		res, err := f.try(&Request{Domain: "d", Descriptors: []Descriptor{desc(1, "a=x"), desc(1, "zzz=x")}})
		switch {
		case !open && !errors.Is(err, ErrUnavailable):
			t.Errorf("closed limiter: err %v, want ErrUnavailable", err)
		case open && (err != nil || res.Code != OK || !res.FailedOpen):
			t.Errorf("closed limiter, fail open: %+v %v, want OK, FailedOpen", res, err)
		}
		if f.e.Healthy() {
			t.Errorf("fail open %v: Healthy after the limiter failed", open)
		}
	}
}

// A new key beyond the limiter's MaxBuckets fails even with FailOpen, and
// leaves the engine healthy: a flood of keys must not turn limiting off.
func TestDecideTooManyKeysNeverFailsOpen(t *testing.T) {
	cfg := parseConfig(t, rules)
	lim, err := ratelimit.Open(ratelimit.Options{Limits: cfg.LimiterConfigs(), Partitions: 1, MaxBuckets: 1, Now: newClock(t0).now})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	e := New(lim, cfg, Options{FailOpen: true})
	var res Result
	for i, key := range []string{"a=x", "a=y"} {
		err := e.Decide(context.Background(), &Request{Domain: "d", Descriptors: []Descriptor{desc(1, key)}}, &res)
		switch {
		case i == 0 && (err != nil || res.Code != OK):
			t.Fatalf("the first key: %+v, %v", res, err)
		case i == 1 && (!errors.Is(err, ErrUnavailable) || !errors.Is(err, ratelimit.ErrTooManyKeys) || res.FailedOpen):
			t.Fatalf("a key beyond MaxBuckets with FailOpen: %+v, %v; want ErrUnavailable wrapping ErrTooManyKeys", res, err)
		}
	}
	if !e.Healthy() {
		t.Error("unhealthy after refusing a key")
	}
}

// With TransientFailures (Redis), a request the limiter cannot decide
// still fails closed, but the engine stays healthy: the storage may come
// back, and the server probes it for health instead.
func TestDecideTransientFailure(t *testing.T) {
	f := newFixture(t, rules, Options{TransientFailures: true})
	f.lim.Close()
	_, err := f.try(&Request{Domain: "d", Descriptors: []Descriptor{desc(1, "a=x")}})
	if !errors.Is(err, ErrUnavailable) || !f.e.Healthy() {
		t.Errorf("err %v healthy %v, want ErrUnavailable, healthy", err, f.e.Healthy())
	}
}

func TestDecideContextError(t *testing.T) {
	f := newFixture(t, rules, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := f.e.Decide(ctx, &Request{Domain: "d", Descriptors: []Descriptor{desc(1, "a=x")}}, new(Result))
	if !errors.Is(err, context.Canceled) || !f.e.Healthy() {
		t.Errorf("err %v healthy %v, want context.Canceled, healthy", err, f.e.Healthy())
	}
}
