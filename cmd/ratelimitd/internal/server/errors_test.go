package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err    error
		result result
		code   codes.Code
		status int
	}{
		{fmt.Errorf("%w: x", engine.ErrInvalidRequest), resultInvalid, codes.InvalidArgument, http.StatusBadRequest},
		{fmt.Errorf("%w: x", engine.ErrUnknownDomain), resultUnknownDomain, codes.NotFound, http.StatusNotFound},
		{fmt.Errorf("%w: x", engine.ErrUnknownDescriptor), resultUnknownDomain, codes.NotFound, http.StatusNotFound},
		{fmt.Errorf("%w: x", engine.ErrUnavailable), resultUnavailable, codes.Unavailable, http.StatusServiceUnavailable},
		{context.DeadlineExceeded, resultCanceled, codes.DeadlineExceeded, http.StatusGatewayTimeout},
		{context.Canceled, resultCanceled, codes.Canceled, http.StatusServiceUnavailable},
		{errors.New("other"), resultInternal, codes.Internal, http.StatusInternalServerError},
	}
	for _, c := range cases {
		r, code, status := classify(c.err)
		if r != c.result || code != c.code || status != c.status {
			t.Errorf("classify(%v) = %v %v %v, want %v %v %v", c.err, r, code, status, c.result, c.code, c.status)
		}
	}
}
