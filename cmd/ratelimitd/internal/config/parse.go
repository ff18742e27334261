package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"go.yaml.in/yaml/v3"
)

// The fields each mapping takes. The rest of envoyproxy/ratelimit's flat
// list of valid keys is refused where it does not belong.
var (
	rootFields       = []string{"domain", "descriptors"}
	descriptorFields = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode",
		"detailed_metric", "value_to_metric", "share_threshold", "metadata"}
	rateLimitFields = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces",
		"algorithm", "period", "capacity", "max_reserved", "shards"}
	replacesFields = []string{"name"}
)

// parser reads one file's YAML into the configuration being built.
type parser struct {
	file  string
	errs  *errorList
	descs int // descriptors parsed, each use of an alias counted
}

// maxDescriptors bounds the descriptors of one file, counted after YAML
// aliases are expanded, so that a few lines of nested aliases cannot make
// a load take exponential time and memory.
const maxDescriptors = 100_000

func (p *parser) fail(n *yaml.Node, field string, sentinel error, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	p.errs.add(p.file, line, field, sentinel, format, args...)
}

// rawDescriptor is a parsed descriptor, before it joins a domain's tree.
type rawDescriptor struct {
	key, value string
	line       int
	keyNode    *yaml.Node
	rateLimit  *rawRateLimit
	children   []*rawDescriptor
	shadow     bool
	quota      bool
	detailed   bool
	valueToMet bool
	share      bool
	metadata   map[string]any
}

// rawRateLimit is a parsed rate_limit block, validated on its own.
type rawRateLimit struct {
	node            *yaml.Node
	name            string
	replaces        []string
	replaceNodes    []*yaml.Node
	unlimited       bool
	blocked         bool
	requestsPerUnit uint32
	unit            Unit
	multiplier      uint32
	cfg             ratelimit.Config
}

// rawFile is a parsed file.
type rawFile struct {
	domain      string
	domainNode  *yaml.Node
	descriptors []*rawDescriptor
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseFile parses one file's bytes; nil when the file has no usable
// domain (the problems are in p.errs).
func (p *parser) parseFile(data []byte) *rawFile {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.fail(nil, "domain", ErrMissingField, "the file has no content")
		} else {
			p.syntaxError(err)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		p.syntaxError(err)
		return nil
	case !isNull(&extra):
		p.fail(extra.Content[0], "", ErrUnsupported, "a second YAML document (---): one file holds one domain")
	}
	root := doc.Content[0]
	if isNull(root) {
		p.fail(root, "domain", ErrMissingField, "the file has no content")
		return nil
	}
	pairs, ok := p.mapping(root, "", "the file must be a mapping with domain and descriptors")
	if !ok {
		return nil
	}
	f := &rawFile{}
	for _, kv := range pairs {
		switch kv.name {
		case "domain":
			f.domain, _ = p.str(kv.value, "domain")
			f.domainNode = kv.value
		case "descriptors":
			f.descriptors = p.descriptors(kv.value, "descriptors")
		default:
			p.unknown(kv, "", rootFields)
		}
	}
	if f.domain == "" {
		line := root
		if f.domainNode != nil {
			line = f.domainNode
		}
		p.fail(line, "domain", ErrMissingField, "a file must name its domain")
		return nil
	}
	return f
}

// syntaxError reports a YAML parse error, with its line when it has one.
func (p *parser) syntaxError(err error) {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		p.errs.add(p.file, line, "", ErrSyntax, "%s", m[2])
		return
	}
	p.errs.add(p.file, 0, "", ErrSyntax, "%s", strings.TrimPrefix(msg, "yaml: "))
}

// descriptors parses a list of descriptors; field names the list.
func (p *parser) descriptors(n *yaml.Node, field string) []*rawDescriptor {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, field, ErrSyntax, "must be a list of descriptors")
		return nil
	}
	var ds []*rawDescriptor
	for _, item := range n.Content {
		if p.descs++; p.descs > maxDescriptors {
			if p.descs == maxDescriptors+1 {
				p.fail(item, field, ErrInvalidValue, "more than %d descriptors in one file (each use of an alias counts)", maxDescriptors)
			}
			return ds
		}
		if d := p.descriptor(item); d != nil {
			ds = append(ds, d)
		}
	}
	return ds
}

