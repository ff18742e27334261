package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// TestParseErrors pins each problem's sentinel, line and field. The cases
// marked "theirs" are refused by envoyproxy/ratelimit too; the others it
// accepts or ignores, and ratelimitd refuses on purpose.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   string
		err   error
		line  int
		field string
		msg   string // a part of the message
	}{
		{"empty file", "", ErrMissingField, 0, "domain", "no content"},
		{"comments only", "# nothing\n", ErrMissingField, 0, "domain", "no content"},
		{"null document", "~\n", ErrMissingField, 1, "domain", "no content"},
		{"theirs: empty domain", doc("domain: ''", "descriptors: []"), ErrMissingField, 1, "domain", "name its domain"},
		{"theirs: no domain", doc("descriptors:", "  - key: a"), ErrMissingField, 1, "domain", ""},
		{"theirs: bad YAML", doc("domain: d", "descriptors: [", ""), ErrSyntax, 3, "", ""},
		{"not a mapping", doc("- domain: d"), ErrSyntax, 1, "", "mapping"},
		{"theirs: non-string field name", doc("0.25: d", "domain: d"), ErrSyntax, 1, "", "strings"},
		{"theirs: unknown top field", doc("domain: d", "domian: x"), ErrUnknownField, 2, "domian", "did you mean domain"},
		{"top field in a descriptor", doc("domain: d", "descriptors:", "  - key: a", "    domain: x"),
			ErrUnknownField, 4, "domain", "top of the file"},
		{"theirs: misspelled rate_limit", doc("domain: d", "descriptors:", "  - key: a", "    ratelimit:",
			"      unit: day"), ErrUnknownField, 4, "ratelimit", "did you mean rate_limit"},
		{"theirs: misspelled requests_per_unit", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:",
			"      unit: day", "      requestsperunit: 5"), ErrUnknownField, 6, "rate_limit.requestsperunit",
			"did you mean requests_per_unit"},
		{"rate_limit field in a descriptor", doc("domain: d", "descriptors:", "  - key: a", "    unit: day"),
			ErrUnknownField, 4, "unit", "belongs in rate_limit"},
		{"descriptor field in rate_limit", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:",
			"      shadow_mode: true"), ErrUnknownField, 5, "rate_limit.shadow_mode", "belongs in a descriptor"},
		{"duplicate YAML key", doc("domain: d", "descriptors:", "  - key: a", "    key: b"), ErrDuplicate, 4, "key", "line 3"},
		{"descriptors not a list", doc("domain: d", "descriptors:", "  key: a"), ErrSyntax, 3, "descriptors", "list"},
		{"theirs: descriptor not a mapping", doc("domain: d", "descriptors:", "  - a"), ErrSyntax, 3, "", "mapping"},
		{"theirs: empty key", doc("domain: d", "descriptors:", "  - value: v"), ErrMissingField, 3, "key", ""},
		{"key a list", doc("domain: d", "descriptors:", "  - key: [a]"), ErrSyntax, 3, "key", "string"},
		{"wildcard in a key", doc("domain: d", "descriptors:", "  - key: a*"), ErrUnsupported, 3, "key", "values only"},
		{"theirs: duplicate descriptor", doc("domain: d", "descriptors:", "  - key: a", "    value: v", "  - key: a",
			"    value: v"), ErrDuplicate, 5, "key", "t.yaml:3"},
		{"theirs: duplicate key-only descriptor", doc("domain: d", "descriptors:", "  - key: a", "  - key: a"),
			ErrDuplicate, 4, "key", "without a value"},
		{"theirs: duplicate nested descriptor", doc("domain: d", "descriptors:", "  - key: a", "    descriptors:",
			"      - key: b", "      - key: b"), ErrDuplicate, 6, "key", ""},
		{"theirs: share_threshold without a wildcard", doc("domain: d", "descriptors:", "  - key: a", "    value: v",
			"    share_threshold: true"), ErrInvalidValue, 5, "share_threshold", "wildcard"},
		{"flag not a bool", doc("domain: d", "descriptors:", "  - key: a", "    shadow_mode: 1"), ErrSyntax, 4,
			"shadow_mode", "true or false"},
		{"quoted flag", doc("domain: d", "descriptors:", "  - key: a", "    shadow_mode: 'yes'"), ErrSyntax, 4,
			"shadow_mode", ""},
		{"metadata not a mapping", doc("domain: d", "descriptors:", "  - key: a", "    metadata: [1]"), ErrSyntax, 4,
			"metadata", "mapping"},
		{"rate_limit not a mapping", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit: 5"), ErrSyntax, 4,
			"rate_limit", "mapping"},
		{"theirs: unknown unit", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: fortnight",
			"      requests_per_unit: 5"), ErrInvalidValue, 5, "rate_limit.unit", `unknown unit "fortnight"`},
		{"theirs: unit unknown", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: unknown",
			"      requests_per_unit: 5"), ErrInvalidValue, 5, "rate_limit.unit", ""},
		{"theirs: no unit", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      requests_per_unit: 5"),
			ErrMissingField, 5, "rate_limit.unit", ""},
		{"theirs: empty rate_limit", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit: {}"),
			ErrMissingField, 4, "rate_limit.unit", ""},
		{"no requests_per_unit", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: day"),
			ErrMissingField, 5, "rate_limit.requests_per_unit", "0 denies"},
		{"theirs: negative requests_per_unit", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:",
			"      unit: day", "      requests_per_unit: -1"), ErrSyntax, 6, "rate_limit.requests_per_unit", "whole number"},
		{"theirs: requests_per_unit past uint32", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:",
			"      unit: day", "      requests_per_unit: 4294967296"), ErrInvalidValue, 6, "rate_limit.requests_per_unit", ""},
		{"theirs: fractional requests_per_unit", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:",
			"      unit: day", "      requests_per_unit: 1.5"), ErrSyntax, 6, "rate_limit.requests_per_unit", ""},
		{"theirs: quoted requests_per_unit", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:",
			"      unit: day", "      requests_per_unit: '5'"), ErrSyntax, 6, "rate_limit.requests_per_unit", ""},
		{"theirs: unit with unlimited", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:",
			"      unlimited: true", "      unit: day"), ErrInvalidValue, 6, "rate_limit.unit", "unlimited"},
		{"period with unlimited", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:",
			"      unlimited: true", "      period: 1s"), ErrInvalidValue, 6, "rate_limit.period", "unlimited"},
		{"theirs: empty replaces name", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:",
			"      unit: day", "      requests_per_unit: 5", "      replaces:", "        - name:"), ErrMissingField, 8,
			"rate_limit.replaces[0].name", ""},
		{"theirs: replaces itself", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:",
			"      name: me", "      unit: day", "      requests_per_unit: 5", "      replaces:", "        - name: me"),
			ErrInvalidValue, 9, "rate_limit.replaces[0].name", "itself"},
		{"replaces not a list", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: day",
			"      requests_per_unit: 5", "      replaces: other"), ErrSyntax, 7, "rate_limit.replaces", "list"},
		{"replaces entry field", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: day",
			"      requests_per_unit: 5", "      replaces:", "        - nmae: x"), ErrUnknownField, 8,
			"rate_limit.replaces[0].nmae", "did you mean name"},
		// ours
		{"unit and period", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: second",
			"      period: 2s", "      requests_per_unit: 5"), ErrInvalidValue, 6, "rate_limit.period", "not both"},
		{"bad period", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      period: 90",
			"      requests_per_unit: 5"), ErrInvalidValue, 5, "rate_limit.period", "90s"},
		{"negative period", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      period: -1s",
			"      requests_per_unit: 5"), ErrInvalidValue, 5, "rate_limit.period", ""},
		{"unknown algorithm", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: second",
			"      requests_per_unit: 5", "      algorithm: leaky_bucket"), ErrInvalidValue, 7, "rate_limit.algorithm",
			"token_bucket"},
		{"zero capacity", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: second",
			"      requests_per_unit: 5", "      capacity: 0"), ErrInvalidValue, 7, "rate_limit.capacity", "> 0"},
		{"infinite capacity", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: second",
			"      requests_per_unit: 5", "      capacity: .inf"), ErrSyntax, 7, "rate_limit.capacity", "finite"},
		{"negative max_reserved", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: second",
			"      requests_per_unit: 5", "      max_reserved: -1"), ErrInvalidValue, 7, "rate_limit.max_reserved", ">= 0"},
		{"zero shards", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: second",
			"      requests_per_unit: 5", "      shards: 0"), ErrInvalidValue, 7, "rate_limit.shards", ">= 1"},
		{"too many shards", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: second",
			"      requests_per_unit: 5", "      shards: 65537"), ErrInvalidValue, 7, "rate_limit.shards", "65536"},
		{"capacity with requests_per_unit 0", doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:",
			"      unit: second", "      requests_per_unit: 0", "      capacity: 5"), ErrInvalidValue, 7,
			"rate_limit.capacity", "denies every request"},
		{"a second document", doc("domain: d", "---", "domain: e"), ErrUnsupported, 3, "", "one domain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := parseError(t, tc.src)
			if !errors.Is(e, tc.err) || e.File != "t.yaml" || e.Line != tc.line || e.Field != tc.field ||
				!strings.Contains(e.Msg, tc.msg) {
				t.Errorf("error %q\n(%v, line %d, field %q); want %v, line %d, field %q, message with %q",
					e, e.Err, e.Line, e.Field, tc.err, tc.line, tc.field, tc.msg)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	e := parseError(t, doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: fortnight",
		"      requests_per_unit: 5"))
	want := `t.yaml:5: rate_limit.unit: unknown unit "fortnight" (second, minute, hour, day, week, month or year)`
	if e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "f", Msg: "m"}, "f: m"},
		{Error{File: "f", Line: 3, Msg: "m"}, "f:3: m"},
		{Error{Field: "x", Msg: "m"}, "x: m"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v.Error() = %q, want %q", tc.e, got, tc.want)
		}
	}
}

