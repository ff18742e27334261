package rls

import (
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
)

// descriptor builds an Envoy descriptor of "k", "v" pairs.
func descriptor(kvs ...string) *ratelimitv3.RateLimitDescriptor {
	d := new(ratelimitv3.RateLimitDescriptor)
	for i := 0; i+1 < len(kvs); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kvs[i], Value: kvs[i+1]})
	}
	return d
}

// limits parses a configuration and returns its rules by rule path name.
func limits(t *testing.T, src string) map[string]*config.Limit {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "t.yaml", Data: []byte(src)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]*config.Limit)
	for _, l := range cfg.Limits() {
		m[l.Name] = l
	}
	return m
}
