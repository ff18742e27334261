package ratelimitprom

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCollectAfterClose: a registry may scrape a limiter that was closed;
// the collector must neither hang nor panic.
func TestCollectAfterClose(t *testing.T) {
	l := open(t, "")
	l.Close()
	done := make(chan int)
	go func() { done <- testutil.CollectAndCount(NewCollector(l, "x")) }()
	select {
	case n := <-done:
		if n != 15 {
			t.Fatalf("%d metrics after Close, want 15", n)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Stats hangs after Close")
	}
}
