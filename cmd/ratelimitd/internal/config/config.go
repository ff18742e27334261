package config

import (
	"slices"

	"github.com/seed7fbd42b6/ratelimit"
)

// Options configure Load and Parse. A nil *Options means the zero value.
type Options struct {
	// MergeDomains lets several files configure one domain, their
	// descriptors merged (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG=true);
	// false makes a second file for a domain an ErrDuplicate.
	MergeDomains bool
}

// Entry is one key/value pair of a descriptor. An empty Value is a value
// like any other to Match; in a Limit's Path it marks a key-only rule.
type Entry struct {
	Key, Value string
}

// Config is a loaded, validated configuration: domains of rules. It is
// immutable and safe for concurrent use. The zero value has no domains.
type Config struct {
	domains map[string]*domain
	limits  []*Limit // every rule with a rate_limit, in load order
	files   []string
}

type domain struct {
	name string
	root level
	file string // the first file that configured it
	line int
}

// Limit is one rule: a descriptor with a rate_limit block. It is shared by
// every Match of the rule and must not be modified.
type Limit struct {
	// Name identifies the limit to the limiter (a key of
	// ratelimit.Options.Limits): the domain and the rule's path
	// ("DOMAIN.KEY=VALUE.KEY"), with '\', '.', '=', ':' and '!' in the
	// domain, keys and values escaped by a '\'; never RuleName, so that
	// adding or changing one keeps the rule's buckets. Each rule has its
	// own.
	Name string
	// RuleName is rate_limit.name, "" when unset: what rate_limit.replaces
	// refers to, and the name Envoy's RateLimit.name carries.
	RuleName string
	Domain   string
	// Path is the rule's descriptor path from the top: each Value as
	// configured, "" for a key-only level, the pattern for a wildcard.
	Path []Entry
	File string // where the rule is defined
	Line int
	// Config is the limit's algorithm, valid for ratelimit.Open; the zero
	// Config when Unlimited or Blocked. A rule without ratelimitd's
	// extensions is a ratelimit.FixedWindow of RequestsPerUnit per Unit,
	// Start the Unix epoch, Capacity RequestsPerUnit, Shards 1. Fixed
	// windows always start at the epoch; token buckets have no Start.
	Config ratelimit.Config
	// RequestsPerUnit, Unit and UnitMultiplier are what Envoy's
	// current_limit reports: the limit is RequestsPerUnit per
	// UnitMultiplier Units. A unit-based rule has its Unit and multiplier
	// 1; a period-based one the longest unit that divides its period, or
	// UnitUnknown and 0 when the period is not a whole number of seconds.
	// Zero when Unlimited.
	RequestsPerUnit uint32
	Unit            Unit
	UnitMultiplier  uint32
	// Unlimited: rate_limit.unlimited; every request is allowed and nothing
	// is counted.
	Unlimited bool
	// Blocked: requests_per_unit is 0; every hit is over the limit (a
	// descriptor with hits 0 is within it, with nothing remaining).
	Blocked bool
	// ShadowMode, QuotaMode and DetailedMetric are the rule descriptor's
	// shadow_mode, quota_mode and detailed_metric.
	ShadowMode     bool
	QuotaMode      bool
	DetailedMetric bool
	// Replaces are the RuleNames of the rules that this one drops from a
	// request it matches in (see Replaced).
	Replaces []string
	// Metadata is the rule descriptor's metadata: maps with string keys,
	// lists, strings, bools, ints, float64s and nils; nil when unset.
	Metadata map[string]any
	// StatsKey is envoyproxy/ratelimit's stats key for the rule (its
	// FullKey, before their stats sink sanitizes it).
	StatsKey string

	levels       []levelInfo
	dynamicStats bool // DetailedMetric, or value_to_metric on the path
}

// levelInfo is what matching at one level of a rule's path means for the
// keys Match builds.
type levelInfo struct {
	key, value    string
	wildcard      bool // value has a '*'
	share         bool // share_threshold: the pattern stands for the value
	valueToMetric bool
}

// Match is the outcome of matching one descriptor.
type Match struct {
	Limit *Limit
	// Key identifies the descriptor's bucket within Limit.Name: every
	// entry's key and value, except that a value a share_threshold wildcard
	// matched is replaced by the pattern. Distinct descriptors get
	// distinct keys.
	Key string
	// StatsKey is envoyproxy/ratelimit's stats key for this descriptor:
	// Limit.StatsKey with detailed_metric and value_to_metric applied.
	StatsKey string
}

// Domains returns the configured domains, sorted.
func (c *Config) Domains() []string {
	ds := make([]string, 0, len(c.domains))
	for d := range c.domains {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds
}

// HasDomain reports whether domain is configured.
func (c *Config) HasDomain(domain string) bool {
	_, ok := c.domains[domain]
	return ok
}

// Files returns the files the configuration was loaded from, in load
// order.
func (c *Config) Files() []string { return slices.Clone(c.files) }

// Limits returns every rule that has a rate_limit, in load order.
func (c *Config) Limits() []*Limit { return slices.Clone(c.limits) }

// LimiterConfigs returns the limiter configuration of every rule that
// counts (neither Unlimited nor Blocked), by Limit.Name: what
// ratelimit.Options.Limits takes.
func (c *Config) LimiterConfigs() map[string]ratelimit.Config {
	m := make(map[string]ratelimit.Config)
	for _, l := range c.limits {
		if !l.Unlimited && !l.Blocked {
			m[l.Name] = l.Config
		}
	}
	return m
}
