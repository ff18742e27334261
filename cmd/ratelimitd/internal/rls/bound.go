package rls

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// CheckWire reads b, a RateLimitRequest in wire format, for its field
// tags and lengths alone, and fails (wrapping engine.ErrInvalidRequest)
// when it has more than maxDescriptors descriptors or a descriptor more
// than maxEntries entries: a request of many tiny descriptors is refused
// before decoding it, which would take many times its size in memory.
// Malformed wire data passes: decoding reports it.
func CheckWire(b []byte, maxDescriptors, maxEntries int) error {
	n := 0
	return eachField(b, func(num protowire.Number, v []byte) error {
		if num != 2 { // descriptors
			return nil
		}
		if n++; n > maxDescriptors {
			return fmt.Errorf("%w: more than %d descriptors", engine.ErrInvalidRequest, maxDescriptors)
		}
		entries := 0
		return eachField(v, func(num protowire.Number, _ []byte) error {
			if num != 1 { // entries
				return nil
			}
			if entries++; entries > maxEntries {
				return fmt.Errorf("%w: descriptor %d: more than %d entries", engine.ErrInvalidRequest, n-1, maxEntries)
			}
			return nil
		})
	})
}

// eachField calls fn with the number and, for a length-delimited field,
// the contents of every field of the message b, stopping at malformed
// data.
func eachField(b []byte, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil
		}
		b = b[n:]
		if err := fn(num, v); err != nil {
			return err
		}
	}
	return nil
}