// Several problems are all reported, each errors.Is-able, up to maxErrors.
func TestParseReportsEveryProblem(t *testing.T) {
	_, err := Parse([]File{
		{Name: "a.yaml", Data: []byte(doc("domain: a", "descriptors:", "  - key: x", "    rate_limit:",
			"      unit: fortnight", "      requests_per_unit: 1", "  - value: v"))},
		{Name: "b.yaml", Data: []byte(doc("domain: b", "colour: red"))},
	}, nil)
	for _, want := range []error{ErrInvalidValue, ErrMissingField, ErrUnknownField} {
		if !errors.Is(err, want) {
			t.Errorf("error %v does not wrap %v", err, want)
		}
	}
	for _, part := range []string{"a.yaml:5: rate_limit.unit", "a.yaml:7: key", "b.yaml:2: colour"} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("error %v lacks %q", err, part)
		}
	}

	var many strings.Builder
	many.WriteString("domain: d\ndescriptors:\n")
	for range maxErrors + 5 {
		many.WriteString("  - value: v\n")
	}
	_, err = Parse([]File{{Name: "m.yaml", Data: []byte(many.String())}}, nil)
	if n := strings.Count(err.Error(), "\n") + 1; n != maxErrors+1 || !strings.Contains(err.Error(), "5 more") {
		t.Errorf("%d problems reported as %d lines:\n%v", maxErrors+5, n, err)
	}
}

