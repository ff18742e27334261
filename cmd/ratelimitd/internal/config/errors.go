package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors. Every error Load, Parse and OverrideLimit return wraps
// one of these (several, joined with errors.Join, when a configuration has
// several problems), so callers test with errors.Is; the *Error that
// carries it names the file, line and field.
var (
	// ErrRead: a file or directory could not be read.
	ErrRead = errors.New("config: cannot read")
	// ErrSyntax: the file is not YAML, or a node has the wrong shape (a
	// list where a mapping belongs, a number where a flag belongs).
	ErrSyntax = errors.New("config: syntax error")
	// ErrUnknownField: a field neither envoyproxy/ratelimit nor ratelimitd
	// knows, or a known field in the wrong place.
	ErrUnknownField = errors.New("config: unknown field")
	// ErrMissingField: a required field (domain, key, unit or period,
	// requests_per_unit) is absent or empty.
	ErrMissingField = errors.New("config: missing field")
	// ErrInvalidValue: a field's value is outside what it accepts, or
	// contradicts another field.
	ErrInvalidValue = errors.New("config: invalid value")
	// ErrDuplicate: a domain (without Options.MergeDomains), a descriptor
	// among its siblings, or a YAML mapping key is given twice, or two rules
	// share a rate_limit.name with different limits.
	ErrDuplicate = errors.New("config: duplicate")
	// ErrUnsupported: envoyproxy/ratelimit accepts it but ratelimitd does
	// not (a wildcard in a descriptor key, a second YAML document in a
	// file).
	ErrUnsupported = errors.New("config: unsupported")
	// ErrInvalidOverride: a request's limit override has no valid unit.
	ErrInvalidOverride = errors.New("config: invalid limit override")
)

// maxErrors bounds how many problems one Load or Parse reports.
const maxErrors = 20

// Error is one configuration problem. Error() reads
// "FILE:LINE: FIELD: MSG", leaving out the parts that are empty or zero.
type Error struct {
	File  string // the file, as named to Load or Parse
	Line  int    // 1-based; 0 when the problem concerns the whole file
	Field string // the field within its descriptor, e.g. "rate_limit.unit"
	Msg   string // what is wrong
	Err   error  // the sentinel (ErrSyntax, ErrInvalidValue, ...)
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// errorList collects problems up to maxErrors.
type errorList struct {
	errs    []error
	dropped int
}

func (l *errorList) add(file string, line int, field string, sentinel error, format string, args ...any) {
	if len(l.errs) >= maxErrors {
		l.dropped++
		return
	}
	l.errs = append(l.errs, &Error{File: file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...), Err: sentinel})
}

// count returns how many problems were found so far.
func (l *errorList) count() int { return len(l.errs) + l.dropped }

// err returns the collected problems joined, or nil.
func (l *errorList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	errs := l.errs
	if l.dropped > 0 {
		errs = append(errs[:len(errs):len(errs)], fmt.Errorf("config: %d more problems not shown", l.dropped))
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}
