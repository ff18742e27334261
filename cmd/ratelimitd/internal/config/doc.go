// Package config loads ratelimitd's rate limit rules, written in
// envoyproxy/ratelimit's YAML format with a few extensions, and matches
// Envoy rate limit descriptors against them as envoyproxy/ratelimit does.
//
// # Basics
//
// Load reads a file, or a directory of files, one domain each; Parse does
// the same from bytes. The result, a *Config, is immutable: a reload loads
// a new one. Config.Match takes a domain and one descriptor (its entries
// in order) and returns the rule that applies, as a Match: the *Limit (the
// rule: its limiter configuration, the numbers Envoy's current_limit
// reports, and its flags), the bucket Key that identifies the descriptor's
// counter within the limit, and envoyproxy/ratelimit's stats key.
// Replaced applies rate_limit.replaces across the descriptors of one
// request; OverrideLimit turns a request's own limit override into a
// Match.
//
// # Files
//
// A directory is read recursively, in lexical order, every regular file
// whatever its extension, as envoyproxy/ratelimit reads its runtime
// directory, except that names starting with '.' are skipped (theirs reads
// them unless RUNTIME_IGNOREDOTFILES is set, so that editor and Kubernetes
// ConfigMap files become configuration there). Symbolic links are followed.
// A domain configured in two files is an error, unless
// Options.MergeDomains (their MERGE_DOMAIN_CONFIG) merges the files'
// descriptors.
//
// # The format
//
//	domain: messaging            # required, one per file
//	descriptors:
//	  - key: message_type        # required
//	    value: marketing         # optional; '*' anywhere matches any run of bytes
//	    descriptors:             # nested descriptors, matched against later entries
//	      - key: to_number
//	        rate_limit:
//	          unit: day          # second, minute, hour, day, week, month (30 days), year (365 days)
//	          requests_per_unit: 5
//	          name: marketing    # optional; what replaces refers to
//	          replaces:          # optional; drop these named rules from a request that matches this one
//	            - name: other
//	          unlimited: false   # true: allow everything, count nothing (no unit then)
//	        shadow_mode: false   # report OK even when over the limit
//	        quota_mode: false    # over the limit only when every quota descriptor is
//	        detailed_metric: false
//	        value_to_metric: false
//	        share_threshold: false # with a wildcard value: every matching value shares one counter
//	        metadata: {}         # returned in the response's dynamic metadata
//
// Flags, metadata and the stats options take effect on the descriptor that
// has the rate_limit (metadata, shadow_mode, quota_mode, detailed_metric)
// or on the levels of its path (value_to_metric, share_threshold). A
// descriptor without rate_limit and without nested descriptors exempts the
// values it matches. requests_per_unit 0 denies every request (Blocked).
// Units are fixed windows aligned to the Unix epoch: a minute limit
// counts from each whole minute since 1970.
//
// # Extensions
//
// Inside rate_limit, ratelimitd also accepts:
//
//	rate_limit:
//	  algorithm: token_bucket  # or fixed_window, the default (theirs)
//	  period: 90s              # instead of unit: any Go duration
//	  requests_per_unit: 30    # tokens added per period (per unit)
//	  capacity: 60             # the most tokens a bucket holds (the burst); default requests_per_unit
//	  max_reserved: 10         # the most debt a reservation may leave; default 0, unlimited
//	  shards: 4                # split each key's bucket in 4; default 1
//
// A fixed window with a period is aligned to the Unix epoch too. A token
// bucket refills continuously, requests_per_unit per period, up to
// capacity. Reservations are made through ratelimitd's own API; Envoy's
// protocol never reserves.
//
// # Matching
//
// For each entry of the descriptor in turn, among the descriptors of the
// current level with the entry's key: the one with the entry's value; else
// the first, in file order, whose wildcard value matches it; else the one
// without a value. Nothing found, or a descriptor with no nested ones
// before the last entry, is no match: there is no backtracking to a less
// specific sibling. The rule is the descriptor the last entry reaches, if
// it has a rate_limit. So a descriptor longer or shorter than the path to
// a rule matches nothing, and an exact value without rate_limit exempts it
// even where a wildcard or key-only sibling would limit it.
//
// # Names and keys
//
// A Limit's Name identifies it to the limiter: its path,
// "DOMAIN.KEY=VALUE.KEY" (a key-only level has no "="), whether or not it
// has a rate_limit.name (which only replaces uses, so that adding one
// keeps the rule's buckets, and rules may share one whatever their
// limits), and for a request's override "DOMAIN!5/minute" (or
// "DOMAIN!5/30second" with a unit multiplier). A Match's Key is
// "KEY=VALUE.KEY=VALUE" over every entry of the descriptor, with the
// share_threshold pattern in place of values it pools. In domains, keys and
// values, '\', '.', '=', ':' and '!' are escaped by a '\', so that distinct
// rules get distinct names and distinct descriptors distinct keys.
//
// # Differences from envoyproxy/ratelimit
//
// envoyproxy/ratelimit compares "KEY_VALUE" strings, so there a rule
// key: user, value: "a*" also matches the entry user_agent=x, and a rule
// key: to, value: number matches the entry to_number=x. Here a key matches
// only itself, and a '*' in a key is refused rather than treated as a
// wildcard.
//
// Refused here, accepted there: a field in the wrong place (theirs accepts
// any of its field names anywhere and ignores the misplaced ones), a
// rate_limit without requests_per_unit (theirs reads 0 and denies
// everything), a unit given with unlimited: true when it is not a valid
// unit, a second YAML document in a file. Accepted here, refused there:
// floating-point numbers as keys or values, and siblings whose "KEY_VALUE"
// strings coincide (key a, value b_c next to key a_b, value c).
//
// # Errors
//
// Every problem is an *Error naming the file, the line and the field, and
// wrapping one of the sentinels (ErrSyntax, ErrUnknownField,
// ErrMissingField, ErrInvalidValue, ErrDuplicate, ErrUnsupported, ErrRead),
// for example:
//
//	limits/api.yaml:12: rate_limit.unit: unknown unit "fortnight" (second, minute, hour, day, week, month or year)
//
// Load and Parse report every problem they find, up to 20, joined.
package config
