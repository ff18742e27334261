package engine

import "sync/atomic"

// Stats are the engine's counters since New.
type Stats struct {
	// Requests by outcome: granted (OK), denied (OverLimit), refused as
	// invalid, refused for an unknown domain (Options.UnknownDomainError),
	// and not decided because the limiter could not (Unavailable; of
	// those, FailedOpen were answered OK).
	Granted, Denied, Invalid, UnknownDomainErrors, Unavailable, FailedOpen uint64
	// UnknownDomain counts requests answered OK because their domain is
	// not configured.
	UnknownDomain uint64
	// Descriptors by outcome: no rule matched, replaced, unlimited, within
	// their limit, over it, and over a shadow_mode rule's limit (reported
	// OK).
	Unmatched, Replaced, Unlimited, WithinLimit, OverLimit, ShadowOverLimit uint64
	// Overrides is the number of distinct limit overrides accepted.
	Overrides int
}

type counters struct {
	granted, denied, invalid, unknownDomainErrors, unavailable, failedOpen atomic.Uint64
	unknownDomain                                                          atomic.Uint64
	unmatched, replaced, unlimited, within, over, shadowOver               atomic.Uint64
}

// Stats returns the counters.
func (e *Engine) Stats() Stats {
	c := &e.stats
	return Stats{
		Granted: c.granted.Load(), Denied: c.denied.Load(), Invalid: c.invalid.Load(),
		UnknownDomainErrors: c.unknownDomainErrors.Load(), Unavailable: c.unavailable.Load(),
		FailedOpen: c.failedOpen.Load(), UnknownDomain: c.unknownDomain.Load(),
		Unmatched: c.unmatched.Load(), Replaced: c.replaced.Load(), Unlimited: c.unlimited.Load(),
		WithinLimit: c.within.Load(), OverLimit: c.over.Load(), ShadowOverLimit: c.shadowOver.Load(),
		Overrides: e.over.count(),
	}
}

// countStatuses adds a decided request's descriptors to the counters.
func (c *counters) countStatuses(sts []Status) {
	for i := range sts {
		st := &sts[i]
		switch {
		case st.Kind == Unlimited:
			c.unlimited.Add(1)
		case st.Replaced:
			c.replaced.Add(1)
		case st.Kind == NoLimit:
			c.unmatched.Add(1)
		case st.Shadowed:
			c.shadowOver.Add(1)
		case st.Code == OverLimit:
			c.over.Add(1)
		default:
			c.within.Add(1)
		}
	}
}
