package server

import (
	"errors"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// The codec hands a ShouldRateLimit request over decoded, or with the
// reason it is not, and leaves other messages to the proto codec.
func TestCodec(t *testing.T) {
	c := newCodec(engine.Limits{MaxDescriptors: 4, MaxEntries: 4})
	good, _ := proto.Marshal(&rlsv3.RateLimitRequest{Domain: "d", HitsAddend: 3})
	var r rlsRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(good)}, &r); err != nil || r.err != nil || r.req.Domain != "d" || r.req.HitsAddend != 3 {
		t.Fatalf("good request: %v %+v", err, r)
	}
	bad := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "d\xff")
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(bad)}, &r); err != nil || r.err == nil {
		t.Fatalf("invalid UTF-8: %v %+v, want the reason in the request", err, r)
	}
	var many []byte
	for range 5 { // empty descriptors (field 2), one more than the codec's limits
		many = protowire.AppendBytes(protowire.AppendTag(many, 2, protowire.BytesType), nil)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(many)}, &r); err != nil || !errors.Is(r.err, engine.ErrInvalidRequest) || len(r.req.Descriptors) != 0 {
		t.Fatalf("5 descriptors, at most 4: %v %+v, want refused before decoding", err, r)
	}
	hb, _ := proto.Marshal(&healthpb.HealthCheckRequest{Service: "x"})
	var h healthpb.HealthCheckRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(hb)}, &h); err != nil || h.Service != "x" {
		t.Fatalf("another message: %v %v", err, &h)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0xff})}, &h); err == nil {
		t.Error("a bad message of another kind decoded")
	}
}
