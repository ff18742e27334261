package filetool

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/filestate"
)

// Inspect writes a summary of the limiter's file at path: its size and
// format version, the snapshot and the log after it (sizes, and the age
// of their newest bucket state as of now), the bucket count per limit
// name, and the problems found. It returns the file's contents (for the
// exit code: problems mean damage) or the error that kept it from being
// read.
func Inspect(w io.Writer, path string, now time.Time) (*filestate.Contents, error) {
	c, err := read(path)
	if err != nil {
		return nil, err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "file\t%s\n", path)
	fmt.Fprintf(tw, "size\t%s (%d pages of %d bytes in use)\n", bytesText(c.FileBytes), c.Pages, c.PageSize)
	fmt.Fprintf(tw, "format version\t%d\n", c.FormatVersion)
	switch {
	case !c.HasSnapshot:
		fmt.Fprintf(tw, "snapshot\tnone\n")
	case c.SnapshotErr != nil:
		fmt.Fprintf(tw, "snapshot\tdamaged, %d buckets read: %v\n", c.SnapshotRecords, c.SnapshotErr)
	default:
		fmt.Fprintf(tw, "snapshot\t%d buckets, %s, covers the log to batch %d, newest state %s\n",
			c.SnapshotRecords, bytesText(c.SnapshotBytes), c.SnapshotPos, age(c.SnapshotNewest, now))
	}
	fmt.Fprintf(tw, "log\t%d batches, %d records, %s after the snapshot; last batch %d, newest state %s\n",
		c.LogBatches, c.LogRecords, bytesText(c.LogBytes), c.LogLast, age(c.LogNewest, now))
	fmt.Fprintf(tw, "buckets\t%d\n", len(c.Buckets))
	for _, n := range countByName(c) {
		fmt.Fprintf(tw, "  %s\t%d\n", n.name, n.count)
	}
	if len(c.Problems) == 0 {
		fmt.Fprintf(tw, "problems\tnone\n")
	} else {
		fmt.Fprintf(tw, "problems\t%d\n", len(c.Problems))
		for _, p := range c.Problems {
			fmt.Fprintf(tw, "  \t%v\n", p)
		}
	}
	return c, tw.Flush()
}

type nameCount struct {
	name  string
	count int
}

// countByName counts the buckets (keys, shards apart) per limit name, by
// name.
func countByName(c *filestate.Contents) []nameCount {
	m := make(map[string]int)
	for _, b := range c.Buckets {
		m[b.Name]++
	}
	out := make([]nameCount, 0, len(m))
	for n, k := range m {
		out = append(out, nameCount{n, k})
	}
	slices.SortFunc(out, func(a, b nameCount) int { return cmp.Compare(a.name, b.name) })
	return out
}

// age describes a Unix-nanosecond time relative to now.
func age(ns int64, now time.Time) string {
	if ns == 0 {
		return "none"
	}
	t := time.Unix(0, ns).UTC()
	d := now.Sub(t).Truncate(time.Second)
	if d < 0 {
		return fmt.Sprintf("%s (%v ahead of now)", t.Format(time.RFC3339), -d)
	}
	return fmt.Sprintf("%s (%v ago)", t.Format(time.RFC3339), d)
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
