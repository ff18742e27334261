package redislimit

import "errors"

// ErrServerConfig: Open refuses a server whose settings let it lose or
// evict buckets (the error names the setting and the Option that accepts
// it), or whose settings it cannot read.
var ErrServerConfig = errors.New("redislimit: server settings unsafe for a rate limiter")
