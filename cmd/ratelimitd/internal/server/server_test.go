package server

import (
	"path/filepath"
	"testing"
)

// An address in use is an error from New, not a crash, and leaves
// nothing open: the data file can be opened again at once.
func TestNewWithAnAddressInUse(t *testing.T) {
	busy := loopbackListener(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	writeFile(t, path, testRules)
	data := filepath.Join(dir, "data.db")
	free := "127.0.0.1:0"
	for _, tc := range []struct{ name, grpc, http, admin string }{
		{"grpc", busy.Addr().String(), free, free},
		{"http", free, busy.Addr().String(), free},
		{"admin", free, free, busy.Addr().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{ConfigPath: path, GRPCAddr: tc.grpc, HTTPAddr: tc.http, AdminAddr: tc.admin, Storage: Storage{Data: data}}
			if s, err := New(o); err == nil {
				s.closeListeners()
				s.store.close()
				t.Fatal("New succeeded on an address in use")
			}
			o.GRPCAddr, o.HTTPAddr, o.AdminAddr = free, free, free
			s, err := New(o)
			if err != nil {
				t.Fatalf("New after the failure: %v", err)
			}
			s.closeListeners()
			if err := s.store.close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
