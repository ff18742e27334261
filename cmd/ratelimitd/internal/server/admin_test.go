package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// The admin port refuses what a browser sends on a page's behalf, and
// serves tools (curl, scripts) and a URL typed into the address bar.
func TestAdminRefusesWebPages(t *testing.T) {
	served := 0
	h := noBrowsers(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	for _, c := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"a tool", nil, http.StatusOK},
		{"typed into the address bar", map[string]string{"Sec-Fetch-Site": "none"}, http.StatusOK},
		{"a cross-site form", map[string]string{"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a same-site fetch", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"an old browser's POST", map[string]string{"Origin": "null"}, http.StatusForbidden},
	} {
		before := served
		r := httptest.NewRequest(http.MethodPost, "/v1/reset", nil)
		for k, v := range c.headers {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want || (served > before) != (c.want == http.StatusOK) {
			t.Errorf("%s: %d, served %v; want %d", c.name, w.Code, served > before, c.want)
		}
	}
}
