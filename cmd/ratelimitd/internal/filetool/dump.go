package filetool

import (
	"bufio"
	"encoding/json"
	"io"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/filestate"
)

// bucketLine is one line of Dump.
type bucketLine struct {
	Name  string    `json:"name"`
	Key   string    `json:"key"`
	Shard uint32    `json:"shard"`
	Value float64   `json:"value"`
	TS    time.Time `json:"ts"`
}

// Dump writes every bucket the limiter's file at path stores as one JSON
// object per line, {"name", "key", "shard", "value", "ts"}, in order of
// name, key and shard. A bucket that is absent is full. It returns the
// file's contents (whose Problems say what could not be read).
func Dump(w io.Writer, path string) (*filestate.Contents, error) {
	c, err := read(path)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, b := range c.Buckets {
		if err := enc.Encode(bucketLine{Name: b.Name, Key: b.Key, Shard: b.Shard, Value: b.Value, TS: time.Unix(0, b.TS).UTC()}); err != nil {
			return nil, err
		}
	}
	return c, bw.Flush()
}
