package server

import (
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// handleJSON is envoyproxy/ratelimit's /json: a RateLimitRequest in
// proto3 JSON in, the RateLimitResponse out, 200 for OK, 429 for
// OVER_LIMIT. Unlike theirs it takes only POST, bounds the body and the
// time, and answers 503 (not 400) when the limiter cannot decide.
func (s *Server) handleJSON(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok || !checkJSON(w, body, s.requestObjects()) {
		s.requests.add(apiJSON, resultInvalid)
		return
	}
	req := new(rlsv3.RateLimitRequest)
	if err := protojson.Unmarshal(body, req); err != nil {
		s.requests.add(apiJSON, resultInvalid)
		writeError(w, http.StatusBadRequest, err)
		return
	}
	resp, err := s.decideRLS(r.Context(), req, apiJSON)
	if err != nil {
		_, _, code := classify(err)
		writeError(w, code, err)
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	code := http.StatusOK
	switch resp.OverallCode {
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		code = http.StatusTooManyRequests
	case rlsv3.RateLimitResponse_UNKNOWN:
		code = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(out)
}