func (p *parser) descriptor(n *yaml.Node) *rawDescriptor {
	pairs, ok := p.mapping(n, "", "each descriptor must be a mapping with a key")
	if !ok {
		return nil
	}
	d := &rawDescriptor{line: deref(n).Line}
	var shareNode *yaml.Node
	keyOK := true
	for _, kv := range pairs {
		v := kv.value
		switch kv.name {
		case "key":
			d.key, keyOK = p.str(v, "key")
			d.keyNode = v
		case "value":
			d.value, _ = p.str(v, "value")
		case "rate_limit":
			d.rateLimit = p.rateLimit(v)
		case "descriptors":
			d.children = p.descriptors(v, "descriptors")
		case "shadow_mode":
			d.shadow = p.flag(v, "shadow_mode")
		case "quota_mode":
			d.quota = p.flag(v, "quota_mode")
		case "detailed_metric":
			d.detailed = p.flag(v, "detailed_metric")
		case "value_to_metric":
			d.valueToMet = p.flag(v, "value_to_metric")
		case "share_threshold":
			d.share = p.flag(v, "share_threshold")
			shareNode = v
		case "metadata":
			d.metadata = p.metadata(v)
		default:
			p.unknown(kv, "", descriptorFields)
		}
	}
	switch {
	case !keyOK:
		return nil
	case d.key == "":
		at := n
		if d.keyNode != nil {
			at = d.keyNode
		}
		p.fail(at, "key", ErrMissingField, "a descriptor must have a key")
		return nil
	case strings.Contains(d.key, "*"):
		p.fail(d.keyNode, "key", ErrUnsupported, "%q: a '*' in a key; wildcards match values only", d.key)
		return nil
	case d.share && !strings.Contains(d.value, "*"):
		p.fail(shareNode, "share_threshold", ErrInvalidValue, "only for a wildcard value (with a '*'), not %q", d.value)
	}
	return d
}

// rateLimit parses a rate_limit block; nil for a null block (no limit, as
// in envoyproxy/ratelimit) or a block with problems.
func (p *parser) rateLimit(n *yaml.Node) *rawRateLimit {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	before := p.errs.count()
	pairs, ok := p.mapping(n, "rate_limit", "must be a mapping")
	if !ok {
		return nil
	}
	rl := &rawRateLimit{node: n}
	fields := make(map[string]*yaml.Node) // the other fields given, not null
	for _, kv := range pairs {
		switch {
		case kv.name == "name":
			rl.name, _ = p.str(kv.value, "rate_limit.name")
		case kv.name == "replaces":
			rl.replaces, rl.replaceNodes = p.replaces(kv.value)
		case kv.name == "unlimited":
			rl.unlimited = p.flag(kv.value, "rate_limit.unlimited")
		case !contains(rateLimitFields, kv.name):
			p.unknown(kv, "rate_limit.", rateLimitFields)
		case !isNull(kv.value):
			fields[kv.name] = kv.value
		}
	}
	for i, r := range rl.replaces {
		if r == rl.name {
			p.fail(rl.replaceNodes[i], fmt.Sprintf("rate_limit.replaces[%d].name", i), ErrInvalidValue,
				"a rule cannot replace itself (%q)", r)
		}
	}
	if p.errs.count() > before {
		return nil
	}
	if rl.unlimited {
		if n := fields["unit"]; n != nil && n.Kind == yaml.ScalarNode {
			if _, ok := ParseUnit(n.Value); !ok {
				delete(fields, "unit") // not a unit: ignored, as envoyproxy/ratelimit ignores it
			}
		}
		if !p.refuse(fields, "not with unlimited: true", "unit", "period", "algorithm", "capacity", "max_reserved", "shards") {
			return nil
		}
		return rl
	}
	if !p.limit(rl, fields) {
		return nil
	}
	return rl
}

