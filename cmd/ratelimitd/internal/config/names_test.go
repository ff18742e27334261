package config

import (
	"fmt"
	"testing"
)

// TestStatsKey pins envoyproxy/ratelimit's stats key for matched
// descriptors: the rule's path, with the request's values where
// detailed_metric or value_to_metric ask for them and a share_threshold
// pattern where values share a counter.
func TestStatsKey(t *testing.T) {
	c := parse(t, doc(
		"domain: m",
		"descriptors:",
		"  - key: plain",
		"    rate_limit: {unit: second, requests_per_unit: 1}",
		"  - key: plain",
		"    value: v1",
		"    rate_limit: {unit: second, requests_per_unit: 1}",
		"  - key: wild",
		"    value: w*",
		"    rate_limit: {unit: second, requests_per_unit: 1}",
		"  - key: detailed",
		"    detailed_metric: true",
		"    rate_limit: {unit: second, requests_per_unit: 1}",
		"  - key: vtm",
		"    value_to_metric: true",
		"    descriptors:",
		"      - key: mid",
		"        descriptors:",
		"          - key: leaf",
		"            rate_limit: {unit: second, requests_per_unit: 1}",
		"  - key: vtmwild",
		"    value: x*",
		"    value_to_metric: true",
		"    rate_limit: {unit: second, requests_per_unit: 1}",
		"  - key: shared",
		"    value: s/*",
		"    share_threshold: true",
		"    value_to_metric: true",
		"    descriptors:",
		"      - key: method",
		"        rate_limit: {unit: second, requests_per_unit: 1}",
		"      - key: detail",
		"        detailed_metric: true",
		"        rate_limit: {unit: second, requests_per_unit: 1}",
		"  - key: vtmexact",
		"    value: e",
		"    value_to_metric: true",
		"    descriptors:",
		"      - key: leaf",
		"        value_to_metric: true",
		"        rate_limit: {unit: second, requests_per_unit: 1}",
	))
	for _, tc := range []struct {
		entries []string
		want    string
	}{
		{[]string{"plain=abc"}, "m.plain"},
		{[]string{"plain=v1"}, "m.plain_v1"},
		{[]string{"wild=wx"}, "m.wild_w*"},
		{[]string{"detailed=abc"}, "m.detailed_abc"},
		{[]string{"detailed="}, "m.detailed_"},
		{[]string{"vtm=a", "mid=b", "leaf=c"}, "m.vtm_a.mid.leaf"},
		{[]string{"vtm=", "mid=b", "leaf=c"}, "m.vtm.mid.leaf"},
		{[]string{"vtmwild=xyz"}, "m.vtmwild_xyz"},
		{[]string{"shared=s/a", "method=GET"}, "m.shared_s/*.method"},
		{[]string{"shared=s/a", "detail=GET"}, "m.shared_s/*.detail_GET"},
		{[]string{"shared=s/a", "detail="}, "m.shared_s/*.detail"},
		{[]string{"shared=s/*", "detail="}, "m.shared_s/*.detail_"},
		{[]string{"vtmexact=e", "leaf=z"}, "m.vtmexact_e.leaf_z"},
	} {
		m, ok := limitFor(t, c, "m", tc.entries...)
		if !ok {
			t.Errorf("%v matched nothing", tc.entries)
			continue
		}
		if m.StatsKey != tc.want {
			t.Errorf("StatsKey(%v) = %q, want %q", tc.entries, m.StatsKey, tc.want)
		}
	}
}

// Names and keys decode to one sequence of parts: rules and descriptors
// whose parts differ get different names and keys however the parts are
// spelled.
func TestNamesAreInjective(t *testing.T) {
	parts := []string{"", "a", "a.b", "a=b", "a:b", "a!b", `a\`, `\`, ".", "=", "a_b", "b", "b.x"}
	names := make(map[string]string) // name -> what it names
	keys := make(map[string]string)
	add := func(m map[string]string, kind, got, what string) {
		if prev, dup := m[got]; dup && prev != what {
			t.Fatalf("%s %q for %s and %s", kind, got, prev, what)
		}
		m[got] = what
	}
	for _, d := range parts {
		for _, k1 := range parts {
			for _, v1 := range parts {
				for _, k2 := range parts {
					for _, p := range [][]Entry{{{k1, v1}}, {{k1, v1}, {k2, "x"}}} {
						what := fmt.Sprintf("path %q %q", d, p)
						add(names, "name", pathName(d, p), what)
						add(keys, "key", bucketKey(nil, p), fmt.Sprintf("%q", p))
					}
				}
			}
		}
		add(names, "name", overrideName(d, 1, Second, 1), fmt.Sprintf("override %q", d))
		add(names, "name", overrideName(d, 1, Second, 2), fmt.Sprintf("override2 %q", d))
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{pathName("dom", []Entry{{"k", "v"}, {"k2", ""}}), "dom.k=v.k2"},
		{pathName("a.b", []Entry{{"ip", "10.0.0.1"}}), `a\.b.ip=10\.0\.0\.1`},
		{overrideName("d", 10, Minute, 1), "d!10/minute"},
		{overrideName("d", 10, Second, 30), "d!10/30second"},
		{bucketKey(nil, []Entry{{"k", ""}, {"a=b", "c"}}), `k=.a\=b=c`},
		{staticStatsKey("d", []Entry{{"k", "v"}, {"k2", ""}}), "d.k_v.k2"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
