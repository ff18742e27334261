package httplimit

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

func TestClientIP(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	for _, tc := range []struct {
		name    string
		remote  string
		xff     []string
		trusted []netip.Prefix
		want    string // "" = error
	}{
		{"direct IPv4", "203.0.113.7:5555", nil, nil, "203.0.113.7"},
		{"XFF ignored without trusted proxies", "203.0.113.7:5555", []string{"198.51.100.1"}, nil, "203.0.113.7"},
		{"XFF ignored from an untrusted peer", "203.0.113.7:5555", []string{"198.51.100.1"}, proxies, "203.0.113.7"},
		{"trusted proxy, one hop", "10.1.2.3:80", []string{"198.51.100.1"}, proxies, "198.51.100.1"},
		{"rightmost untrusted hop wins over spoofed left hops", "10.1.2.3:80", []string{"1.1.1.1, 198.51.100.1"}, proxies, "198.51.100.1"},
		{"trusted hops skipped, several fields", "10.1.2.3:80", []string{"6.6.6.6, 198.51.100.1", "10.9.9.9"}, proxies, "198.51.100.1"},
		{"all hops trusted: leftmost", "10.1.2.3:80", []string{"10.0.0.1, 10.0.0.2"}, proxies, "10.0.0.1"},
		{"trusted proxy, no XFF: the proxy", "10.1.2.3:80", nil, proxies, "10.1.2.3"},
		{"hop with port", "10.1.2.3:80", []string{"198.51.100.1:4444"}, proxies, "198.51.100.1"},
		{"bracketed IPv6 hop", "10.1.2.3:80", []string{"[2001:db8:1:2::5]"}, proxies, "2001:db8:1:2::/64"},
		{"IPv6 keyed by /64", "[2001:db8:1:2:aaaa::1]:443", nil, nil, "2001:db8:1:2::/64"},
		{"IPv6 trusted proxy", "[2001:db8:ffff::1]:443", []string{"2001:db8:7::9"}, proxies, "2001:db8:7::/64"},
		{"IPv4-mapped IPv6", "[::ffff:203.0.113.7]:1", nil, nil, "203.0.113.7"},
		{"garbage hop from a trusted proxy", "10.1.2.3:80", []string{"unknown"}, proxies, ""},
		{"garbage remote address", "@", nil, nil, ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		expectKey(t, tc.name, ClientIP(tc.trusted...), r, tc.want)
	}
}

// expectKey checks kf's key for r: want, or an error when want is "".
func expectKey(t *testing.T, name string, kf KeyFunc, r *http.Request, want string) {
	t.Helper()
	got, err := kf(r)
	if want == "" {
		if err == nil {
			t.Errorf("%s: %q, want an error", name, got)
		}
		return
	}
	if err != nil || got != want {
		t.Errorf("%s: %q, %v; want %q", name, got, err, want)
	}
}

// TestClientIPOverHTTP runs ClientIP behind a real server, whose
// RemoteAddr is 127.0.0.1: trusted, X-Forwarded-For picks the bucket; not
// trusted, it is ignored and every request shares the loopback bucket.
func TestClientIPOverHTTP(t *testing.T) {
	limits := map[string]ratelimit.Config{"api": tb(1, time.Hour, 0)}
	e := newEnv(t, limits, Options{Limits: []string{"api"}, Key: ClientIP(netip.MustParsePrefix("127.0.0.0/8"))})
	for _, tc := range []struct {
		xff  string
		code int
	}{{"198.51.100.1", 200}, {"198.51.100.2", 200}, {"6.6.6.6, 198.51.100.1", 429}, {"198.51.100.1, 127.0.0.1", 429}} {
		if got := e.get(t, "X-Forwarded-For", tc.xff); got.code != tc.code {
			t.Errorf("trusted loopback, XFF %q: %d, want %d", tc.xff, got.code, tc.code)
		}
	}

	e = newEnv(t, limits, Options{Limits: []string{"api"}}) // default: ClientIP()
	if got := e.get(t, "X-Forwarded-For", "198.51.100.1"); got.code != 200 {
		t.Fatalf("first: %+v", got)
	}
	if got := e.get(t, "X-Forwarded-For", "198.51.100.2"); got.code != 429 {
		t.Fatalf("untrusted XFF must not pick the bucket: %+v", got)
	}
}
