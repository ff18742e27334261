package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"unicode/utf8"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// maxJSONDepth bounds how deeply a body's objects and arrays nest. The
// deepest request, an entry of a descriptor's entries, is five levels;
// a deeper body is refused before anything decodes it, since a decoder
// keeps state per level.
const maxJSONDepth = 8

// requestObjects is the most JSON objects a rate limit request of the
// most descriptors and entries the limits allow holds (the request, its
// descriptors, their entries and limit overrides); limits so large the
// count overflows bound nothing.
func (s *Server) requestObjects() int {
	if e := s.limits.MaxEntries + 2; e > 0 && s.limits.MaxDescriptors <= (math.MaxInt-1)/e {
		return 1 + s.limits.MaxDescriptors*e
	}
	return math.MaxInt
}

// bucketObjects is the most JSON objects a request naming one bucket
// holds: the request and its entries.
func (s *Server) bucketObjects() int {
	return 1 + min(s.limits.MaxEntries, math.MaxInt-1)
}

// checkJSON is scanJSON writing a 400 when body fails it.
func checkJSON(w http.ResponseWriter, body []byte, maxObjects int) bool {
	if err := scanJSON(body, maxObjects); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return false
	}
	return true
}

// scanJSON checks body, JSON, in one pass before anything decodes it:
// valid UTF-8, at most maxObjects objects, arrays of objects only (every
// array of the APIs' requests holds objects), nesting at most
// maxJSONDepth deep, and no \u escape of a lone UTF-16 surrogate.
// Decoders mend bad UTF-8 and lone surrogates into U+FFFD without a word,
// so two different bodies would name one bucket; and decoding many small
// values (objects, or nulls that decode as empty ones) takes many times
// the body's size in memory. Syntax errors are left to the decoder. Its
// errors wrap engine.ErrInvalidRequest.
func scanJSON(body []byte, maxObjects int) error {
	if !utf8.Valid(body) {
		return fmt.Errorf("%w: invalid JSON: not valid UTF-8", engine.ErrInvalidRequest)
	}
	var open [maxJSONDepth]byte // the '{' or '[' of each level
	depth, objects := 0, 0
	element := byte(0) // after '[' (an element or ']' comes next) or ',' in an array: '[' or ','
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if element != 0 && c != '{' && (c != ']' || element != '[') {
			return fmt.Errorf("%w: a JSON array holds something other than objects", engine.ErrInvalidRequest)
		}
		element = 0
		switch c {
		case '"':
			end, err := scanString(body, i+1)
			if err != nil {
				return fmt.Errorf("%w: invalid JSON: %w", engine.ErrInvalidRequest, err)
			}
			i = end
		case '{', '[':
			if c == '{' {
				if objects++; objects > maxObjects {
					return fmt.Errorf("%w: more JSON objects than %d, what a request of the most descriptors and entries allowed holds",
						engine.ErrInvalidRequest, maxObjects)
				}
			} else {
				element = '['
			}
			if depth == maxJSONDepth {
				return fmt.Errorf("%w: JSON nested deeper than %d levels", engine.ErrInvalidRequest, maxJSONDepth)
			}
			open[depth] = c
			depth++
		case '}', ']':
			depth = max(depth-1, 0) // unbalanced: the decoder's to report
		case ',':
			if depth > 0 && open[depth-1] == '[' {
				element = ','
			}
		}
	}
	return nil
}

// scanString reads the JSON string whose contents start at body[i] and
// returns the index of its closing quote (len(body) if there is none: a
// syntax error for the decoder). It refuses \u escapes of UTF-16
// surrogates that do not pair a high one with the low one after it.
func scanString(body []byte, i int) (int, error) {
	high := false // the escape before was a high surrogate
	for ; i < len(body); i++ {
		c := body[i]
		if c == '"' {
			break
		}
		if c != '\\' {
			if high {
				return 0, errLoneSurrogate
			}
			continue
		}
		if i+1 < len(body) && body[i+1] != 'u' {
			if high {
				return 0, errLoneSurrogate
			}
			i++ // an escaped quote or backslash is not the end
			continue
		}
		r, ok := hex4(body, i+2)
		if !ok {
			return len(body), nil // bad syntax: the decoder says so
		}
		i += 5
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if high {
				return 0, errLoneSurrogate
			}
			high = true
		case r >= 0xDC00 && r < 0xE000:
			if !high {
				return 0, errLoneSurrogate
			}
			high = false
		case high:
			return 0, errLoneSurrogate
		}
	}
	if high {
		return 0, errLoneSurrogate
	}
	return i, nil
}

var errLoneSurrogate = errors.New(`a \u escape of half a UTF-16 surrogate pair`)

// hex4 reads four hexadecimal digits at body[i:].
func hex4(body []byte, i int) (rune, bool) {
	if i+4 > len(body) {
		return 0, false
	}
	var r rune
	for _, c := range body[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// decodeJSON decodes body strictly into v, writing a 400 on failure:
// scanJSON first (maxObjects as there), field names exactly as written
// (exactKeys), no unknown fields, nothing after the value.
func decodeJSON(w http.ResponseWriter, body []byte, maxObjects int, v any) bool {
	if !checkJSON(w, body, maxObjects) {
		return false
	}
	if err := exactKeys(body); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("invalid JSON: %w", err))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) > 0 {
		err = errors.New("data after the JSON value")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("invalid JSON: %w", err))
		return false
	}
	return true
}

// exactKeys checks that no object in body repeats a key and that every
// key is made of a to z and '_', as every field of the native and admin
// APIs is: encoding/json matches names without regard to case, folding
// "Domain", or "ſ" (U+017F) to "s", and lets a later duplicate win, so a
// proxy and ratelimitd could read one request two ways. An object of more
// than maxFields fields is refused too, before its names pile up. Syntax
// errors are left to the decoder; scanJSON has bounded the body's size.
func exactKeys(body []byte) error {
	type frame struct {
		keys    map[string]bool // nil: an array
		wantKey bool
	}
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or a syntax error the decoder reports
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, frame{keys: map[string]bool{}, wantKey: true})
				continue
			case '[':
				stack = append(stack, frame{})
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].wantKey {
				f := &stack[n-1]
				switch {
				case len(f.keys) == maxFields:
					return fmt.Errorf("more than %d fields in an object", maxFields)
				case f.keys[v]:
					return fmt.Errorf("field %q given twice", v)
				case !fieldName(v):
					return fmt.Errorf("unknown field %q (field names are a to z and _)", v)
				}
				f.keys[v], f.wantKey = true, false
				continue
			}
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil { // a value: a key comes next
			stack[n-1].wantKey = true
		}
	}
}

// maxFields bounds the fields of an object exactKeys reads: no object of
// the native and admin APIs has more than four.
const maxFields = 8

// fieldName reports whether s is made of a to z and '_'.
func fieldName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}
