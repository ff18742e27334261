// Package server runs ratelimitd: Envoy's rate limit service (gRPC, with
// health and reflection), the HTTP port (/json, /healthcheck, /metrics
// and the native API) and the admin port, over one engine and limiter;
// configuration reloads on SIGHUP and on file change; TLS; and the
// graceful shutdown that leaves every acknowledged grant on disk.
//
// The ports, their endpoints and the metrics are documented in the
// command's package documentation (cmd/ratelimitd).
package server
