package redislimit

import (
	"strconv"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// Slots is the number of slot tags, and so of the store's partitions: a
// bucket's key carries tags[(hash(name, key) + shard/2) mod Slots] as its
// hash tag (see the package documentation), so all
// the buckets of a tag share one Redis Cluster slot and one function call
// decides a batch of them. It is part of the key layout: every process
// sharing a server must use the same tags.
const Slots = 64

// tags are the hash tags, one per partition. Tag i is the first string
// (base-36 numerals 0, 1, 2, ...) whose Redis Cluster slot (CRC16 mod
// 16384) is i*256+128, the middle of the i-th 256th of the slot space: the
// tags are evenly spread, so however a cluster splits the slots evenly
// over its masters, each master gets as many tags as any other, give or
// take one. TestTagsSpreadEvenly checks them.
var tags = [Slots]string{
	"53t", "j3j", "if5", "kec", "574", "74b", "akm", "6bk",
	"96a", "frw", "mj8", "oin", "d1i", "38o", "mnx", "xw",
	"he6", "box", "40w", "c9q", "hav", "7ah", "447", "67a",
	"1js", "fcu", "85b", "m5", "1n3", "3me", "e2j", "iu",
	"712", "52d", "cmk", "4dm", "75r", "h5l", "11a0", "ice",
	"3y7", "1za", "2k6", "8ax", "wu7", "931", "yg", "8e8",
	"7d8", "5gn", "621", "41g", "jc0", "qkn", "66q", "i6o",
	"3h5", "1kc", "2z4", "84r", "3lu", "des", "he", "802",
}

// route is redisStore.Route: shard s of a key sits on tag (hash + s/2) mod
// Slots, so shards 2k and 2k+1 (a request's two choices) share a slot and
// one function call decides them, and a hot key's pairs spread over
// consecutive tags (and so over masters).
func route(hash uint64, shard uint32) int32 {
	return int32((hash + uint64(shard/2)) % Slots)
}

// keyspace builds the store's keys. A bucket's key is
//
//	<prefix>{<tag>}<shard>:<len(name)>:<name><key>
//
// with shard and len(name) in decimal: unambiguous for any bytes in name
// and key. The tag's other keys are <prefix>{<tag>}d (its drop record),
// <prefix>{<tag>}x (its expiry index, with Options.Now) and
// <prefix>{<tag>}h:<id> (a hold of a call across slots).
type keyspace struct {
	prefix string
	drop   [Slots]string
	expiry [Slots]string
}

func newKeyspace(prefix string) *keyspace {
	ks := &keyspace{prefix: prefix}
	for i, t := range tags {
		ks.drop[i] = prefix + "{" + t + "}d"
		ks.expiry[i] = prefix + "{" + t + "}x"
	}
	return ks
}

// bucket returns the key of it's bucket.
func (ks *keyspace) bucket(it *actor.Item) string {
	t := tags[it.Part]
	id := &it.ID
	b := make([]byte, 0, len(ks.prefix)+len(t)+len(id.Name)+len(id.Key)+24)
	b = append(b, ks.prefix...)
	b = append(b, '{')
	b = append(b, t...)
	b = append(b, '}')
	b = strconv.AppendUint(b, uint64(id.Shard), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(len(id.Name)), 10)
	b = append(b, ':')
	b = append(b, id.Name...)
	b = append(b, id.Key...)
	return string(b)
}

// hold returns the key of a hold with id on tag.
func (ks *keyspace) hold(tag int32, id string) string {
	return ks.prefix + "{" + tags[tag] + "}h:" + id
}
