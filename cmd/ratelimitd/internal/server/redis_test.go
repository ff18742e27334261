package server

import (
	"context"
	"testing"
	"time"
)

// A call to a server that accepts and never answers ends with its
// context, for one server and for a cluster's seeds, rather than after
// go-redis's own read timeout: the health probe's bound holds.
func TestRedisClientHonoursTheContext(t *testing.T) {
	ln := loopbackListener(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	for _, addrs := range [][]string{{ln.Addr().String()}, {ln.Addr().String(), ln.Addr().String()}} {
		c, err := (&RedisStorage{Addrs: addrs}).client()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		err = c.Ping(ctx).Err()
		took := time.Since(start)
		cancel()
		c.Close()
		// go-redis's own read timeout is 3 s: a bound 20 times the
		// context's tells the two apart on any machine.
		if err == nil || took > time.Second {
			t.Errorf("%d address(es): PING of a silent server: %v after %v, want an error at the context's deadline", len(addrs), err, took)
		}
	}
}
