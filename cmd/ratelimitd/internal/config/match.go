package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// level is one list of sibling descriptors, by key.
type level map[string]*keyRules

// keyRules are the descriptors of one key among siblings.
type keyRules struct {
	exact    map[string]*node // by value, wildcard patterns included as text
	wildcard []*node          // values with a '*', in configuration order
	keyOnly  *node
}

// node is one descriptor of the tree.
type node struct {
	key, value string
	parts      []string // value split at '*', for a wildcard
	file       string
	line       int
	limit      *Limit
	children   level
}

// lookup finds the descriptor e selects among the siblings of lv: the one
// with e's value, else the first wildcard e's value matches, else the
// key-only one.
func (lv level) lookup(e Entry) *node {
	kr := lv[e.Key]
	if kr == nil {
		return nil
	}
	if n := kr.exact[e.Value]; n != nil {
		return n
	}
	for _, n := range kr.wildcard {
		if wildcardMatch(n.parts, e.Value) {
			return n
		}
	}
	return kr.keyOnly
}

// wildcardMatch reports whether value matches the pattern split at its
// '*'s into parts: each '*' stands for any run of bytes, empty included.
func wildcardMatch(parts []string, value string) bool {
	last := len(parts) - 1
	if !strings.HasPrefix(value, parts[0]) {
		return false
	}
	value = value[len(parts[0]):]
	if !strings.HasSuffix(value, parts[last]) {
		return false
	}
	value = value[:len(value)-len(parts[last])]
	for _, part := range parts[1:last] {
		i := strings.Index(value, part)
		if i < 0 {
			return false
		}
		value = value[i+len(part):]
	}
	return true
}

// Match finds the rule that applies to the descriptor entries in domain,
// as envoyproxy/ratelimit does: level by level, the sibling with the
// entry's key and value, else the first (in configuration order) whose
// wildcard value matches, else the key-only one, without going back to try
// another sibling if a deeper level fails; the rule is the descriptor the
// last entry reaches, when it has a rate_limit. A descriptor longer or
// shorter than the path to a rule, an unknown domain, and no entries match
// nothing (false). Match allocates only Key, and StatsKey when
// detailed_metric or value_to_metric make it depend on the values.
func (c *Config) Match(domain string, entries []Entry) (Match, bool) {
	d := c.domains[domain]
	if d == nil || len(entries) == 0 {
		return Match{}, false
	}
	lv := d.root
	var n *node
	for i, e := range entries {
		if n = lv.lookup(e); n == nil {
			return Match{}, false
		}
		if i < len(entries)-1 {
			if len(n.children) == 0 {
				return Match{}, false
			}
			lv = n.children
		}
	}
	if n.limit == nil {
		return Match{}, false
	}
	return Match{Limit: n.limit, Key: bucketKey(n.limit.levels, entries), StatsKey: n.limit.statsKey(entries)}, true
}

// Replaced reports, for the limits a request's descriptors matched (nil
// where one matched nothing), which ones another matched limit's Replaces
// drops: those whose RuleName some matched limit, unlimited ones included,
// names in Replaces. A replaced limit applies no limit to its descriptor.
func Replaced(limits []*Limit) []bool {
	var names map[string]bool
	for _, l := range limits {
		if l == nil {
			continue
		}
		for _, r := range l.Replaces {
			if names == nil {
				names = make(map[string]bool)
			}
			names[r] = true
		}
	}
	out := make([]bool, len(limits))
	if names == nil {
		return out
	}
	for i, l := range limits {
		out[i] = l != nil && l.RuleName != "" && names[l.RuleName]
	}
	return out
}

// OverrideLimit returns the limit a request sets for the descriptor entries
// of domain with its own override (Envoy's RateLimitDescriptor.limit),
// which envoyproxy/ratelimit applies instead of any rule, but only in a
// configured domain (Config.HasDomain): a fixed window of requestsPerUnit
// per multiplier units from the Unix epoch (multiplier 0 means 1), without
// shadow mode, name or replaces; Blocked when requestsPerUnit is 0. A unit
// outside the enum, UnitUnknown, or a period past 100 years is
// ErrInvalidOverride.
func OverrideLimit(domain string, entries []Entry, requestsPerUnit uint32, unit Unit, multiplier uint32) (Match, error) {
	if multiplier == 0 {
		multiplier = 1
	}
	if unit.Duration() == 0 {
		return Match{}, fmt.Errorf("%w: unit %d", ErrInvalidOverride, int32(unit))
	}
	if unit.Duration() > maxOverridePeriod/time.Duration(multiplier) {
		return Match{}, fmt.Errorf("%w: %d x %s is longer than 100 years", ErrInvalidOverride, multiplier, unit)
	}
	l := &Limit{
		Name:            overrideName(domain, requestsPerUnit, unit, multiplier),
		Domain:          domain,
		Path:            slices.Clone(entries),
		RequestsPerUnit: requestsPerUnit,
		Unit:            unit,
		UnitMultiplier:  multiplier,
		Blocked:         requestsPerUnit == 0,
		StatsKey:        staticStatsKey(domain, entries),
	}
	if !l.Blocked {
		rate := float64(requestsPerUnit)
		l.Config = ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: rate, Period: time.Duration(multiplier) * unit.Duration(),
			Capacity: rate, Shards: 1, Start: time.Unix(0, 0)}
	}
	return Match{Limit: l, Key: bucketKey(nil, entries), StatsKey: l.StatsKey}, nil
}

// maxOverridePeriod bounds an override's period.
const maxOverridePeriod = 100 * 365 * 24 * time.Hour
