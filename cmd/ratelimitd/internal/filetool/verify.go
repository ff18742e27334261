package filetool

import (
	"errors"
	"fmt"
	"io"
)

// ErrDamaged is returned by Verify for a damaged file.
var ErrDamaged = errors.New("damaged")

// Verify checks the limiter's file at path: every page bbolt would
// reach well formed (boltcheck), and the snapshot and log whole and
// consistent (filestate). It writes what it found and returns nil for a
// sound file, an error wrapping ErrDamaged for a damaged one, and any
// other error when the file could not be checked: it does not exist, is
// not a regular file, is not a limiter's file at all (no valid meta page,
// or another program's) or is of a newer format, or a limiter has it open
// (ratelimit.ErrLocked).
func Verify(w io.Writer, path string) error {
	c, err := read(path)
	if err != nil {
		return err
	}
	if len(c.Problems) == 0 {
		fmt.Fprintf(w, "%s: ok (format %d, %d buckets)\n", path, c.FormatVersion, len(c.Buckets))
		return nil
	}
	for _, p := range c.Problems {
		fmt.Fprintf(w, "%s: %v\n", path, p)
	}
	if len(c.Problems) == 1 {
		return fmt.Errorf("%s: %w: 1 problem", path, ErrDamaged)
	}
	return fmt.Errorf("%s: %w: %d problems", path, ErrDamaged, len(c.Problems))
}
