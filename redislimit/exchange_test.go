package redislimit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
)

// TestFunctionReloaded: a server that lost the library (FUNCTION FLUSH:
// as after a failover to a replica that never had it) gets it loaded
// again, and the call that found it missing runs once: its tokens are
// taken once.
func TestFunctionReloaded(t *testing.T) {
	forEachTopology(t, func(t *testing.T, client redis.UniversalClient) {
		clk := newFakeClock(t0)
		l := open(t, client, ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
			"l": {Kind: ratelimit.TokenBucket, Rate: 10, Period: M},
		}})
		ctx := context.Background()
		keys := keysOnDistinctTags("l", "l")
		for round := range 3 {
			err := eachMaster(ctx, client, func(ctx context.Context, c *redis.Client) error {
				return c.FunctionFlush(ctx).Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			if st, err := l.Limit(ctx, ratelimit.Request{Name: "l", Key: "k", Count: 2}); err != nil || !st.OK {
				t.Fatal(st, err)
			}
			if v, _ := l.Value(ctx, "l", "k"); v.Value != float64(10-2*(round+1)) {
				t.Fatalf("round %d: value %v", round, v.Value)
			}
			eachMaster(ctx, client, func(ctx context.Context, c *redis.Client) error { return c.FunctionFlush(ctx).Err() })
			st, err := l.LimitAll(ctx, ratelimit.Request{Name: "l", Key: keys[0]}, ratelimit.Request{Name: "l", Key: keys[1]})
			if err != nil || !st.OK {
				t.Fatal(st, err)
			}
		}
		for _, k := range keys {
			if v, _ := l.Value(ctx, "l", k); v.Value != 7 {
				t.Fatalf("%s: %v", k, v.Value)
			}
		}
	})
}

// lossyConn drops the connection instead of delivering the reply to the
// first function call written while lose is set.
type lossyConn struct {
	net.Conn
	lose   *atomic.Bool
	called bool
}

func (c *lossyConn) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("fcall")) && c.lose.CompareAndSwap(true, false) {
		c.called = true
	}
	return c.Conn.Write(b)
}

func (c *lossyConn) Read(b []byte) (int, error) {
	if c.called {
		time.Sleep(50 * time.Millisecond) // the server has run the call
		c.Conn.Close()
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// TestLostReplyNotRetried: a call whose reply is lost after the server ran
// it is not sent again (go-redis would retry it on EOF): the caller gets
// ErrUnavailable and the tokens are taken once.
func TestLostReplyNotRetried(t *testing.T) {
	srv := ownServer(t)
	var lose atomic.Bool
	client := redis.NewClient(&redis.Options{Network: "unix", Addr: srv.Addr(),
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &lossyConn{Conn: c, lose: &lose}, nil
		}})
	defer client.Close()
	clk := newFakeClock(t0)
	l := open(t, client, ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
		"l": {Kind: ratelimit.TokenBucket, Rate: 10, Period: M},
	}})
	ctx := context.Background()
	for _, credit := range []bool{false, true} {
		lose.Store(true)
		var err error
		if credit {
			err = l.Credit(ctx, "l", "k", 2)
		} else {
			_, err = l.Limit(ctx, ratelimit.Request{Name: "l", Key: "k", Count: 4})
		}
		if !errors.Is(err, ratelimit.ErrUnavailable) {
			t.Fatalf("credit %v: %v", credit, err)
		}
		want := map[bool]float64{false: 6, true: 8}[credit]
		if v, err := l.Value(ctx, "l", "k"); err != nil || v.Value != want {
			t.Fatalf("credit %v: value %v (%v), want %v: the call ran more than once", credit, v.Value, err, want)
		}
	}
}
