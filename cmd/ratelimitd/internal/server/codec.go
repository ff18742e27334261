package server

import (
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/rls"
)

// rlsRequest is a ShouldRateLimit request as the codec hands it over:
// decoded, or the reason it could not be (which gRPC would otherwise
// report as an Internal error rather than the client's).
type rlsRequest struct {
	req *rlsv3.RateLimitRequest
	err error
}

// codec is gRPC's proto codec, except that it decodes ShouldRateLimit
// requests itself, so that malformed ones (bad wire format, invalid
// UTF-8) are answered InvalidArgument, and so that one with more
// descriptors or entries than limits allow is refused before it is
// decoded (rls.CheckWire).
type codec struct {
	proto  encoding.CodecV2
	limits engine.Limits
}

func newCodec(limits engine.Limits) codec {
	return codec{proto: encoding.GetCodecV2("proto"), limits: limits}
}

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*rlsRequest)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	r.req = new(rlsv3.RateLimitRequest)
	if r.err = rls.CheckWire(buf.ReadOnlyData(), c.limits.MaxDescriptors, c.limits.MaxEntries); r.err == nil {
		r.err = proto.Unmarshal(buf.ReadOnlyData(), r.req)
	}
	return nil
}

func (codec) Name() string { return "proto" }
