package server

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// result is how a request ended, for the metrics.
type result int

const (
	resultOK result = iota
	resultOverLimit
	resultInvalid
	resultUnknownDomain
	resultUnavailable
	resultCanceled
	resultInternal
	numResults
)

var resultNames = [numResults]string{"ok", "over_limit", "invalid", "unknown_domain", "unavailable", "canceled", "internal"}

// classify maps an engine error to its result, gRPC code and HTTP status.
func classify(err error) (result, codes.Code, int) {
	switch {
	case errors.Is(err, engine.ErrInvalidRequest):
		return resultInvalid, codes.InvalidArgument, http.StatusBadRequest
	case errors.Is(err, engine.ErrUnknownDomain), errors.Is(err, engine.ErrUnknownDescriptor):
		return resultUnknownDomain, codes.NotFound, http.StatusNotFound
	case errors.Is(err, engine.ErrUnavailable):
		return resultUnavailable, codes.Unavailable, http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return resultCanceled, codes.DeadlineExceeded, http.StatusGatewayTimeout
	case errors.Is(err, context.Canceled):
		return resultCanceled, codes.Canceled, http.StatusServiceUnavailable
	}
	return resultInternal, codes.Internal, http.StatusInternalServerError
}

// grpcError is err as a gRPC status error.
func grpcError(err error) error {
	_, code, _ := classify(err)
	return status.Error(code, err.Error())
}
