package rls

import (
	"errors"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// hits_addend: a descriptor's own when set (0 included), else the
// request's, 0 meaning 1.
func TestRequestHits(t *testing.T) {
	withHits := func(h uint64) *ratelimitv3.RateLimitDescriptor {
		d := descriptor("k", "v")
		d.HitsAddend = wrapperspb.UInt64(h)
		return d
	}
	cases := []struct {
		request uint32
		d       *ratelimitv3.RateLimitDescriptor
		want    uint64
	}{
		{0, descriptor("k", "v"), 1},
		{5, descriptor("k", "v"), 5},
		{5, withHits(0), 0},
		{5, withHits(7), 7},
		{0, withHits(1 << 40), 1 << 40},
	}
	var out engine.Request
	for _, c := range cases {
		req := &rlsv3.RateLimitRequest{Domain: "d", HitsAddend: c.request, Descriptors: []*ratelimitv3.RateLimitDescriptor{c.d}}
		if err := Request(req, &out, 10, 10); err != nil {
			t.Fatal(err)
		}
		if got := out.Descriptors[0].Hits; got != c.want {
			t.Errorf("request hits %d, descriptor %v: %d, want %d", c.request, c.d.HitsAddend, got, c.want)
		}
	}
}

func TestRequestConverts(t *testing.T) {
	d := descriptor("a", "1", "b", "2")
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: typev3.RateLimitUnit_HOUR,
		UnitMultiplier: wrapperspb.UInt32(3)}
	req := &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{d, descriptor()}}
	out := engine.Request{Reserve: true, Descriptors: make([]engine.Descriptor, 5)}
	if err := Request(req, &out, 10, 10); err != nil {
		t.Fatal(err)
	}
	if out.Domain != "d" || out.Reserve || len(out.Descriptors) != 2 || len(out.Descriptors[1].Entries) != 0 || out.Descriptors[1].Override != nil {
		t.Fatalf("%+v", out)
	}
	got := out.Descriptors[0]
	if len(got.Entries) != 2 || got.Entries[1] != (config.Entry{Key: "b", Value: "2"}) ||
		*got.Override != (engine.Override{RequestsPerUnit: 7, Unit: config.Hour, Multiplier: 3}) {
		t.Errorf("%+v %+v", got, got.Override)
	}
}

func TestRequestRefuses(t *testing.T) {
	neg := descriptor("k", "v")
	neg.IsNegativeHits = true
	many := descriptor("a", "1", "b", "2", "c", "3")
	cases := map[string][]*ratelimitv3.RateLimitDescriptor{
		"negative hits":        {neg},
		"too many descriptors": {descriptor(), descriptor(), descriptor()},
		"too many entries":     {many},
	}
	for name, ds := range cases {
		err := Request(&rlsv3.RateLimitRequest{Domain: "d", Descriptors: ds}, new(engine.Request), 2, 2)
		if !errors.Is(err, engine.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
}
