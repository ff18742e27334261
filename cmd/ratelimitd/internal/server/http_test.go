package server

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A JSON body with more objects than the most descriptors and entries
// allowed is refused before decoding; braces inside strings do not count.
func TestBoundedJSON(t *testing.T) {
	s, _ := newTestServer(t, testRules)
	most := 1 + s.limits.MaxDescriptors*(s.limits.MaxEntries+2)
	descriptors := func(n int) string {
		return `{"domain":"d","descriptors":[` + strings.TrimSuffix(strings.Repeat(`{},`, n), ",") + `]}`
	}
	for _, c := range []struct {
		name string
		body string
		ok   bool
	}{
		{"a request", `{"domain":"d","descriptors":[{"entries":[{"key":"a","value":"x"}]}]}`, true},
		{"as many objects as allowed", descriptors(most - 1), true},
		{"one more", descriptors(most), false},
		{"braces in a string", `{"domain":"d","descriptors":[{"entries":[{"key":"a","value":"` + strings.Repeat(`{\"{`, most) + `"}]}]}`, true},
		{"ten thousand descriptors", descriptors(10000), false},
	} {
		w := httptest.NewRecorder()
		if got := s.boundedJSON(w, []byte(c.body)); got != c.ok || !c.ok && w.Code != http.StatusBadRequest {
			t.Errorf("%s: %v (%d), want %v", c.name, got, w.Code, c.ok)
		}
	}
	// Limits whose product overflows an int bound nothing, rather than
	// refusing everything.
	s.limits.MaxDescriptors = 1 << 62
	if w := httptest.NewRecorder(); !s.boundedJSON(w, []byte(descriptors(3))) {
		t.Errorf("with -max-descriptors 2^62: refused (%d %s)", w.Code, w.Body)
	}
}

// Native and admin requests take field names exactly as written, once.
func TestExactKeys(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"domain":"api","descriptors":[{"entries":[{"key":"K","value":"V"}],"hits":2}],"reserve":true}`, true},
		{`{"domain":"api","Domain":"x","descriptors":[]}`, false},
		{`{"domain":"api","domain":"x"}`, false},
		{`{"descriptors":[{"entries":[{"Key":"a","value":"b"}]}]}`, false},
		{`{"descriptors":[{"entries":[{"key":"a","key":"b"}]}]}`, false},
		{`{"descriptors":[{"entries":[{"key":"a"}]},{"entries":[{"key":"a"}]}]}`, true}, // one key per object
		{`{"domain":"api",`, true}, // a syntax error: the decoder's to report
	} {
		if err := exactKeys([]byte(c.body)); c.ok != (err == nil) {
			t.Errorf("%s: %v, want ok %v", c.body, err, c.ok)
		}
	}
}

// decodeJSON takes one JSON value and nothing after it but white space:
// closing brackets included, which json.Decoder.More does not see.
func TestDecodeJSONRefusesTrailingData(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"domain":"api"}`, true},
		{"{\"domain\":\"api\"} \r\n\t", true},
		{`{"domain":"api"}}`, false},
		{`{"domain":"api"}]}}garbage`, false},
		{`{"domain":"api"} {"domain":"x"}`, false},
		{`{"domain":"api"}x`, false},
	} {
		var v struct {
			Domain string `json:"domain"`
		}
		rec := httptest.NewRecorder()
		if got := decodeJSON(rec, []byte(c.body), &v); got != c.ok {
			t.Errorf("%q: decoded %v (%d %s), want %v", c.body, got, rec.Code, rec.Body, c.ok)
		}
	}
}

// An answer JSON cannot carry is a 500 with a reason, never a 200 with
// an empty body.
func TestWriteJSONOfTheUnwritable(t *testing.T) {
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, map[string]any{"metadata": math.Inf(1)})
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "cannot be written as JSON") {
		t.Errorf("got %d %q, want a 500 saying why", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	writeJSON(rec, http.StatusCreated, map[string]int{"a": 1})
	if rec.Code != http.StatusCreated || rec.Body.String() != "{\"a\":1}\n" {
		t.Errorf("got %d %q", rec.Code, rec.Body)
	}
}
