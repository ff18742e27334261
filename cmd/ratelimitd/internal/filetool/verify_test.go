package filetool

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/seed7fbd42b6/ratelimit"
)

func TestVerify(t *testing.T) {
	path := writeFile(t)
	var b strings.Builder
	if err := Verify(&b, path); err != nil || !strings.Contains(b.String(), "ok (format 1, 3 buckets)") {
		t.Fatalf("sound file: %v\n%s", err, b.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 4096 + 16; i < 4096+64; i++ { // the second meta page's fields
		data[i] ^= 0x5a
	}
	damaged := path + ".damaged"
	if err := os.WriteFile(damaged, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := Verify(&b, damaged); !errors.Is(err, ErrDamaged) || !strings.HasSuffix(err.Error(), ": 1 problem") {
		t.Errorf("damaged file: %v, want ErrDamaged, one problem (both checks see the meta page)\n%s", err, b.String())
	}
}

// A file a limiter has open is not checked: its pages change under the
// check.
func TestVerifyRefusesALiveFile(t *testing.T) {
	path := writeFile(t)
	lim, err := ratelimit.Open(ratelimit.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	lim.Limit(context.Background(), ratelimit.Request{Name: "n", Config: &ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 1, Period: 1}})
	var b strings.Builder
	if err := Verify(&b, path); !errors.Is(err, ratelimit.ErrLocked) {
		t.Errorf("live file: %v, want ErrLocked", err)
	}
}
