package engine

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	f := newFixture(t, rules, Options{Limits: Limits{MaxDescriptors: 2, MaxEntries: 2, MaxEntryBytes: 8}})
	long := strings.Repeat("x", 9)
	cases := []struct {
		name string
		req  Request
		want string // in the error; "" for none
	}{
		{"ok", Request{Domain: "d", Descriptors: []Descriptor{desc(1, "a=x", "b=y")}}, ""},
		{"empty domain", Request{Descriptors: []Descriptor{desc(1, "a=x")}}, "domain must not be empty"},
		{"no descriptors", Request{Domain: "d"}, "descriptor list must not be empty"},
		{"too many descriptors", Request{Domain: "d", Descriptors: []Descriptor{desc(1), desc(1), desc(1)}}, "3 descriptors, more than 2"},
		{"too many entries", Request{Domain: "d", Descriptors: []Descriptor{desc(1, "a=1", "b=2", "c=3")}}, "3 entries, more than 2"},
		{"long domain", Request{Domain: long, Descriptors: []Descriptor{desc(1)}}, "domain: 9 bytes, more than 8"},
		{"long key", Request{Domain: "d", Descriptors: []Descriptor{desc(1, long+"=x")}}, "descriptor 0 entry 0 key: 9 bytes"},
		{"long value", Request{Domain: "d", Descriptors: []Descriptor{desc(1, "a=x"), desc(1, "a="+long)}}, "descriptor 1 entry 0 value: 9 bytes"},
		{"bad UTF-8 domain", Request{Domain: "d\xff", Descriptors: []Descriptor{desc(1)}}, "domain: not valid UTF-8"},
		{"bad UTF-8 value", Request{Domain: "d", Descriptors: []Descriptor{desc(1, "a=\xc3")}}, "value: not valid UTF-8"},
		{"hits overflow", Request{Domain: "d", Descriptors: []Descriptor{desc(MaxHits+1, "a=x")}}, "hits 9007199254740993 above"},
	}
	for _, c := range cases {
		_, err := f.try(&c.req)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: err %v, want ErrInvalidRequest with %q", c.name, err, c.want)
		}
	}
	if got := f.e.Stats().Invalid; got != uint64(len(cases)-1) {
		t.Errorf("Stats.Invalid %d, want %d", got, len(cases)-1)
	}
}
