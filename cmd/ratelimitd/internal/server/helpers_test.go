package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

const testRules = `domain: d
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 3}
`

// newTestServer makes a server in memory on the rules src, listening on
// free loopback ports, without running it.
func newTestServer(t *testing.T, src string) (*Server, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, src)
	s, err := New(Options{ConfigPath: path, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.closeListeners()
		s.store.close()
	})
	return s, path
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hangBound bounds every wait for another goroutine here: a wait that
// takes longer is a hang.
const hangBound = time.Minute

// waitFor returns what ch delivers, failing t if nothing comes within
// hangBound.
func waitFor(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(hangBound):
		t.Fatalf("hang: %s still waited for after %v", what, hangBound)
		return nil
	}
}
