package server

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A reload serves a good configuration and refuses a bad one, counting
// both; poll reloads only when the files changed.
func TestReloader(t *testing.T) {
	s, path := newTestServer(t, testRules)
	r := s.reload
	r.poll()
	if st := r.stats(); st.good != 0 || st.bad != 0 || !st.lastOK {
		t.Fatalf("poll of unchanged files: %+v", st)
	}
	writeFile(t, path, strings.Replace(testRules, "requests_per_unit: 3", "requests_per_unit: 4", 1))
	r.poll()
	if st := r.stats(); st.good != 1 || s.eng.Config().Limits()[0].RequestsPerUnit != 4 {
		t.Fatalf("after a change: %+v", st)
	}
	writeFile(t, path, "domain: d\ndescriptors: [{key: a, rate_limit: {unit: fortnight, requests_per_unit: 1}}]\n")
	r.poll()
	r.poll()
	if st := r.stats(); st.bad != 1 || st.lastOK || s.eng.Config().Limits()[0].RequestsPerUnit != 4 {
		t.Fatalf("after a bad change, polled twice: %+v; want one failure, the previous config serving", st)
	}
	if err := r.reload("test"); err == nil {
		t.Error("reload of the bad file succeeded")
	}
	writeFile(t, path, testRules)
	if err := r.reload("test"); err != nil || r.stats().good != 2 {
		t.Errorf("reload of a good file: %v %+v", err, r.stats())
	}
}

// The watcher reloads when the TLS files change, not only the rules: a
// rotation alone is served, and a rules change refused because the key
// was half written is loaded once the key is whole again.
func TestReloadWatchesTLSFiles(t *testing.T) {
	dir, f, c := testCertificates(t)
	s, path := newTestServer(t, testRules)
	r := s.reload
	r.tls = c
	r.initial(r.fingerprint())
	selfSigned(t, dir, "two")
	r.poll()
	if st := r.stats(); st.good != 1 {
		t.Fatalf("after a certificate rotation alone: %+v, want one reload", st)
	}
	key := readFile(t, f.KeyFile)
	writeFile(t, f.KeyFile, "half written")
	writeFile(t, path, strings.Replace(testRules, "requests_per_unit: 3", "requests_per_unit: 7", 1))
	r.poll()
	if st := r.stats(); st.bad != 1 || s.eng.Config().Limits()[0].RequestsPerUnit != 3 {
		t.Fatalf("rules changed with a bad key: %+v, want a refused reload", st)
	}
	writeFile(t, f.KeyFile, key)
	r.poll()
	if st := r.stats(); st.good != 2 || s.eng.Config().Limits()[0].RequestsPerUnit != 7 {
		t.Fatalf("key whole again: %+v, rules %v; want the new rules loaded", st, s.eng.Config().Limits()[0].RequestsPerUnit)
	}
}

// A reload that takes long (on Redis it waits for the requests under way
// and scans keys) holds up neither /metrics' reading of the reload counts
// nor SIGTERM: shutdown begins while it runs, lets it end before the
// limiter closes (so it is not counted as refused), starts no reload
// still asked for, and Run returns.
func TestSIGTERMDuringAReload(t *testing.T) {
	s, _ := newTestServer(t, testRules)
	entered, release := make(chan struct{}), make(chan struct{})
	var started atomic.Int32
	s.reload.started = func() {
		if started.Add(1) == 1 {
			close(entered)
			<-release
		}
	}
	conn, err := grpc.NewClient(s.grpcLn.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sigs := make(chan os.Signal, 3)
	ran := make(chan error, 1)
	go func() { ran <- s.Run(sigs) }()
	w, err := healthpb.NewHealthClient(conn).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first watch answer: %v %v", r, err)
	}
	sigs <- syscall.SIGHUP
	<-entered
	stats := make(chan error, 1)
	go func() { s.reload.stats(); stats <- nil }() // what /metrics reads
	waitFor(t, stats, "the reload counts, while a reload runs")
	sigs <- syscall.SIGHUP // asked for while one runs: not to be run once shutdown began
	sigs <- syscall.SIGTERM
	drained := make(chan error, 1)
	go func() {
		r, err := w.Recv()
		if err == nil && r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
			err = fmt.Errorf("health %v", r.Status)
		}
		drained <- err
	}()
	if err := waitFor(t, drained, "SIGTERM's NOT_SERVING, while a reload runs"); err != nil {
		t.Fatalf("watch answer after SIGTERM: %v, want NOT_SERVING", err)
	}
	close(release)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if st := s.reload.stats(); st.good != 1 || st.bad != 0 {
		t.Errorf("reloads after shutdown: %d good, %d refused; want the one under way, good", st.good, st.bad)
	}
}
