package filetool

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSalvage(t *testing.T) {
	src := writeFile(t)
	dst := filepath.Join(t.TempDir(), "new.db")
	var b strings.Builder
	rep, err := Salvage(&b, src, dst)
	if err != nil || rep.Buckets != 3 || !strings.Contains(b.String(), "nothing lost") {
		t.Fatalf("%+v %v\n%s", rep, err, b.String())
	}
	b.Reset()
	if err := Verify(&b, dst); err != nil {
		t.Errorf("the salvaged file: %v", err)
	}
	if _, err := Salvage(&b, src, dst); err == nil {
		t.Error("salvage onto an existing file succeeded")
	}
}
