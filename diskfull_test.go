//go:build linux

package ratelimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

const (
	diskFullEnv   = "RATELIMIT_DISKFULL_FILE"
	diskFullLimit = 3 << 20 // RLIMIT_FSIZE of the child: its file cannot pass this
)

var diskFullLimits = map[string]Config{
	"api": {Kind: TokenBucket, Rate: 1e9, Period: time.Hour},
}

// A file that cannot grow (the child process runs under RLIMIT_FSIZE, so
// writes past it fail with EFBIG): preallocation gives back what a failed
// attempt wrote and stops with a warning; the limiter then grants until a
// commit cannot grow the file, and from there fails closed; after a reopen
// with room, every acknowledged grant is there.
func TestFullDiskFailsClosedAndLosesNothing(t *testing.T) {
	if path := os.Getenv(diskFullEnv); path != "" {
		diskFullChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "rl.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskFailsClosedAndLosesNothing$", "-test.count=1")
	cmd.Env = append(os.Environ(), diskFullEnv+"="+path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	acked := map[string]bool{}
	var sizeAfterOpen int64
	warned, failedClosed := false, false
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "granted":
			acked[f[1]] = true
		case len(f) == 2 && f[0] == "opened":
			sizeAfterOpen, _ = strconv.ParseInt(f[1], 10, 64)
		case line == "warned":
			warned = true
		case line == "failed closed":
			failedClosed = true
		case strings.HasPrefix(line, "fatal"):
			t.Fatalf("child: %s", line)
		}
	}
	if !warned {
		t.Error("no warning that preallocation stopped")
	}
	if sizeAfterOpen == 0 || sizeAfterOpen >= diskFullLimit {
		t.Errorf("file of %d bytes after Open: the failed preallocation was not given back (limit %d)", sizeAfterOpen, diskFullLimit)
	}
	if !failedClosed {
		t.Error("the child never saw ErrUnavailable: the file did not fill up")
	}
	if len(acked) < 100 {
		t.Fatalf("only %d grants acknowledged", len(acked))
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > diskFullLimit {
		t.Errorf("file of %d bytes, above the limit %d", st.Size(), diskFullLimit)
	}
	l, err := Open(Options{Path: path, Now: ratelimittest.NewClock(damagedT0).Now, Limits: diskFullLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for key := range acked {
		if v := value(t, l, "api", key).Value; v != 1e9-1 {
			t.Fatalf("acknowledged grant of %s lost: value %v", key, v)
		}
	}
}

func diskFullChild(path string) {
	signal.Ignore(syscall.SIGXFSZ)
	lim := syscall.Rlimit{Cur: diskFullLimit, Max: diskFullLimit}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("fatal: setrlimit:", err)
		return
	}
	var logs bytes.Buffer
	l, err := Open(Options{Path: path, Now: ratelimittest.NewClock(damagedT0).Now, Limits: diskFullLimits,
		LogPreallocate: 8 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		fmt.Println("fatal: open:", err)
		return
	}
	defer l.Close()
	st, _ := os.Stat(path)
	fmt.Println("opened", st.Size())
	if strings.Contains(logs.String(), "preallocation stopped") {
		fmt.Println("warned")
	}
	ctx := context.Background()
	pad := strings.Repeat("k", 2000) // big keys fill the file quickly
	rs := make([]Request, 32)
	for i := 0; i < 100_000; i++ {
		for j := range rs {
			rs[j] = Request{Name: "api", Key: fmt.Sprintf("%s-%d-%d", pad, i, j)}
		}
		failed := false
		for j, d := range l.LimitMany(ctx, rs, nil) {
			switch {
			case d.Err == nil && d.OK:
				fmt.Println("granted", rs[j].Key)
			case errors.Is(d.Err, ErrUnavailable):
				failed = true
			default:
				fmt.Println("fatal: unexpected decision", d.OK, d.Err)
				return
			}
		}
		if failed {
			// Fails closed from now on, even for a request that would
			// add nothing to the file's size.
			if _, err := l.Limit(ctx, Request{Name: "api", Key: "small"}); !errors.Is(err, ErrUnavailable) {
				fmt.Println("fatal: a grant after the failure:", err)
				return
			}
			fmt.Println("failed closed")
			return
		}
	}
}
