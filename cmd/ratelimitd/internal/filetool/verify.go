package filetool

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/boltcheck"
	"github.com/seed7fbd42b6/ratelimit/internal/filestate"
	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// ErrDamaged is returned by Verify for a file that is damaged or not a
// limiter's file.
var ErrDamaged = errors.New("damaged")

// Verify checks the limiter's file at path: every page bbolt would
// reach well formed (boltcheck), and the snapshot and log whole and
// consistent (filestate). It writes what it found and returns nil for a
// sound file, an error wrapping ErrDamaged for a damaged one, and any
// other error when the file could not be checked (it does not exist, a
// limiter has it open).
func Verify(w io.Writer, path string) error {
	f, err := filestate.Open(path)
	if errors.Is(err, wal.ErrLocked) {
		return fmt.Errorf("%w: a limiter has the file open (back a live file up through the admin API)", ratelimit.ErrLocked)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	var problems []error
	if err := boltcheck.Check(f, st.Size()); err != nil {
		problems = append(problems, err)
	}
	c, err := filestate.ReadFile(f)
	switch {
	case errors.Is(err, wal.ErrCorrupt):
		problems = append(problems, err)
	case err != nil:
		return err
	default:
		problems = append(problems, c.Problems...)
	}
	problems = distinct(problems)
	if len(problems) == 0 {
		fmt.Fprintf(w, "%s: ok (format %d, %d buckets)\n", path, c.FormatVersion, len(c.Buckets))
		return nil
	}
	for _, p := range problems {
		fmt.Fprintf(w, "%s: %v\n", path, p)
	}
	if len(problems) == 1 {
		return fmt.Errorf("%s: %w: 1 problem", path, ErrDamaged)
	}
	return fmt.Errorf("%s: %w: %d problems", path, ErrDamaged, len(problems))
}

// distinct drops a problem that states the same damage as one before it:
// both checks read the meta pages, and report a damaged one each, with
// their own note in parentheses.
func distinct(problems []error) []error {
	seen := make(map[string]bool, len(problems))
	out := problems[:0]
	for _, p := range problems {
		msg := p.Error()
		if i := strings.Index(msg, " ("); i >= 0 {
			msg = msg[:i]
		}
		if !seen[msg] {
			seen[msg] = true
			out = append(out, p)
		}
	}
	return out
}
