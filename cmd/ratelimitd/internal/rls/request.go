package rls

import (
	"fmt"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// Request converts req into out, reusing out's memory. It fails, wrapping
// engine.ErrInvalidRequest, for what the engine cannot take: a
// descriptor with is_negative_hits (a refund is an operator's credit,
// not a request's) and more descriptors or entries than maxDescriptors
// and maxEntries (checked before anything is copied).
func Request(req *rlsv3.RateLimitRequest, out *engine.Request, maxDescriptors, maxEntries int) error {
	ds := req.GetDescriptors()
	if len(ds) > maxDescriptors {
		return fmt.Errorf("%w: %d descriptors, more than %d", engine.ErrInvalidRequest, len(ds), maxDescriptors)
	}
	out.Domain, out.Reserve, out.CheckOnly = req.GetDomain(), false, false
	hits := uint64(max(req.GetHitsAddend(), 1))
	if cap(out.Descriptors) < len(ds) {
		out.Descriptors = make([]engine.Descriptor, len(ds))
	}
	out.Descriptors = out.Descriptors[:len(ds)]
	for i, d := range ds {
		o := &out.Descriptors[i]
		es := d.GetEntries()
		if len(es) > maxEntries {
			return fmt.Errorf("%w: descriptor %d: %d entries, more than %d", engine.ErrInvalidRequest, i, len(es), maxEntries)
		}
		if d.GetIsNegativeHits() {
			return fmt.Errorf("%w: descriptor %d: is_negative_hits is not supported (credit tokens through the admin API)", engine.ErrInvalidRequest, i)
		}
		o.Entries = o.Entries[:0]
		for _, e := range es {
			o.Entries = append(o.Entries, config.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		o.Hits = hits
		if h := d.GetHitsAddend(); h != nil {
			o.Hits = h.GetValue()
		}
		o.Override = nil
		if l := d.GetLimit(); l != nil {
			o.Override = &engine.Override{RequestsPerUnit: l.GetRequestsPerUnit(), Unit: config.Unit(l.GetUnit()),
				Multiplier: l.GetUnitMultiplier().GetValue()}
		}
	}
	return nil
}
