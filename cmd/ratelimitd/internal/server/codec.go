package server

import (
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
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
// UTF-8) are answered InvalidArgument.
type codec struct{ proto encoding.CodecV2 }

func newCodec() codec { return codec{proto: encoding.GetCodecV2("proto")} }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*rlsRequest)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	r.req = new(rlsv3.RateLimitRequest)
	r.err = proto.Unmarshal(buf.ReadOnlyData(), r.req)
	return nil
}

func (codec) Name() string { return "proto" }
