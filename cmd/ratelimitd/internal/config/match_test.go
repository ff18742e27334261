package config

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// noMatch stands for "no rule applies" in the tables.
const noMatch = -1

// TestMatchParity matches descriptors against testdata/parity.yaml, whose
// rules each have their own requests_per_unit. The expectations are what
// envoyproxy/ratelimit's service answers for the same file and descriptors
// (its current_limit.requests_per_unit, or no current_limit), except where
// a case says it diverges.
func TestMatchParity(t *testing.T) {
	c, err := Load("testdata/parity.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		entries []string
		rpu     int // the rule's requests_per_unit, or noMatch
	}{
		// precedence among siblings of one key
		{"exact value", []string{"ip=10.0.0.5"}, 11},
		{"first wildcard in file order", []string{"ip=10.0.9.9"}, 12},
		{"second wildcard when the first fails", []string{"ip=10.9.9.9"}, 13},
		{"key-only when no value matches", []string{"ip=192.168.0.1"}, 10},
		{"an exact value without rate_limit exempts, no fallback", []string{"ip=10.1.0.1"}, noMatch},
		{"empty value falls to key-only", []string{"ip="}, 10},
		// wildcards anywhere
		{"two wildcards", []string{"path=/api/v1/items/42"}, 20},
		{"middle literal missing", []string{"path=/api/v1/other"}, noMatch},
		{"leading wildcard", []string{"path=/img/x.png"}, 21},
		{"both match: the first in file order", []string{"path=/api/v1/items/x.png"}, 20},
		{"wildcards match empty runs", []string{"path=/api//items/"}, 20},
		{"a lone * matches the empty value", []string{"any="}, 22},
		{"a lone * matches any value", []string{"any=foo"}, 22},
		// nesting
		{"a parent with its own limit", []string{"tenant=acme"}, 30},
		{"nested key-only", []string{"tenant=acme", "user=bob"}, 31},
		{"nested exact value without rate_limit, no fallback to key-only", []string{"tenant=acme", "user=root"}, noMatch},
		{"three levels", []string{"tenant=acme", "user=root", "method=GET"}, 32},
		{"descriptor longer than the rule tree", []string{"tenant=acme", "user=bob", "method=GET"}, noMatch},
		{"key-only parent, exact child", []string{"tenant=other", "plan=free"}, 33},
		{"descriptor ending at a node without rate_limit", []string{"tenant=other"}, noMatch},
		{"no backtracking to the key-only sibling", []string{"tenant=acme", "plan=free"}, noMatch},
		{"key-only parent, key-only child", []string{"tenant=other", "user=x"}, 34},
		{"child value matches nothing", []string{"tenant=other", "plan=paid"}, noMatch},
		// keys next to values
		{"wildcard value", []string{"user=abc"}, 40},
		{"wildcard value mismatch", []string{"user=bcd"}, noMatch},
		// Diverges: envoyproxy/ratelimit joins key and value with '_' before
		// comparing, so there these three match the rules user="a*" (40)
		// and to="number" (41); here a key matches only itself.
		{"a key that extends a rule's key", []string{"user_agent=x"}, noMatch},
		{"key and value split differently", []string{"user_a=bc"}, noMatch},
		{"a key equal to a rule's key_value", []string{"to_number=x"}, noMatch},
		{"exact", []string{"to=number"}, 41},
		// other rules
		{"share_threshold wildcard", []string{"files=files/a.pdf"}, 60},
		{"share_threshold pattern as a literal value", []string{"files=files/*"}, 60},
		{"share_threshold mismatch", []string{"files=other"}, noMatch},
		{"named rule", []string{"route=read"}, 70},
		{"replacing rule", []string{"vip_route=read"}, 71},
		{"week", []string{"period=week"}, 80},
		{"month", []string{"period=month"}, 81},
		{"year", []string{"period=year"}, 82},
		{"unknown key", []string{"nothing=1"}, noMatch},
		{"no entries", nil, noMatch},
	} {
		m, ok := c.Match("parity", entries(tc.entries...))
		got := noMatch
		if ok {
			got = int(m.Limit.RequestsPerUnit)
		}
		if got != tc.rpu || ok != (tc.rpu != noMatch) {
			t.Errorf("%s: Match(%v) = rule %d (ok %v), want %d", tc.name, tc.entries, got, ok, tc.rpu)
		}
	}
	if _, ok := c.Match("unknown", entries("ip=1")); ok {
		t.Errorf("Match in an unknown domain matched")
	}
}