// refuse reports each of names given in fields; it returns whether there
// was none.
func (p *parser) refuse(fields map[string]*yaml.Node, why string, names ...string) bool {
	ok := true
	for _, name := range names {
		if n := fields[name]; n != nil {
			p.fail(n, "rate_limit."+name, ErrInvalidValue, "%s", why)
			ok = false
		}
	}
	return ok
}

// limit reads the fields of a rate_limit that limits into rl; it reports
// whether they were valid.
func (p *parser) limit(rl *rawRateLimit, fields map[string]*yaml.Node) bool {
	period, ok := p.period(rl, fields)
	if !ok {
		return false
	}
	rpu := fields["requests_per_unit"]
	if rpu == nil {
		p.fail(rl.node, "rate_limit.requests_per_unit", ErrMissingField,
			"a limit needs requests_per_unit (0 denies every request)")
		return false
	}
	u, ok := p.uint(rpu, "rate_limit.requests_per_unit", math.MaxUint32)
	if !ok {
		return false
	}
	rl.requestsPerUnit = uint32(u)
	if rl.requestsPerUnit == 0 {
		rl.blocked = true
		return p.refuse(fields, "not with requests_per_unit: 0, which denies every request",
			"algorithm", "capacity", "max_reserved", "shards")
	}
	cfg := ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: float64(rl.requestsPerUnit), Period: period,
		Capacity: float64(rl.requestsPerUnit), Shards: 1}
	if n := fields["algorithm"]; n != nil {
		switch alg, _ := p.str(n, "rate_limit.algorithm"); alg {
		case "fixed_window":
		case "token_bucket":
			cfg.Kind = ratelimit.TokenBucket
		default:
			p.fail(n, "rate_limit.algorithm", ErrInvalidValue, "unknown algorithm %q (fixed_window or token_bucket)", alg)
			return false
		}
	}
	if cfg.Kind == ratelimit.FixedWindow {
		cfg.Start = time.Unix(0, 0)
	}
	if n := fields["capacity"]; n != nil {
		if cfg.Capacity, ok = p.number(n, "rate_limit.capacity"); !ok {
			return false
		}
		if cfg.Capacity <= 0 {
			p.fail(n, "rate_limit.capacity", ErrInvalidValue, "%v must be > 0 (leave it out for requests_per_unit)",
				cfg.Capacity)
			return false
		}
	}
	if n := fields["max_reserved"]; n != nil {
		if cfg.MaxReserved, ok = p.number(n, "rate_limit.max_reserved"); !ok {
			return false
		}
		if cfg.MaxReserved < 0 {
			p.fail(n, "rate_limit.max_reserved", ErrInvalidValue, "%v must be >= 0", cfg.MaxReserved)
			return false
		}
	}
	if n := fields["shards"]; n != nil {
		s, ok := p.uint(n, "rate_limit.shards", ratelimit.MaxShards)
		if !ok {
			return false
		}
		if s < 1 {
			p.fail(n, "rate_limit.shards", ErrInvalidValue, "%d must be >= 1", s)
			return false
		}
		cfg.Shards = int(s)
	}
	rl.cfg = cfg
	return true
}

// period reads a limit's unit or period into rl and returns its length.
func (p *parser) period(rl *rawRateLimit, fields map[string]*yaml.Node) (time.Duration, bool) {
	unitNode, periodNode := fields["unit"], fields["period"]
	switch {
	case unitNode != nil && periodNode != nil:
		p.fail(periodNode, "rate_limit.period", ErrInvalidValue, "give unit or period, not both")
	case unitNode != nil:
		text, ok := p.str(unitNode, "rate_limit.unit")
		if !ok {
			return 0, false
		}
		u, known := ParseUnit(text)
		if !known {
			p.fail(unitNode, "rate_limit.unit", ErrInvalidValue,
				"unknown unit %q (second, minute, hour, day, week, month or year)", text)
			return 0, false
		}
		rl.unit, rl.multiplier = u, 1
		return u.Duration(), true
	case periodNode != nil:
		text, ok := p.str(periodNode, "rate_limit.period")
		if !ok {
			return 0, false
		}
		d, err := time.ParseDuration(text)
		if err != nil || d <= 0 {
			p.fail(periodNode, "rate_limit.period", ErrInvalidValue,
				"%q is not a positive duration such as 500ms, 90s or 1h30m", text)
			return 0, false
		}
		rl.unit, rl.multiplier = unitFor(d)
		return d, true
	default:
		p.fail(rl.node, "rate_limit.unit", ErrMissingField,
			"a limit needs a unit (second, minute, hour, day, week, month, year) or a period")
	}
	return 0, false
}

