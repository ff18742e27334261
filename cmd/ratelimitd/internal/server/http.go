package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// newHTTPHandler routes the request port: envoyproxy/ratelimit's /json
// and /healthcheck, /metrics, and the native API.
func (s *Server) newHTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/json", s.handleJSON)
	mux.HandleFunc("/healthcheck", s.handleHealthcheck)
	mux.Handle("/metrics", s.metricsHandler())
	mux.HandleFunc("/v1/limit", func(w http.ResponseWriter, r *http.Request) { s.handleNative(w, r, apiLimit) })
	mux.HandleFunc("/v1/check", func(w http.ResponseWriter, r *http.Request) { s.handleNative(w, r, apiCheck) })
	mux.HandleFunc("/v1/value", s.handleValue)
	return mux
}

// newHTTPServer wraps h with the server's timeouts. writeTimeout 0
// leaves writes unbounded (for streaming a backup).
func (s *Server) newHTTPServer(h http.Handler, writeTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.opts.RequestTimeout + 10*time.Second,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          nil,
	}
}

// handleHealthcheck answers 200 "OK" while healthy, else 500, as
// envoyproxy/ratelimit's /healthcheck does.
func (s *Server) handleHealthcheck(w http.ResponseWriter, r *http.Request) {
	if !s.health.ok() {
		http.Error(w, "NOT_SERVING", http.StatusInternalServerError)
		return
	}
	w.Write([]byte("OK"))
}

// errBodyTooLarge is readBody's error for a body over the bound.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads a POST body of at most MaxRequestBytes. It writes the
// error response itself (405, 413 or 400) and returns false on failure.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s not allowed; use POST", r.Method))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.opts.MaxRequestBytes)))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("%w: more than %d bytes", errBodyTooLarge, s.opts.MaxRequestBytes))
		} else {
			writeError(w, http.StatusBadRequest, err)
		}
		return nil, false
	}
	return body, true
}

// writeJSON writes v as JSON with status code; a v that JSON cannot
// carry (a NaN in a rule's metadata, say) is a 500 saying why, not a
// status with no body.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(struct {
			Error string `json:"error"`
		}{"the answer cannot be written as JSON: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// writeError writes {"error": err} with status code.
func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, struct {
		Error string `json:"error"`
	}{err.Error()})
}