// TestParseTheirYAML reads forms envoyproxy/ratelimit's parser
// (gopkg.in/yaml.v2) accepts.
func TestParseTheirYAML(t *testing.T) {
	c := parse(t, doc(
		"domain: d",
		"descriptors:",
		"  - key: 5",           // numbers are text in keys and values
		"    value: 0x1F",      // as written
		"    shadow_mode: yes", // YAML 1.1 flags
		"    quota_mode: On",   //
		"    detailed_metric:", // null: false
		"    rate_limit:",      //
		"      unit: Second",   // any letter case
		"      requests_per_unit: 1_000",
		"      unlimited: false",
		"      name:",      // null: unset
		"      replaces:",  // null: none
		"  - key: b",       //
		"    value:",       // null: key-only
		"    rate_limit:",  // null: no limit
		"    descriptors:", // null: none
		"  - key: c",
		"    value: 1.50",
		"    rate_limit: &common",
		"      unit: hour",
		"      requests_per_unit: 0o17",
		"  - key: e",
		"    rate_limit: *common",    // aliases
		"  - <<: {key: f, value: v}", // merge keys
		"    rate_limit:",
		"      <<: *common",
		"      requests_per_unit: 3",
	))
	m, ok := limitFor(t, c, "d", "5=0x1F")
	if !ok || !m.Limit.ShadowMode || !m.Limit.QuotaMode || m.Limit.DetailedMetric || m.Limit.RequestsPerUnit != 1000 ||
		m.Limit.Unit != Second || m.Limit.RuleName != "" || m.Limit.Replaces != nil {
		t.Errorf("5=0x1F: %+v, %v", m.Limit, ok)
	}
	if _, ok := limitFor(t, c, "d", "b=x"); ok {
		t.Errorf("a null rate_limit limits")
	}
	if m, ok := limitFor(t, c, "d", "c=1.50"); !ok || m.Limit.RequestsPerUnit != 15 || m.Limit.Unit != Hour {
		t.Errorf("c=1.50: %+v, %v", m.Limit, ok)
	}
	if m, ok := limitFor(t, c, "d", "e=x"); !ok || m.Limit.RequestsPerUnit != 15 {
		t.Errorf("alias: %+v, %v", m.Limit, ok)
	}
	if m, ok := limitFor(t, c, "d", "f=v"); !ok || m.Limit.RequestsPerUnit != 3 || m.Limit.Unit != Hour {
		t.Errorf("merge: %+v, %v", m.Limit, ok)
	}
}

