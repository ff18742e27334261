package filetool

import (
	"strings"
	"testing"
	"time"
)

func TestInspect(t *testing.T) {
	path := writeFile(t)
	var b strings.Builder
	c, err := Inspect(&b, path, at.Add(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"format version  1", "buckets         3", "  d.a           2", "  d.b           1",
		"problems        none", "3 records", "(1m30s ago)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if len(c.Buckets) != 3 || len(c.Problems) != 0 {
		t.Errorf("contents %+v", c)
	}
}

func TestBytesText(t *testing.T) {
	cases := map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 8 << 20: "8.0 MiB", 3 << 30: "3.0 GiB"}
	for n, want := range cases {
		if got := bytesText(n); got != want {
			t.Errorf("bytesText(%d) = %q, want %q", n, got, want)
		}
	}
}
