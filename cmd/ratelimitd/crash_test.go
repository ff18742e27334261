package main

import (
	"syscall"
	"testing"
	"time"
)

// SIGKILL under gRPC load, then a restart on the same file: every OK a
// client received is still counted (and nothing no client asked for).
func TestSIGKILLUnderLoad(t *testing.T) {
	t.Parallel()
	p, f := serveConfig(t)
	l := loadLedger(p, 32, 8)
	eventually(t, 60*time.Second, "OKs under load", func() bool { return l.total.Load() >= loadTarget() })
	p.signal(syscall.SIGKILL)
	p.wait()
	l.Stop()
	q := f.restart(t)
	l.check(t, q)
	t.Logf("%d OKs before the kill", l.total.Load())
}
