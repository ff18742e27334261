package filetool

import (
	"errors"
	"fmt"
	"strings"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/boltcheck"
	"github.com/seed7fbd42b6/ratelimit/internal/filestate"
	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// read reads the limiter's file at path for a tool: its contents
// (filestate.ReadFile), with the damage the whole-file check finds
// (boltcheck.Check: also what the contents cannot show, such as a file
// cut short below the pages it uses) first among Contents.Problems. The
// error, for a file that could not be read at all (absent, not a regular
// file, not a limiter's file, a newer format), wraps ratelimit.ErrLocked
// when a limiter has it open.
func read(path string) (*filestate.Contents, error) {
	f, err := filestate.Open(path)
	if errors.Is(err, wal.ErrLocked) {
		return nil, fmt.Errorf("%w: a limiter has the file open (back a live file up through the admin API)", ratelimit.ErrLocked)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	c, err := filestate.ReadFile(f)
	if err != nil {
		return nil, err
	}
	if err := boltcheck.Check(f, st.Size()); err != nil {
		c.Problems = append([]error{err}, c.Problems...)
	}
	c.Problems = distinct(c.Problems)
	return c, nil
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
