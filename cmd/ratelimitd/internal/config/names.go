package config

import (
	"strconv"
	"strings"
)

// escape writes s to b with a '\' before each of the separators names and
// keys use, so that a name or key decodes to exactly one sequence of parts.
func escape(b *strings.Builder, s string) {
	if !strings.ContainsAny(s, `\.=:!`) {
		b.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\', '.', '=', ':', '!':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
}

// pathName is the Name of a rule without a rate_limit.name.
func pathName(domain string, path []Entry) string {
	var b strings.Builder
	escape(&b, domain)
	for _, e := range path {
		b.WriteByte('.')
		escape(&b, e.Key)
		if e.Value != "" {
			b.WriteByte('=')
			escape(&b, e.Value)
		}
	}
	return b.String()
}

// overrideName is the Name of a limit a request overrides.
func overrideName(domain string, requestsPerUnit uint32, unit Unit, multiplier uint32) string {
	var b strings.Builder
	escape(&b, domain)
	b.WriteByte('!')
	b.WriteString(strconv.FormatUint(uint64(requestsPerUnit), 10))
	b.WriteByte('/')
	if multiplier != 1 {
		b.WriteString(strconv.FormatUint(uint64(multiplier), 10))
	}
	b.WriteString(unit.String())
	return b.String()
}

// bucketKey is Match.Key: "KEY=VALUE.KEY=VALUE", escaped like names.
// levels is nil for an override.
func bucketKey(levels []levelInfo, entries []Entry) string {
	var b strings.Builder
	n := 0
	for _, e := range entries {
		n += len(e.Key) + len(e.Value) + 2
	}
	b.Grow(n)
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('.')
		}
		escape(&b, e.Key)
		b.WriteByte('=')
		if levels != nil && levels[i].share {
			escape(&b, levels[i].value)
		} else {
			escape(&b, e.Value)
		}
	}
	return b.String()
}

// staticStatsKey is envoyproxy/ratelimit's FullKey of a rule:
// "DOMAIN.KEY_VALUE.KEY", unescaped.
func staticStatsKey(domain string, path []Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range path {
		b.WriteByte('.')
		b.WriteString(e.Key)
		if e.Value != "" {
			b.WriteByte('_')
			b.WriteString(e.Value)
		}
	}
	return b.String()
}

// statsKey is Match.StatsKey, as envoyproxy/ratelimit derives a matched
// descriptor's stats key.
func (l *Limit) statsKey(entries []Entry) string {
	if !l.dynamicStats {
		return l.StatsKey
	}
	shared := false
	if l.DetailedMetric {
		shared = wildcardShared(l.levels, entries)
	}
	var b strings.Builder
	b.WriteString(l.Domain)
	for i, e := range entries {
		lv := l.levels[i]
		b.WriteByte('.')
		b.WriteString(e.Key)
		var v string
		switch {
		case l.DetailedMetric && lv.share:
			v = lv.value
		case l.DetailedMetric && shared:
			v = e.Value
		case l.DetailedMetric:
			// Theirs writes the separator even for an empty value here.
			b.WriteByte('_')
			b.WriteString(e.Value)
			continue
		case lv.wildcard && !lv.share && lv.valueToMetric:
			v = e.Value
		case lv.wildcard:
			v = lv.value
		case lv.value != "": // an exact value
			v = e.Value
		case lv.valueToMetric: // key-only
			v = e.Value
		}
		if v != "" {
			b.WriteByte('_')
			b.WriteString(v)
		}
	}
	return b.String()
}

// wildcardShared reports whether a share_threshold wildcard matched one of
// entries (rather than the entry carrying the pattern itself as its value).
func wildcardShared(levels []levelInfo, entries []Entry) bool {
	for i, lv := range levels {
		if lv.share && entries[i].Value != lv.value {
			return true
		}
	}
	return false
}
