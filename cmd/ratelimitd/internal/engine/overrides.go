package engine

import (
	"fmt"
	"sync"
)

// overrides bounds the distinct limits that requests' overrides create:
// the limiter keeps every inline limit it has seen.
type overrides struct {
	max  int // < 0: none allowed
	seen sync.Map
	mu   sync.Mutex // serialises additions
	n    int
}

// admit accepts the override limit named name if it was seen before or
// the bound leaves room for it.
func (o *overrides) admit(name string) error {
	if o.max < 0 {
		return fmt.Errorf("%w: limit overrides are disabled", ErrInvalidRequest)
	}
	if _, ok := o.seen.Load(name); ok {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen.Load(name); ok {
		return nil
	}
	if o.n >= o.max {
		return fmt.Errorf("%w: more than %d distinct limit overrides", ErrInvalidRequest, o.max)
	}
	o.seen.Store(name, struct{}{})
	o.n++
	return nil
}

func (o *overrides) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// forget gives back the slot of an override the limiter refused (a store
// may decide fewer limits than the config format allows): the limiter
// keeps nothing of it, and a name always stands for the same limit, so
// every use of it is refused alike.
func (o *overrides) forget(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen.LoadAndDelete(name); ok {
		o.n--
	}
}
