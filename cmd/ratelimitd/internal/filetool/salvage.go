package filetool

import (
	"fmt"
	"io"

	"github.com/seed7fbd42b6/ratelimit"
)

// Salvage reads what can be read of the limiter's file at src into a new
// file at dst (ratelimit.Salvage) and writes the report: what was
// recovered and what was lost.
func Salvage(w io.Writer, src, dst string) (ratelimit.SalvageReport, error) {
	rep, err := ratelimit.Salvage(src, dst)
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(w, "%s -> %s: %d buckets (snapshot %d, log %d batches, %d records)\n",
		src, dst, rep.Buckets, rep.SnapshotRecords, rep.LogBatches, rep.LogRecords)
	if len(rep.Problems) == 0 {
		fmt.Fprintln(w, "nothing lost: the new file holds what the old one last committed")
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "lost: %s\n", p)
	}
	return rep, nil
}
