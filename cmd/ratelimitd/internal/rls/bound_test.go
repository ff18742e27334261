package rls

import (
	"errors"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// CheckWire counts descriptors and entries as decoding would, and refuses
// more than the bounds; what it cannot read is left to decoding.
func TestCheckWire(t *testing.T) {
	req := func(descriptors, entries int) []byte {
		r := &rlsv3.RateLimitRequest{Domain: "d", HitsAddend: 2}
		for range descriptors {
			d := &ratelimitv3.RateLimitDescriptor{}
			for range entries {
				d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
			}
			r.Descriptors = append(r.Descriptors, d)
		}
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		descriptors, entries int
		ok                   bool
	}{{0, 0, true}, {4, 3, true}, {5, 3, false}, {4, 4, false}, {1000, 0, false}} {
		err := CheckWire(req(c.descriptors, c.entries), 4, 3)
		if c.ok != (err == nil) || !c.ok && !errors.Is(err, engine.ErrInvalidRequest) {
			t.Errorf("%d descriptors of %d entries: %v, want ok %v", c.descriptors, c.entries, err, c.ok)
		}
	}
	if err := CheckWire([]byte{0xff, 0xff}, 4, 3); err != nil {
		t.Errorf("malformed: %v, want it left to decoding", err)
	}
}
