package server

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
)

// The admin port refuses what a browser sends on a page's behalf, and
// requests addressed to a name it was not given (DNS rebinding), and
// serves tools (curl, scripts) and a URL typed into the address bar.
func TestAdminRefusesWebPages(t *testing.T) {
	served := 0
	h := noBrowsers(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }), []string{"ratelimitd.internal"})
	for _, c := range []struct {
		name    string
		host    string
		headers map[string]string
		want    int
	}{
		{"a tool", "127.0.0.1:8082", nil, http.StatusOK},
		{"typed into the address bar", "localhost:8082", map[string]string{"Sec-Fetch-Site": "none"}, http.StatusOK},
		{"a cross-site form", "127.0.0.1:8082", map[string]string{"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a same-site fetch", "127.0.0.1:8082", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"an old browser's POST", "127.0.0.1:8082", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"an old browser's GET, rebound", "attacker.example:8082", nil, http.StatusForbidden},
		{"a name that only ends like a listed one", "evil-ratelimitd.internal", nil, http.StatusForbidden},
		{"a listed name", "RateLimitd.Internal.:8082", nil, http.StatusOK},
		{"IPv6 with a port", "[::1]:8082", nil, http.StatusOK},
		{"IPv6 without a port", "[::1]", nil, http.StatusOK},
		{"localhost, no port", "LOCALHOST", nil, http.StatusOK},
		{"a name under localhost", "a.localhost.attacker.example", nil, http.StatusForbidden},
	} {
		before := served
		r := httptest.NewRequest(http.MethodPost, "/v1/reset", nil)
		r.Host = c.host
		for k, v := range c.headers {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want || (served > before) != (c.want == http.StatusOK) {
			t.Errorf("%s: %d, served %v; want %d", c.name, w.Code, served > before, c.want)
		}
	}
}

// A backup is copied beside the live file before it is sent, so a client
// that stops reading holds no transaction of the live file: the limiter
// can even close (which waits for every one) while the client stalls.
func TestBackupToAStalledClient(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	writeFile(t, path, testRules)
	s, err := New(Options{ConfigPath: path, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Storage: Storage{Data: filepath.Join(dir, "data.db")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.closeListeners()
	writing, release := make(chan struct{}), make(chan struct{})
	w := &stalledWriter{ResponseRecorder: httptest.NewRecorder(), writing: writing, release: release}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		s.handleBackup(w, httptest.NewRequest(http.MethodGet, "/v1/backup", nil))
	}()
	<-writing // the client has stopped reading
	closed := make(chan error, 1)
	go func() { closed <- s.eng.Limiter().Close() }()
	if err := waitFor(t, closed, "the limiter's Close, while a backup client stalls"); err != nil {
		t.Errorf("Close: %v", err)
	}
	close(release)
	<-sent
	if names, _ := filepath.Glob(filepath.Join(dir, ".ratelimitd-backup-*")); len(names) != 0 {
		t.Errorf("left behind: %v", names)
	}
}

// stalledWriter is a ResponseWriter whose first Write waits for release.
type stalledWriter struct {
	*httptest.ResponseRecorder
	writing, release chan struct{}
	once             sync.Once
}

func (w *stalledWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.writing); <-w.release })
	return w.ResponseRecorder.Write(p)
}