func TestMatchFlags(t *testing.T) {
	c, err := Load("testdata/parity.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := limitFor(t, c, "parity", "internal=x")
	if !ok || !m.Limit.Unlimited || m.Limit.Blocked || m.Limit.Config != (ratelimit.Config{}) {
		t.Errorf("unlimited rule: %+v, %v; want Unlimited with a zero Config", m.Limit, ok)
	}
	m, ok = limitFor(t, c, "parity", "banned=x")
	if !ok || !m.Limit.Blocked || m.Limit.Unlimited || m.Limit.Unit != Second || m.Limit.Config != (ratelimit.Config{}) {
		t.Errorf("requests_per_unit 0: %+v, %v; want Blocked per second with a zero Config", m.Limit, ok)
	}
	m, ok = limitFor(t, c, "parity", "soft=x")
	if !ok || !m.Limit.ShadowMode {
		t.Errorf("shadow_mode rule: %+v, %v; want ShadowMode", m.Limit, ok)
	}
	m, ok = limitFor(t, c, "parity", "route=read")
	if !ok || m.Limit.RuleName != "read_limit" || m.Limit.Name != "parity.route=read" {
		t.Errorf("named rule: RuleName %q Name %q, want read_limit and parity.route=read (its path)", m.Limit.RuleName, m.Limit.Name)
	}
	m, ok = limitFor(t, c, "parity", "vip_route=read")
	if !ok || !slices.Equal(m.Limit.Replaces, []string{"read_limit"}) {
		t.Errorf("replacing rule: Replaces %q, want [read_limit]", m.Limit.Replaces)
	}
	m, _ = limitFor(t, c, "parity", "period=month")
	want := ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 81, Period: 30 * 24 * time.Hour, Capacity: 81,
		Shards: 1, Start: time.Unix(0, 0)}
	if !sameConfig(m.Limit.Config, want) || m.Limit.Unit != Month || m.Limit.UnitMultiplier != 1 {
		t.Errorf("unit: Month rule: %+v %v x %d, want %+v, Month x 1", m.Limit.Config, m.Limit.Unit,
			m.Limit.UnitMultiplier, want)
	}
	if m.Limit.File != "testdata/parity.yaml" || m.Limit.Line == 0 {
		t.Errorf("rule location %s:%d", m.Limit.File, m.Limit.Line)
	}
}

// A bucket key is the descriptor's, so that a key-only or wildcard rule
// counts each value apart, except where share_threshold pools them.
func TestMatchKeys(t *testing.T) {
	c, err := Load("testdata/parity.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	key := func(kvs ...string) string {
		m, ok := limitFor(t, c, "parity", kvs...)
		if !ok {
			t.Fatalf("%v matched nothing", kvs)
		}
		return m.Key
	}
	for _, tc := range []struct {
		a, b []string
		same bool
	}{
		{[]string{"ip=1.2.3.4"}, []string{"ip=5.6.7.8"}, false},
		{[]string{"ip=10.0.1.1"}, []string{"ip=10.0.2.2"}, false},
		{[]string{"tenant=acme", "user=bob"}, []string{"tenant=acme", "user=eve"}, false},
		{[]string{"tenant=other", "user=x"}, []string{"tenant=another", "user=x"}, false},
		{[]string{"files=files/a.pdf"}, []string{"files=files/b.csv"}, true},
		{[]string{"files=files/a.pdf"}, []string{"files=files/*"}, true},
	} {
		if ka, kb := key(tc.a...), key(tc.b...); (ka == kb) != tc.same {
			t.Errorf("keys of %v and %v: %q and %q; want same = %v", tc.a, tc.b, ka, kb, tc.same)
		}
	}
	if k := key("tenant=acme", "user=bob"); k != "tenant=acme.user=bob" {
		t.Errorf("key = %q, want tenant=acme.user=bob", k)
	}
	if k := key("ip=10.0.0.5"); k != `ip=10\.0\.0\.5` {
		t.Errorf("key = %q, want ip=10\\.0\\.0\\.5", k)
	}
}