func TestParseMetadata(t *testing.T) {
	c := parse(t, doc(
		"domain: d",
		"descriptors:",
		"  - key: a",
		"    metadata:",
		"      team: payments",
		"      tier: 2",
		"      ratio: 0.5",
		"      on: true",
		"      tags: [x, 1]",
		"      nested: {1: one, k: ~}",
		"    rate_limit: {unit: second, requests_per_unit: 1}",
	))
	m, _ := limitFor(t, c, "d", "a=1")
	want := map[string]any{"team": "payments", "tier": 2, "ratio": 0.5, "on": true, "tags": []any{"x", 1},
		"nested": map[string]any{"1": "one", "k": nil}}
	if !reflect.DeepEqual(m.Limit.Metadata, want) {
		t.Errorf("Metadata = %#v\nwant %#v", m.Limit.Metadata, want)
	}
}

// TestParseExtensions pins ratelimitd's rate_limit fields.
func TestParseExtensions(t *testing.T) {
	epoch := time.Unix(0, 0)
	for _, tc := range []struct {
		name string
		rl   []string // the rate_limit block's lines
		cfg  ratelimit.Config
		unit Unit
		mult uint32
	}{
		{"their fixed window", []string{"unit: minute", "requests_per_unit: 10"},
			ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 10, Period: time.Minute, Capacity: 10, Shards: 1, Start: epoch},
			Minute, 1},
		{"token bucket per unit", []string{"algorithm: token_bucket", "unit: second", "requests_per_unit: 5", "capacity: 20"},
			ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 5, Period: time.Second, Capacity: 20, Shards: 1},
			Second, 1},
		{"token bucket with a period", []string{"algorithm: token_bucket", "period: 90s", "requests_per_unit: 3",
			"max_reserved: 6", "shards: 4"},
			ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 3, Period: 90 * time.Second, Capacity: 3, MaxReserved: 6,
				Shards: 4},
			Second, 90},
		{"fixed window with a period", []string{"algorithm: fixed_window", "period: 2h", "requests_per_unit: 100",
			"capacity: 150.5"},
			ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 100, Period: 2 * time.Hour, Capacity: 150.5, Shards: 1,
				Start: epoch},
			Hour, 2},
		{"a period equal to a unit", []string{"period: 24h", "requests_per_unit: 1"},
			ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 1, Period: 24 * time.Hour, Capacity: 1, Shards: 1, Start: epoch},
			Day, 1},
		{"a sub-second period", []string{"algorithm: token_bucket", "period: 250ms", "requests_per_unit: 1"},
			ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 1, Period: 250 * time.Millisecond, Capacity: 1, Shards: 1},
			UnitUnknown, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := []string{"domain: d", "descriptors:", "  - key: a", "    rate_limit:"}
			for _, l := range tc.rl {
				lines = append(lines, "      "+l)
			}
			m, ok := limitFor(t, parse(t, doc(lines...)), "d", "a=1")
			if !ok || !sameConfig(m.Limit.Config, tc.cfg) || m.Limit.Config.Start.IsZero() != tc.cfg.Start.IsZero() ||
				m.Limit.Unit != tc.unit || m.Limit.UnitMultiplier != tc.mult {
				t.Errorf("Limit %+v\n%v x %d; want %+v, %v x %d", m.Limit.Config, m.Limit.UnitMultiplier, m.Limit.Unit,
					tc.cfg, tc.mult, tc.unit)
			}
		})
	}
}

