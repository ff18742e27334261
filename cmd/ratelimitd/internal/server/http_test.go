package server

import (
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