// replaces parses rate_limit.replaces: a list of {name: NAME}. It returns
// the names and the nodes that give them.
func (p *parser) replaces(n *yaml.Node) ([]string, []*yaml.Node) {
	n = deref(n)
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "rate_limit.replaces", ErrSyntax, "must be a list of {name: NAME}")
		return nil, nil
	}
	var names []string
	var nodes []*yaml.Node
	for i, item := range n.Content {
		field := fmt.Sprintf("rate_limit.replaces[%d]", i)
		before := p.errs.count()
		pairs, ok := p.mapping(item, field, "must be a mapping {name: NAME}")
		if !ok {
			continue
		}
		name, at := "", deref(item)
		for _, kv := range pairs {
			if kv.name == "name" {
				name, _ = p.str(kv.value, field+".name")
				at = kv.value
			} else {
				p.unknown(kv, field+".", replacesFields)
			}
		}
		if p.errs.count() > before {
			continue
		}
		if name == "" {
			p.fail(at, field+".name", ErrMissingField, "a replaces entry must name the rule it replaces")
			continue
		}
		names = append(names, name)
		nodes = append(nodes, at)
	}
	return names, nodes
}

// metadata decodes a descriptor's metadata mapping into plain Go values.
func (p *parser) metadata(n *yaml.Node) map[string]any {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n, "metadata", ErrSyntax, "must be a mapping")
		return nil
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		p.fail(n, "metadata", ErrSyntax, "%v", err)
		return nil
	}
	if len(m) == 0 {
		return nil
	}
	return plainMap(m)
}

// plainMap converts decoded YAML into the value types Metadata documents:
// map keys become strings (as envoyproxy/ratelimit formats them), and other
// scalars (timestamps) their text.
func plainMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = plainValue(v)
	}
	return out
}

func plainValue(v any) any {
	switch v := v.(type) {
	case nil, string, bool, int, float64:
		return v
	case map[string]any:
		return plainMap(v)
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(k)] = plainValue(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = plainValue(e)
		}
		return out
	default:
		return fmt.Sprint(v)
	}
}

// pair is one field of a mapping.
type pair struct {
	name       string
	key, value *yaml.Node
}

// mapping returns the fields of the mapping n, following aliases and merge
// keys (<<); a null n has none. field and what describe n in errors.
func (p *parser) mapping(n *yaml.Node, field, what string) ([]pair, bool) {
	n = deref(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n, field, ErrSyntax, "%s, not %s", what, kindName(n))
		return nil, false
	}
	var pairs, merged []pair
	seen := make(map[string]*yaml.Node)
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, p.mergeSources(v, field)...)
			continue
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			p.fail(k, field, ErrSyntax, "field names must be strings, not %s", describe(k))
			ok = false
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			p.fail(k, joinField(field, k.Value), ErrDuplicate, "given twice (first at line %d)", prev.Line)
			ok = false
			continue
		}
		seen[k.Value] = k
		pairs = append(pairs, pair{name: k.Value, key: k, value: v})
	}
	for _, m := range merged {
		if _, dup := seen[m.name]; !dup {
			seen[m.name] = m.key
			pairs = append(pairs, m)
		}
	}
	return pairs, ok
}