// With unlimited: true, a unit that is no unit (empty, "unknown", any
// other word) is ignored, as envoyproxy/ratelimit ignores it; a real unit
// is refused (TestParseErrors), as theirs refuses it.
func TestParseUnlimitedIgnoresWhatIsNoUnit(t *testing.T) {
	for _, unit := range []string{`""`, "unknown", "UNKNOWN", "foo"} {
		c := parse(t, doc("domain: d", "descriptors:", "  - key: a", "    rate_limit:",
			"      unlimited: true", "      unit: "+unit))
		if m, ok := limitFor(t, c, "d", "a=1"); !ok || !m.Limit.Unlimited {
			t.Errorf("unit %s with unlimited: %+v, %v; want an unlimited rule", unit, m.Limit, ok)
		}
	}
}

// A rule's limit is named by its path, not by its rate_limit.name, which
// only replaces uses: adding or changing a name keeps its buckets, and
// rules may share a name whatever their limits (as envoyproxy/ratelimit
// allows).
func TestParseNamesDoNotNameLimits(t *testing.T) {
	c := parse(t, doc("domain: d", "descriptors:",
		"  - key: a", "    rate_limit: {name: n, unit: second, requests_per_unit: 5}",
		"  - key: b", "    rate_limit: {name: n, unit: second, requests_per_unit: 6}",
		"  - key: c", "    rate_limit: {name: n, unlimited: true}"))
	ma, _ := limitFor(t, c, "d", "a=1")
	mb, _ := limitFor(t, c, "d", "b=1")
	if ma.Limit.Name != "d.a" || mb.Limit.Name != "d.b" || ma.Limit.RuleName != "n" || mb.Limit.RuleName != "n" {
		t.Errorf("rules named n: limits %q and %q, rule names %q and %q; want d.a and d.b, n and n",
			ma.Limit.Name, mb.Limit.Name, ma.Limit.RuleName, mb.Limit.RuleName)
	}
	if cfgs := c.LimiterConfigs(); len(cfgs) != 2 || cfgs["d.a"].Rate != 5 || cfgs["d.b"].Rate != 6 {
		t.Errorf("LimiterConfigs = %v", cfgs)
	}
	unnamed := parse(t, doc("domain: d", "descriptors:",
		"  - key: a", "    rate_limit: {unit: second, requests_per_unit: 5}"))
	if m, _ := limitFor(t, unnamed, "d", "a=1"); m.Limit.Name != ma.Limit.Name {
		t.Errorf("the rule without its name: limit %q, with it %q", m.Limit.Name, ma.Limit.Name)
	}
}

// A few lines of nested aliases (each level uses the one before ten
// times) would expand to ten million descriptors: the parse stops at
// maxDescriptors with an error naming the bound.
func TestParseBoundsAliasExpansion(t *testing.T) {
	lines := []string{"domain: d", "descriptors:",
		"  - key: l0", "    descriptors: &a0", "      - key: k", "        rate_limit: {unit: second, requests_per_unit: 1}"}
	for level := 1; level <= 7; level++ {
		var uses []string
		for i := range 10 {
			uses = append(uses, fmt.Sprintf("{key: x%d, descriptors: *a%d}", i, level-1))
		}
		lines = append(lines, fmt.Sprintf("  - key: l%d", level),
			fmt.Sprintf("    descriptors: &a%d [%s]", level, strings.Join(uses, ", ")))
	}
	e := parseError(t, doc(lines...))
	if !errors.Is(e, ErrInvalidValue) || !strings.Contains(e.Msg, fmt.Sprint(maxDescriptors)) {
		t.Errorf("a bomb of aliases: %v, want ErrInvalidValue naming the bound", e)
	}
}
