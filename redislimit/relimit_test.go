package redislimit

import (
	"testing"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// bucketOf reads back exactly the keys keyspace.bucket writes for the
// limit, shards below the bound, and nothing a MATCH pattern may also
// return: another name with the same prefix, an odd number, another tag.
func TestBucketOf(t *testing.T) {
	ks := newKeyspace("p*[x]:")
	key := func(name, k string, shard uint32) string {
		sl := &storeLimit{name: name, lim: bucket.Limit{Period: 1}}
		it := sl.item(k, shard)
		return ks.bucket(&it)
	}
	for _, c := range []struct {
		key  string
		name string
		ok   bool
	}{
		{key("lim", "k", 0), "lim", true},
		{key("lim", ":3:lim", 1), "lim", true},
		{key("lim", "k", 2), "lim", false}, // a shard beyond the limit's 2
		{key("limit", "k", 0), "lim", false},
		{key("li", "mk", 0), "lim", false},
		{"p*[x]:{53t}01:3:limk", "lim", false}, // a leading zero
		{"p*[x]:{53t}+1:3:limk", "lim", false}, // a sign
		{"p*[x]:{zzzz}0:3:limk", "lim", false}, // no such tag
		{"other{53t}0:3:limk", "lim", false},   // another prefix
		{"p*[x]:{53t}d", "lim", false},         // a drop record
	} {
		if _, ok := ks.bucketOf(c.key, c.name, 2); ok != c.ok {
			t.Errorf("bucketOf(%q, %q) = %v, want %v", c.key, c.name, ok, c.ok)
		}
	}
	if got := globEscape(`a*b?c[d]e\f`); got != `a\*b\?c\[d\]e\\f` {
		t.Errorf("globEscape = %q", got)
	}
}
