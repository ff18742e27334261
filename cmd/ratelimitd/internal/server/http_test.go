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
