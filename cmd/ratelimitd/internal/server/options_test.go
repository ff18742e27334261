package server

import (
	"strings"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		o    Options
		want string // "" for valid
	}{
		{Options{ConfigPath: "c", GRPCAddr: "x"}, ""},
		{Options{GRPCAddr: "x"}, "-config"},
		{Options{ConfigPath: "c"}, "at least one"},
		{Options{ConfigPath: "c", GRPCAddr: "x", TLS: TLSFiles{CertFile: "c"}}, "go together"},
		{Options{ConfigPath: "c", GRPCAddr: "x", TLS: TLSFiles{ClientCAFile: "ca"}}, "need a server certificate"},
	}
	for _, c := range cases {
		got, err := c.o.withDefaults()
		switch {
		case c.want == "" && (err != nil || got.WatchInterval != DefaultWatchInterval || got.MaxRequestBytes != DefaultMaxRequestBytes ||
			got.RequestTimeout != DefaultRequestTimeout || got.DrainTimeout != DefaultDrainTimeout || got.Logger == nil):
			t.Errorf("%+v: %+v %v", c.o, got, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error with %q", c.o, err, c.want)
		}
	}
}