func TestReplaced(t *testing.T) {
	a := &Limit{RuleName: "a"}
	b := &Limit{RuleName: "b", Replaces: []string{"a"}}
	c := &Limit{Replaces: []string{"b"}, Unlimited: true}
	d := &Limit{RuleName: "d"}
	for _, tc := range []struct {
		in   []*Limit
		want []bool
	}{
		{nil, []bool{}},
		{[]*Limit{a, d}, []bool{false, false}},
		{[]*Limit{a, b}, []bool{true, false}},
		{[]*Limit{b, a}, []bool{false, true}},
		{[]*Limit{a, nil, b}, []bool{true, false, false}},
		// an unlimited rule replaces too, and replacing is not transitive
		// through a replaced rule: b is dropped and a still is.
		{[]*Limit{a, b, c}, []bool{true, true, false}},
		{[]*Limit{b}, []bool{false}},
	} {
		if got := Replaced(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Replaced(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestOverrideLimit(t *testing.T) {
	m, err := OverrideLimit("d.x", entries("k=v", "k2="), 7, Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 7, Period: time.Minute, Capacity: 7, Shards: 1,
		Start: time.Unix(0, 0)}
	if !sameConfig(m.Limit.Config, want) || m.Limit.UnitMultiplier != 1 || m.Limit.Blocked {
		t.Errorf("override config %+v x %d, want %+v x 1", m.Limit.Config, m.Limit.UnitMultiplier, want)
	}
	if m.Limit.Name != `d\.x!7/minute` || m.Key != "k=v.k2=" || m.StatsKey != "d.x.k_v.k2" {
		t.Errorf("override Name %q Key %q StatsKey %q", m.Limit.Name, m.Key, m.StatsKey)
	}
	m, err = OverrideLimit("d", entries("k=v"), 3, Second, 30)
	if err != nil || m.Limit.Config.Period != 30*time.Second || m.Limit.Name != "d!3/30second" {
		t.Errorf("override with multiplier 30: %+v, %v", m.Limit, err)
	}
	m, err = OverrideLimit("d", entries("k=v"), 0, Hour, 1)
	if err != nil || !m.Limit.Blocked || m.Limit.Config != (ratelimit.Config{}) {
		t.Errorf("override of 0: %+v, %v; want Blocked", m.Limit, err)
	}
	for _, tc := range []struct {
		unit Unit
		mult uint32
		ok   bool
	}{
		{UnitUnknown, 1, false}, {Unit(8), 1, false}, {Unit(-1), 1, false},
		{Year, 100, true}, {Year, 101, false}, {Second, 3_000_000_000, true}, {Second, 1<<32 - 1, false},
	} {
		_, err := OverrideLimit("d", nil, 1, tc.unit, tc.mult)
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrInvalidOverride) {
			t.Errorf("OverrideLimit(%d x %v) error %v, want ok = %v or ErrInvalidOverride", tc.mult, tc.unit, err, tc.ok)
		}
	}
}

func TestWildcardMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, value string
		want           bool
	}{
		{"a*", "a", true}, {"a*", "abc", true}, {"a*", "ba", false},
		{"*", "", true}, {"**", "x", true},
		{"*b", "ab", true}, {"*b", "ba", false},
		{"a*b", "ab", true}, {"a*b", "axxb", true}, {"a*b", "a", false}, {"a*b", "b", false},
		{"ab*b", "ab", false}, {"ab*b", "abb", true}, {"a*a", "a", false}, {"a*a", "aa", true},
		{"a*b*c", "abc", true}, {"a*b*c", "axbyc", true}, {"a*b*c", "ac", false}, {"a*b*c", "acb", false},
		{"a*b*c", "abcbc", true}, {"*x*", "x", true}, {"*x*", "y", false},
	} {
		parts := splitStar(tc.pattern)
		if got := wildcardMatch(parts, tc.value); got != tc.want {
			t.Errorf("wildcardMatch(%q, %q) = %v, want %v", tc.pattern, tc.value, got, tc.want)
		}
	}
}

func splitStar(s string) []string {
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '*' {
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

func BenchmarkMatch(b *testing.B) {
	c, err := Load("testdata/parity.yaml", nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		e    []Entry
	}{
		{"exact", entries("ip=10.0.0.5")},
		{"wildcard", entries("path=/api/v1/items/42")},
		{"nested", entries("tenant=acme", "user=root", "method=GET")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := c.Match("parity", bc.e); !ok {
					b.Fatal("no match")
				}
			}
		})
	}
}
