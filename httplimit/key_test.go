package httplimit

// Keys (key.go): ClientIP's rightmost-untrusted rule over odd and spoofed
// input, IPv6 grouping, Header.

import (
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

// ClientIP unmaps addresses, and checks them against the trusted prefixes
// in their mapped form too, so that an IPv4-mapped IPv6 trusted prefix
// (::ffff:10.0.0.0/104) matches: otherwise every client behind that proxy
// would share the proxy's bucket.
func TestMappedTrustedPrefix(t *testing.T) {
	p := netip.MustParsePrefix("::ffff:10.0.0.0/104")
	if !p.Contains(netip.MustParseAddr("::ffff:10.1.2.3")) {
		t.Fatal("netip: prefix should contain the address")
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[::ffff:10.1.2.3]:80"
	r.Header.Set("X-Forwarded-For", "198.51.100.1")
	got, err := ClientIP(p)(r)
	if err != nil || got != "198.51.100.1" {
		t.Errorf("RemoteAddr %s in trusted %s: key %q, %v; want 198.51.100.1", r.RemoteAddr, p, got, err)
	}
	// IPv6 prefixes that merely contain the mapped range trust no IPv4
	// client: a client at 9.9.9.9 cannot pick its key.
	r.RemoteAddr = "9.9.9.9:80"
	for _, wide := range []string{"::/0", "::/64", "::/8", "::ffff:0:0/95"} {
		got, err := ClientIP(netip.MustParsePrefix(wide))(r)
		if err != nil || got != "9.9.9.9" {
			t.Errorf("RemoteAddr %s with trusted %s: key %q, %v; want 9.9.9.9", r.RemoteAddr, wide, got, err)
		}
	}
	if got, _ := ClientIP(netip.MustParsePrefix("::ffff:0:0/96"))(r); got != "198.51.100.1" {
		t.Errorf("RemoteAddr %s with trusted ::ffff:0:0/96 (every IPv4 address): key %q; want 198.51.100.1", r.RemoteAddr, got)
	}
}

// TestClientIPSpoofing: the rightmost-untrusted rule over odd input.
func TestClientIPSpoofing(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	for _, tc := range []struct {
		name   string
		remote string
		xff    []string
		fwd    string
		want   string // "" = error
	}{
		{"whitespace and tabs", "10.1.2.3:80", []string{" 6.6.6.6 ,\t198.51.100.1\t"}, "", "198.51.100.1"},
		{"empty entries", "10.1.2.3:80", []string{"6.6.6.6,, 198.51.100.1 ,"}, "", "198.51.100.1"},
		{"only commas: the proxy", "10.1.2.3:80", []string{" , ,"}, "", "10.1.2.3"},
		{"client's own header line first", "10.1.2.3:80", []string{"6.6.6.6", "198.51.100.1"}, "", "198.51.100.1"},
		{"garbage left of the client is never parsed", "10.1.2.3:80", []string{"<script>, 198.51.100.1"}, "", "198.51.100.1"},
		{"garbage between proxies", "10.1.2.3:80", []string{"198.51.100.1, bogus, 10.0.0.2"}, "", ""},
		{"client claims a trusted hop", "10.1.2.3:80", []string{"10.6.6.6, 198.51.100.1"}, "", "198.51.100.1"},
		{"mapped hop unmapped", "10.1.2.3:80", []string{"::ffff:198.51.100.1"}, "", "198.51.100.1"},
		{"mapped bracketed hop with port", "10.1.2.3:80", []string{"[::ffff:198.51.100.1]:9"}, "", "198.51.100.1"},
		{"mapped trusted hop is trusted", "10.1.2.3:80", []string{"198.51.100.1, ::ffff:10.0.0.9"}, "", "198.51.100.1"},
		{"mapped remote trusted", "[::ffff:10.1.2.3]:80", []string{"198.51.100.1"}, "", "198.51.100.1"},
		{"zone stripped", "10.1.2.3:80", []string{"fe80::1%eth0"}, "", "fe80::/64"},
		{"zone with port", "10.1.2.3:80", []string{"[fe80::1%eth0]:80"}, "", "fe80::/64"},
		{"octal-looking IPv4 refused", "10.1.2.3:80", []string{"010.1.2.3"}, "", ""},
		{"quoted hop refused", "10.1.2.3:80", []string{`"198.51.100.1"`}, "", ""},
		{"space-separated hops refused", "10.1.2.3:80", []string{"6.6.6.6 198.51.100.1"}, "", ""},
		{"port without address refused", "10.1.2.3:80", []string{":80"}, "", ""},
		{"Forwarded is not read", "10.1.2.3:80", nil, `for="198.51.100.1"`, "10.1.2.3"},
		{"XFF of an untrusted peer ignored even if garbage", "203.0.113.7:1", []string{"bogus"}, "", "203.0.113.7"},
		{"trusted IPv6 proxy chain", "[2001:db8:ffff::1]:443", []string{"2001:db8:1:2::7, 2001:db8:ffff:1::1"}, "", "2001:db8:1:2::/64"},
		{"remote without port", "203.0.113.7", nil, "", "203.0.113.7"},
		{"remote empty", "", nil, "", ""},
		{"remote unix socket", "@", nil, "", ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if tc.fwd != "" {
			r.Header.Set("Forwarded", tc.fwd)
		}
		expectKey(t, tc.name, ClientIP(proxies...), r, tc.want)
	}
}

// TestIPv6Grouping: one key per /64, whatever the low bits or zone.
func TestIPv6Grouping(t *testing.T) {
	key := func(remote string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		k, err := ClientIP()(r)
		if err != nil {
			t.Fatalf("%s: %v", remote, err)
		}
		return k
	}
	a := key("[2001:db8:1:2::]:1")
	for _, s := range []string{"[2001:db8:1:2:ffff:ffff:ffff:ffff]:2", "[2001:0db8:0001:0002:0:0:0:9]:3", "[2001:DB8:1:2::1]:4"} {
		if k := key(s); k != a {
			t.Errorf("%s: %q, want %q", s, k, a)
		}
	}
	if k := key("[2001:db8:1:3::]:1"); k == a {
		t.Errorf("next /64 shares the key %q", k)
	}
	if k := key("[fe80::1%eth0]:1"); k != key("[fe80::2%eth1]:1") || k != "fe80::/64" {
		t.Errorf("zones: %q", k)
	}
	if k := key("[::ffff:1.2.3.4]:1"); k != "1.2.3.4" {
		t.Errorf("mapped: %q", k)
	}
}