// mergeSources returns the fields a merge key (<<) brings: from one
// mapping, or from a list of them, the earlier winning.
func (p *parser) mergeSources(v *yaml.Node, field string) []pair {
	v = deref(v)
	var sources []*yaml.Node
	switch v.Kind {
	case yaml.MappingNode:
		sources = []*yaml.Node{v}
	case yaml.SequenceNode:
		sources = v.Content
	default:
		p.fail(v, field, ErrSyntax, "a merge (<<) takes a mapping or a list of mappings")
		return nil
	}
	var out []pair
	have := make(map[string]bool)
	for _, s := range sources {
		pairs, _ := p.mapping(s, field, "a merge (<<) takes mappings")
		for _, kv := range pairs {
			if !have[kv.name] {
				have[kv.name] = true
				out = append(out, kv)
			}
		}
	}
	return out
}

// unknown reports a field that does not belong; prefix is the field path
// of the mapping ("" or "rate_limit.").
func (p *parser) unknown(kv pair, prefix string, allowed []string) {
	hint := ""
	switch {
	case contains(allowed, kv.name):
	case contains(rootFields, kv.name):
		hint = " (it belongs at the top of the file)"
	case contains(descriptorFields, kv.name):
		hint = " (it belongs in a descriptor)"
	case contains(rateLimitFields, kv.name):
		hint = " (it belongs in rate_limit)"
	default:
		if s := suggest(kv.name, allowed); s != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", s)
		}
	}
	p.fail(kv.key, prefix+kv.name, ErrUnknownField, "not a field here%s; expected one of %s",
		hint, strings.Join(allowed, ", "))
}

// suggest returns the field of allowed that name most likely misspells,
// or "".
func suggest(name string, allowed []string) string {
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s)) }
	best, bestDist := "", 3
	for _, a := range allowed {
		if norm(a) == norm(name) {
			return a
		}
		if d := editDistance(name, a); d < bestDist {
			best, bestDist = a, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// str reads a scalar as text, as envoyproxy/ratelimit does: numbers and
// flags keep their written form; null is "".
func (p *parser) str(n *yaml.Node, field string) (string, bool) {
	n = deref(n)
	if isNull(n) {
		return "", true
	}
	if n.Kind != yaml.ScalarNode {
		p.fail(n, field, ErrSyntax, "must be a string, not %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

// yaml11Bools are the flag spellings of YAML 1.1, which
// envoyproxy/ratelimit's parser (gopkg.in/yaml.v2) accepts.
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
}

// flag reads a boolean; null is false.
func (p *parser) flag(n *yaml.Node, field string) bool {
	n = deref(n)
	if isNull(n) {
		return false
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!bool":
			var b bool
			if n.Decode(&b) == nil {
				return b
			}
		case "!!str":
			if b, ok := yaml11Bools[n.Value]; ok && n.Style == 0 {
				return b
			}
		}
	}
	p.fail(n, field, ErrSyntax, "must be true or false, not %s", describe(n))
	return false
}

// uint reads a non-negative integer no larger than max; null is 0.
func (p *parser) uint(n *yaml.Node, field string, max uint64) (uint64, bool) {
	n = deref(n)
	if isNull(n) {
		return 0, true
	}
	var u uint64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&u) != nil {
		p.fail(n, field, ErrSyntax, "must be a whole number from 0 to %d, not %s", max, describe(n))
		return 0, false
	}
	if u > max {
		p.fail(n, field, ErrInvalidValue, "%d is larger than %d", u, max)
		return 0, false
	}
	return u, true
}

// number reads a finite number; null is 0.
func (p *parser) number(n *yaml.Node, field string) (float64, bool) {
	n = deref(n)
	if isNull(n) {
		return 0, true
	}
	var f float64
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") ||
		n.Decode(&f) != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		p.fail(n, field, ErrSyntax, "must be a finite number, not %s", describe(n))
		return 0, false
	}
	return f, true
}

// deref follows aliases (*name) to the anchored node.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	if n == nil {
		return true
	}
	if n.Kind == yaml.DocumentNode {
		return len(n.Content) == 0 || isNull(n.Content[0])
	}
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return describe(n)
	}
	return "an alias"
}

// describe names a node for an error: a scalar by its text.
func describe(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return kindName(n)
	}
	return strconv.Quote(n.Value)
}

func joinField(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
