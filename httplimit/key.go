package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// KeyFunc returns the rate-limit key of a request. An error refuses the
// request (400 unless Options.OnError says otherwise). It must not return
// "": that is the limit's one shared bucket.
type KeyFunc func(*http.Request) (string, error)

// ClientIP keys requests by the client's IP address: an IPv4 address as
// such, an IPv6 address by its /64 prefix (what one subscriber is usually
// given, so rotating addresses within it does not escape the limit).
//
// The client is the request's RemoteAddr unless that is in one of the
// trusted prefixes (your reverse proxies): then X-Forwarded-For is read
// from the right, skipping trusted hops, and the first untrusted address is
// the client. Hops to the left of it were written by the client and are
// ignored, so a client cannot choose its own key. With no trusted
// prefixes, X-Forwarded-For is never read. A RemoteAddr that is no IP
// address (a unix socket listener's) is an error, answered 400: behind
// such a listener, key requests with a KeyFunc of your own (Header, for
// one your proxy sets).
func ClientIP(trustedProxies ...netip.Prefix) KeyFunc {
	// Addresses are unmapped (parseHop), and so are IPv4-mapped prefixes,
	// such as ::ffff:10.0.0.0/104 (10.0.0.0/8), here: an IPv6 prefix wider
	// than the mapped range (::/0, ::/64) then trusts no IPv4 address.
	trusted := make([]netip.Prefix, len(trustedProxies))
	for i, p := range trustedProxies {
		p = p.Masked()
		if p.Bits() >= 96 && p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		trusted[i] = p
	}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) (string, error) {
		addr, err := parseHop(r.RemoteAddr)
		if err != nil {
			return "", fmt.Errorf("remote address %q: %w", r.RemoteAddr, err)
		}
		if isTrusted(addr) {
			hops := forwardedFor(r.Header)
			for i := len(hops) - 1; i >= 0; i-- {
				a, err := parseHop(hops[i])
				if err != nil {
					return "", fmt.Errorf("X-Forwarded-For hop %q: %w", hops[i], err)
				}
				addr = a
				if !isTrusted(a) {
					break
				}
			}
		}
		return ipKey(addr), nil
	}
}

// forwardedFor returns the X-Forwarded-For hops, left to right, over all of
// the request's X-Forwarded-For fields.
func forwardedFor(h http.Header) []string {
	var hops []string
	for _, v := range h.Values("X-Forwarded-For") {
		for hop := range strings.SplitSeq(v, ",") {
			if hop = strings.TrimSpace(hop); hop != "" {
				hops = append(hops, hop)
			}
		}
	}
	return hops
}

// parseHop parses an address with or without a port ("1.2.3.4",
// "1.2.3.4:80", "::1", "[::1]:80").
func parseHop(s string) (netip.Addr, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), nil
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}, err
	}
	return a.Unmap().WithZone(""), nil
}

// ipKey is the key of a client address: IPv4 as is, IPv6 by its /64.
func ipKey(a netip.Addr) string {
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

// Header keys requests by the value of the named header (an API key, a
// tenant id set by an authenticating proxy). A request without it, or with
// an empty value, is refused: it does not share the empty key's bucket.
// Values are taken as they are: only key by a header whose value the client
// cannot choose freely, or it can mint fresh buckets.
func Header(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		v := strings.TrimSpace(r.Header.Get(name))
		if v == "" {
			return "", fmt.Errorf("%w: header %s", errMissing, name)
		}
		return v, nil
	}
}

var errMissing = errors.New("missing")
