// Package loadgen drives a rate limit service over gRPC (Envoy's
// envoy.service.ratelimit.v3 protocol, so ratelimitd or
// envoyproxy/ratelimit alike): N concurrent callers for a duration,
// reporting decisions per second and latency percentiles. It is what the
// benchmark harness calls; it is not part of the ratelimitd binary.
package loadgen
