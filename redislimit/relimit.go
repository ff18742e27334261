package redislimit

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// Relimited moves the expiries of limit name's buckets to when each is
// full under l, never earlier (store.Relimiter): a key written under the
// limit SetLimits replaced expires by that one, and must not read full
// before the new limit fills it. It scans every master for the limit's
// keys and has the function move their expiries, a slot at a time.
func (s *redisStore) Relimited(name string, l *bucket.Limit, shards int) error {
	ctx := context.Background()
	lim := string(appendLimit(nil, l))
	nowArg, err := s.clockArg()
	if err != nil {
		return err
	}
	match := globEscape(s.ks.prefix) + "{*}*:" + strconv.Itoa(len(name)) + ":" + globEscape(name) + "*"
	return eachMaster(ctx, s.client, func(ctx context.Context, c *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := c.ScanType(ctx, cursor, match, 512, "string").Result()
			if err != nil {
				return err
			}
			byTag := make(map[int][]string)
			for _, k := range keys {
				if tag, ok := s.ks.bucketOf(k, name, shards); ok {
					byTag[tag] = append(byTag[tag], k)
				}
			}
			for tag, ks := range byTag {
				args := append([]string(nil), ks...)
				if s.clock != nil {
					for range ks {
						args = append(args, s.ks.expiry[tag])
					}
				}
				err := c.FCall(ctx, libraryName+"_extend", args, lim, nowArg, len(ks)).Err()
				if err != nil && strings.Contains(err.Error(), "Function not found") && loadLibrary(ctx, s.client) == nil {
					err = c.FCall(ctx, libraryName+"_extend", args, lim, nowArg, len(ks)).Err()
				}
				if err != nil {
					return err
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
}

// tagIndex is the index of each slot tag.
var tagIndex = func() map[string]int {
	m := make(map[string]int, Slots)
	for i, t := range tags {
		m[t] = i
	}
	return m
}()

// bucketOf parses k as the key of a bucket of limit name, of a shard below
// shards, and returns its tag.
func (ks *keyspace) bucketOf(k, name string, shards int) (int, bool) {
	rest, ok := strings.CutPrefix(k, ks.prefix)
	if !ok || !strings.HasPrefix(rest, "{") {
		return 0, false
	}
	end := strings.IndexByte(rest, '}')
	if end < 0 {
		return 0, false
	}
	tag, ok := tagIndex[rest[1:end]]
	if !ok {
		return 0, false
	}
	rest = rest[end+1:]
	shard, rest, ok := decimal(rest)
	if !ok || shard >= shards {
		return 0, false
	}
	n, rest, ok := decimal(rest)
	if !ok || n != len(name) || !strings.HasPrefix(rest, name) {
		return 0, false
	}
	return tag, true
}

// decimal reads a decimal number as keyspace.bucket writes it (no sign,
// no leading zero) and the ':' after it.
func decimal(s string) (int, string, bool) {
	i := strings.IndexByte(s, ':')
	if i <= 0 || s[0] < '0' || s[0] > '9' || i > 1 && s[0] == '0' {
		return 0, s, false
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || n < 0 {
		return 0, s, false
	}
	return n, s[i+1:], true
}

// globEscape escapes what MATCH patterns treat specially.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
