package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
)

func TestOperatorActions(t *testing.T) {
	f := newFixture(t, rules, Options{})
	ctx := context.Background()
	x := []config.Entry{{Key: "b", Value: "x"}}
	f.decide("d", desc(30, "b=x"))
	v, err := f.e.Value(ctx, "d", x)
	if err != nil || v.Value.Value != 70 || v.Limit.Name != "d.b" || v.Key != "b=x" {
		t.Fatalf("Value: %+v %v", v, err)
	}
	if _, err := f.e.Credit(ctx, "d", x, 20); err != nil {
		t.Fatal(err)
	}
	if got := f.remaining("d", "b=x"); got != 90 {
		t.Errorf("after credit 20: %v, want 90", got)
	}
	if _, err := f.e.Reset(ctx, "d", x); err != nil {
		t.Fatal(err)
	}
	if got := f.remaining("d", "b=x"); got != 100 {
		t.Errorf("after reset: %v, want 100", got)
	}
	for _, c := range []struct {
		domain  string
		entries []config.Entry
		want    error
	}{
		{"other", x, ErrUnknownDomain},
		{"d", []config.Entry{{Key: "zzz", Value: "x"}}, ErrUnknownDescriptor},
		{"d", []config.Entry{{Key: "free", Value: "x"}}, ErrUnknownDescriptor},
		{"d", []config.Entry{{Key: "b", Value: "\xff"}}, ErrInvalidRequest},
	} {
		if _, err := f.e.Reset(ctx, c.domain, c.entries); !errors.Is(err, c.want) {
			t.Errorf("Reset(%q, %v): %v, want %v", c.domain, c.entries, err, c.want)
		}
	}
	if _, err := f.e.Credit(ctx, "d", x, -1); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("Credit -1: %v, want ErrInvalidRequest", err)
	}
}
