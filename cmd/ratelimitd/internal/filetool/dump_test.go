package filetool

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDump(t *testing.T) {
	var b strings.Builder
	if _, err := Dump(&b, writeFile(t)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []bucketLine{{Name: "d.a", Key: "x", Value: 6, TS: at}, {Name: "d.a", Key: "y", Value: 3, TS: at}, {Name: "d.b", Value: 9, TS: at}}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i, l := range lines {
		var got bucketLine
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatal(err)
		}
		if got != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got, want[i])
		}
	}
}
