package engine

import (
	"log/slog"
	"sync"
)

// maxLoggedDomains bounds the unknown domains remembered for logging each
// once, since requests choose them.
const maxLoggedDomains = 1024

// unknownDomains remembers which unknown domains were logged.
type unknownDomains struct {
	mu     sync.Mutex
	logged map[string]struct{}
	full   bool
}

// unknownDomain counts a request for an unconfigured domain and logs the
// domain the first time it is seen.
func (e *Engine) unknownDomain(domain string) {
	e.stats.unknownDomain.Add(1)
	u := &e.unknown
	u.mu.Lock()
	_, seen := u.logged[domain]
	first, full := false, false
	if !seen && !u.full {
		if u.logged == nil {
			u.logged = make(map[string]struct{})
		}
		if len(u.logged) < maxLoggedDomains {
			u.logged[domain] = struct{}{}
			first = true
		} else {
			u.full, full = true, true
		}
	}
	u.mu.Unlock()
	switch {
	case first:
		e.log.Warn("request for a domain the configuration does not have; answered OK with no limit", slog.String("domain", domain))
	case full:
		e.log.Warn("more unknown domains than are logged; not logging further ones", slog.Int("logged", maxLoggedDomains))
	}
}

// forgetUnknownDomains lets domains that a new configuration still lacks
// be logged again.
func (e *Engine) forgetUnknownDomains() {
	u := &e.unknown
	u.mu.Lock()
	u.logged, u.full = nil, false
	u.mu.Unlock()
}
