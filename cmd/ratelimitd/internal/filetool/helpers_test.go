package filetool

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// at is the clock of the files the tests write.
var at = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// writeFile writes a limiter's file holding two buckets of "d.a" (4 and
// 7 tokens taken of 10) and one of "d.b", and returns its path.
func writeFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "limiter.db")
	cfg := ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 10, Period: time.Hour, Start: time.Unix(0, 0)}
	lim, err := ratelimit.Open(ratelimit.Options{Path: path, Limits: map[string]ratelimit.Config{"d.a": cfg, "d.b": cfg},
		Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []ratelimit.Request{{Name: "d.a", Key: "x", Count: 4}, {Name: "d.a", Key: "y", Count: 7}, {Name: "d.b", Count: 1}} {
		if _, err := lim.Limit(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := lim.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
