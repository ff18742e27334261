package server

import (
	"context"
	"sync"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/rls"
)

const rlsServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// rlsServiceDesc registers ShouldRateLimit with a handler that receives
// the codec's rlsRequest, so that a request that fails to decode is the
// client's error (InvalidArgument).
var rlsServiceDesc = grpc.ServiceDesc{
	ServiceName: rlsServiceName,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "ShouldRateLimit",
		Handler:    shouldRateLimitHandler,
	}},
	Metadata: "envoy/service/ratelimit/v3/rls.proto",
}

func shouldRateLimitHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(rlsRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	s := srv.(*Server)
	if interceptor == nil {
		return s.shouldRateLimit(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + rlsServiceName + "/ShouldRateLimit"}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return s.shouldRateLimit(ctx, req.(*rlsRequest))
	})
}

// work is one request's engine memory, pooled.
type work struct {
	req engine.Request
	res engine.Result
}

var workPool = sync.Pool{New: func() any { return new(work) }}

// shouldRateLimit answers one Envoy request.
func (s *Server) shouldRateLimit(ctx context.Context, in *rlsRequest) (*rlsv3.RateLimitResponse, error) {
	if in.err != nil {
		s.requests.add(apiGRPC, resultInvalid)
		return nil, status.Errorf(codes.InvalidArgument, "malformed request: %v", in.err)
	}
	resp, err := s.decideRLS(ctx, in.req, apiGRPC)
	if err != nil {
		return nil, grpcError(err)
	}
	return resp, nil
}

// decideRLS decides an Envoy request (from gRPC or /json), counting it
// under a.
func (s *Server) decideRLS(ctx context.Context, req *rlsv3.RateLimitRequest, a api) (*rlsv3.RateLimitResponse, error) {
	w := workPool.Get().(*work)
	defer workPool.Put(w)
	err := rls.Request(req, &w.req, s.limits.MaxDescriptors, s.limits.MaxEntries)
	if err == nil {
		ctx, cancel := s.deadline(ctx)
		err = s.eng.Decide(ctx, &w.req, &w.res)
		cancel()
	}
	if err != nil {
		r, _, _ := classify(err)
		s.requests.add(a, r)
		if r == resultUnavailable {
			s.health.refresh()
		}
		return nil, err
	}
	r := resultOK
	if w.res.Code == engine.OverLimit {
		r = resultOverLimit
	}
	s.requests.add(a, r)
	if w.res.FailedOpen {
		s.health.refresh()
	}
	return rls.Response(&w.res, s.opts.Headers), nil
}

// deadline bounds ctx by the request timeout unless it has a deadline.
func (s *Server) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.opts.RequestTimeout)
}

// streamWorkers is how many goroutines the gRPC server keeps to run
// calls; a call that finds them all busy gets a goroutine of its own. A
// kept goroutine's stack has already grown to a handler's depth, where a
// new goroutine per call grows (copies) its stack on every call.
const streamWorkers = 256

// newGRPCServer builds the gRPC server: RLS v3, health and reflection.
func (s *Server) newGRPCServer() *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newCodec(s.limits)),
		grpc.MaxRecvMsgSize(s.opts.MaxRequestBytes),
		grpc.NumStreamWorkers(streamWorkers),
	}
	if s.certs != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.certs.config("h2"))))
	}
	gs := grpc.NewServer(opts...)
	gs.RegisterService(&rlsServiceDesc, s)
	healthpb.RegisterHealthServer(gs, s.health.service())
	reflection.Register(gs)
	return gs
}
