// Command ratelimitd is a rate limit service: a drop-in for
// envoyproxy/ratelimit (Envoy's gRPC rate limit protocol and its YAML
// configuration) that decides each request all or nothing and keeps
// every grant on disk, in an embedded bbolt file or on Redis, before it
// answers.
//
// # Basics
//
//	ratelimitd serve -config rules.yaml -data ratelimitd.db
//
// serves Envoy's envoy.service.ratelimit.v3.RateLimitService (with
// grpc.health.v1 and reflection) on 127.0.0.1:8081 and HTTP on
// 127.0.0.1:8080. Point Envoy's rate_limit_service at the gRPC port with
// transport_api_version V3 and failure_mode_deny: true: ratelimitd fails
// closed, answering an error when it cannot decide, and Envoy then
// denies. -data "" keeps buckets in memory only.
//
// # Redis
//
//	ratelimitd serve -config rules.yaml -redis redis.internal:6379
//	ratelimitd serve -config rules.yaml -redis 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379
//
// keeps the buckets on Redis (7.0 or later, or Valkey; package
// redislimit) instead of a file, so that several replicas share their
// limits: every ratelimitd on the same servers with the same
// -redis-prefix (default "ratelimit:") decides as one limiter, each
// request still all or nothing. One address is a single server (an
// absolute path is its unix socket); several are Redis Cluster seeds
// (-redis-cluster makes one address a seed too, for a cluster's
// configuration endpoint). -redis excludes -data (and -max-buckets):
// given both, serve exits 2; -data's default is ignored.
//
// Credentials come from the environment, REDIS_USERNAME and
// REDIS_PASSWORD, or from -redis-username and -redis-password-file, so
// that no password is on the command line. -redis-tls connects over TLS
// (verified against the system's roots, or -redis-ca's PEM CAs).
//
// At start ratelimitd checks every master for appendonly yes,
// appendfsync always and no-appendfsync-on-rewrite no (a grant is on the
// master's disk before it is answered) and maxmemory-policy noeviction,
// and refuses to start
// otherwise. -redis-allow-not-durable and -redis-allow-eviction accept
// such servers (DANGEROUS: a Redis crash, or an eviction, forgets grants,
// and the limiter over-admits); -redis-skip-config-check skips the check
// for managed Redis without CONFIG. Replication to Redis replicas is
// asynchronous: a failover can lose the last grants. Decisions use the
// masters' clocks, not the replicas'. Replicas should serve the same
// configuration: a bucket holds tokens, and each reads it under its own
// rule (capped at its capacity).
//
// A Redis that does not answer fails requests (gRPC Unavailable, HTTP
// 503), and /healthcheck and gRPC health (which probe every master)
// report NOT_SERVING until it answers again; nothing has to be
// restarted. /v1/backup and /v1/salvage need a file: on Redis they answer
// 409 (back Redis up with its own append-only file).
//
// The configuration is envoyproxy/ratelimit's, unchanged (a file, or a
// directory of files, one domain each), with extensions inside
// rate_limit: algorithm (fixed_window, token_bucket), period (any
// duration instead of unit), capacity, max_reserved and shards. Package
// internal/config documents the format, the matching and the
// differences. Fixed windows start at the Unix epoch, as theirs do, so a
// client sees the same codes and limit_remaining for the same traffic,
// as long as no request with several descriptors is denied (theirs then
// counts the hits of every descriptor, ours takes nothing) and no
// request asks for more than a limit allows (theirs counts it).
//
// # Requests
//
// A request's descriptors are decided together: every limited descriptor
// is taken, or none is. Each status carries code, current_limit,
// limit_remaining and duration_until_reset (on a denial, the exact wait
// until the descriptor can pass). hits_addend (the request's, or a
// descriptor's own) is the count; a descriptor with hits 0 is checked,
// not taken. Hits above what a limit can ever grant are OVER_LIMIT, with
// duration_until_reset the time to the window's end (a token bucket's:
// its period), since no wait lets them pass.
// shadow_mode rules report OK over their limit and never deny; quota_mode
// descriptors deny only when all of them are over. A domain or descriptor
// no rule matches is OK, as with envoyproxy/ratelimit (an unknown domain
// is counted and logged once; -unknown-domain-error refuses it).
// A request's own limit (descriptor.limit) applies in a configured domain.
// -response-headers adds rate limit headers to response_headers_to_add.
//
// # Ports
//
// The HTTP port serves POST /json (envoyproxy/ratelimit's: a
// RateLimitRequest in proto3 JSON; 200, or 429 when over the limit),
// GET /healthcheck (200 "OK" or 500), GET /metrics (Prometheus), and the
// native API, JSON in and out, durations in seconds:
//
//	POST /v1/limit  {"domain", "descriptors": [{"entries": [{"key", "value"}], "hits"}], "hits", "reserve"}
//	                -> {"ok", "retry_after", "statuses": [{"ok", "limit", "key", "remaining", "retry_after", "reset_after", ...}]}
//	                   (200 granted, 429 denied with Retry-After)
//	POST /v1/check  the same, taking nothing
//	POST /v1/value  {"domain", "entries"} -> {"limit", "key", "value", "ts", "config"}
//
// reserve grants when tokens are short, leaving debt within the rule's
// max_reserved, and retry_after says when to run the work. The admin
// port, off unless -admin-addr is set, serves POST /v1/credit {"domain",
// "entries", "count"}, POST /v1/reset {"domain", "entries"}, GET
// /v1/backup (a consistent copy of the live file, streamed), POST
// /v1/salvage {"src", "dst"} (paths on the server), POST /v1/reload,
// GET /v1/config, /healthcheck, /metrics and /debug/pprof/. Every port
// listens on loopback unless told otherwise; -tls-cert and -tls-key serve
// them all over TLS, and -tls-client-ca requires client certificates.
//
// # Operations
//
// SIGHUP, POST /v1/reload, and a change to the configuration's files or
// the TLS files (checked every -watch-interval) reload the configuration.
// Buckets keep their state: a bucket holds tokens, and is read under its
// rule's new limit, capped at the new capacity (raising a fixed window's
// limit adds tokens from its next window on; changing shards spreads a key
// over buckets it did not use yet, which start full). A reload also reads
// the TLS files again. A configuration (or TLS files) that fails to load is refused,
// logged and counted (ratelimitd_config_reloads_total{result="failure"}),
// and the previous one keeps serving.
//
// SIGTERM or SIGINT: health reports NOT_SERVING (gRPC and /healthcheck),
// requests are still served for -drain-delay (a second signal ends it),
// calls in flight finish (up to -drain-timeout), and the limiter closes
// with every acknowledged grant on disk.
//
// When the limiter cannot decide (its file cannot be written, too many
// keys, Redis does not answer), requests fail (gRPC Unavailable, HTTP
// 503) and, once the file has failed, health reports NOT_SERVING until
// ratelimitd is restarted (on Redis, until Redis answers again).
// -fail-open answers OK instead: dangerous, since nothing is limited then.
// A new key beyond -max-buckets is refused even with -fail-open, so that a
// flood of keys cannot turn limiting off.
//
// Bad input is refused with a clear error, gRPC InvalidArgument or HTTP
// 400 (413 for a body over -max-request-bytes), before anything is
// decided: an empty domain, no descriptors, more than -max-descriptors
// descriptors or -max-entries entries, a domain, key or value longer than
// -max-entry-bytes or not valid UTF-8, hits above 2^53, is_negative_hits
// (refunds go through the admin credit), a limit override without a unit,
// and more than -max-overrides distinct overrides.
//
// # Metrics
//
// /metrics serves the limiter's metrics (ratelimit_*, see package
// ratelimitprom), the Go runtime's and the process's, and the service's:
//
//	ratelimitd_requests_total{api, result}          api: grpc, json, limit, check, value; result: ok, over_limit, invalid, unknown_domain, unavailable, canceled, internal
//	ratelimitd_descriptors_total{outcome}           within_limit, over_limit, shadow_over_limit, unlimited, unmatched, replaced
//	ratelimitd_unknown_domain_requests_total
//	ratelimitd_fail_open_total
//	ratelimitd_config_reloads_total{result}         success, failure
//	ratelimitd_config_last_reload_success           gauge
//	ratelimitd_config_last_reload_timestamp_seconds gauge
//	ratelimitd_config_rules, ratelimitd_config_domains, ratelimitd_limit_overrides, ratelimitd_healthy
//
// # File tools
//
//	ratelimitd inspect FILE      format version, snapshot and log sizes and ages, buckets per limit, problems
//	ratelimitd verify FILE       exit 0 sound, 1 damaged, 2 not checked
//	ratelimitd dump FILE         the stored buckets as JSON lines
//	ratelimitd salvage FILE NEW  what can be read of a damaged file, into a new one, with a report of what was lost
//
// Each exits 0 when done (verify: sound), 1 when the file is damaged
// (salvage: when its report lists something lost; it still writes the new
// file), 2 when it could not run (no such file, not a regular file, not a
// limiter's file at all, a newer format).
//
// They refuse a file a running ratelimitd has open; back it up through the
// admin port and use the copy.
package main
