package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
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

// boundedJSON reports whether body, JSON, holds few enough objects for a
// request of the most descriptors and entries the limits allow (a
// request, its descriptors, their entries and limit overrides), counting
// '{' outside strings without decoding, and writes a 400 if not: a body
// of many tiny descriptors is refused before decoding, which would take
// many times its size in memory.
func (s *Server) boundedJSON(w http.ResponseWriter, body []byte) bool {
	n := math.MaxInt // limits so large the product overflows bound nothing
	if e := s.limits.MaxEntries + 2; e > 0 && s.limits.MaxDescriptors <= (math.MaxInt-1)/e {
		n = 1 + s.limits.MaxDescriptors*e
	}
	inStr, esc := false, false
	for _, c := range body {
		switch {
		case esc:
			esc = false
		case inStr:
			if c == '\\' {
				esc = true
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{':
			if n--; n < 0 {
				writeError(w, http.StatusBadRequest, fmt.Errorf("%w: more JSON objects than %d descriptors of %d entries need",
					engine.ErrInvalidRequest, s.limits.MaxDescriptors, s.limits.MaxEntries))
				return false
			}
		}
	}
	return true
}

// decodeJSON decodes body strictly (valid UTF-8, which encoding/json
// would otherwise mend silently; no unknown fields, and field names as
// written, see exactKeys; nothing after the value) into v, writing a 400
// on failure.
func decodeJSON(w http.ResponseWriter, body []byte, v any) bool {
	if !utf8.Valid(body) {
		writeError(w, http.StatusBadRequest, errors.New("invalid JSON: not valid UTF-8"))
		return false
	}
	if err := exactKeys(body); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("invalid JSON: %w", err))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) > 0 {
		err = errors.New("data after the JSON value")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("invalid JSON: %w", err))
		return false
	}
	return true
}

// exactKeys checks that no object in body repeats a key and that every
// key is in lower case, as every field of the native and admin APIs is:
// encoding/json would match "Domain" to domain and let a later duplicate
// win, so a proxy and ratelimitd could read one request two ways. Syntax
// errors are left to the decoder.
func exactKeys(body []byte) error {
	type frame struct {
		keys    map[string]bool // nil: an array
		wantKey bool
	}
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or a syntax error the decoder reports
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, frame{keys: map[string]bool{}, wantKey: true})
				continue
			case '[':
				stack = append(stack, frame{})
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].wantKey {
				f := &stack[n-1]
				switch {
				case f.keys[v]:
					return fmt.Errorf("field %q given twice", v)
				case strings.ToLower(v) != v:
					return fmt.Errorf("unknown field %q (field names are in lower case)", v)
				}
				f.keys[v], f.wantKey = true, false
				continue
			}
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil { // a value: a key comes next
			stack[n-1].wantKey = true
		}
	}
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
