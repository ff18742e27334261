package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// The admin port: credit, reset, an online backup that opens with every
// grant acknowledged before it, salvage, and the loaded configuration.
// It is off unless -admin-addr is set.
func TestAdmin(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t, "-admin-addr", "127.0.0.1:0")
	p.should(hits(60, d("b", "adm")))
	bucket := `{"domain":"e2e","entries":[{"key":"b","value":"adm"}]`
	if code, out := post(t, p.adminAddr, "/v1/credit", bucket+`,"count":10}`); code != http.StatusOK {
		t.Fatalf("credit: %d %s", code, out)
	}
	if got := p.remaining("b", "adm"); got != 50 {
		t.Errorf("after credit 10: %d, want 50", got)
	}
	for _, bad := range []string{bucket + `,"count":0}`, bucket + `,"count":-1}`} {
		if code, _ := post(t, p.adminAddr, "/v1/credit", bad); code != http.StatusBadRequest {
			t.Errorf("credit %s: %d, want 400", bad, code)
		}
	}
	if code, _ := post(t, p.adminAddr, "/v1/reset", bucket+`,"count":5}`); code != http.StatusBadRequest {
		t.Errorf("reset with a count (a credit's field): %d, want 400", code)
	}
	if got := p.remaining("b", "adm"); got != 50 {
		t.Errorf("after a refused reset: %d, want 50", got)
	}
	if code, out := post(t, p.adminAddr, "/v1/reset", bucket+`}`); code != http.StatusOK {
		t.Fatalf("reset: %d %s", code, out)
	}
	if got := p.remaining("b", "adm"); got != 100 {
		t.Errorf("after reset: %d, want 100", got)
	}

	p.should(hits(7, d("b", "backup")))
	code, backup, hdr := httpDo(t, nil, http.MethodGet, "http://"+p.adminAddr+"/v1/backup", nil)
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/octet-stream" || len(backup) == 0 {
		t.Fatalf("backup: %d %v (%d bytes)", code, hdr, len(backup))
	}
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(copyPath, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	salvaged := filepath.Join(dir, "salvaged.db")
	code, out := post(t, p.adminAddr, "/v1/salvage", `{"src":"`+copyPath+`","dst":"`+salvaged+`"}`)
	var rep struct {
		Buckets  int      `json:"buckets"`
		Problems []string `json:"problems"`
	}
	decode(t, out, &rep)
	if code != http.StatusOK || rep.Buckets != 1 || len(rep.Problems) != 0 {
		t.Fatalf("salvage of the backup: %d %s", code, out)
	}
	code, out = post(t, p.adminAddr, "/v1/salvage", `{"src":"`+copyPath+`","dst":"`+salvaged+`"}`)
	if code != http.StatusUnprocessableEntity {
		t.Errorf("salvage onto an existing file: %d %s, want 422", code, out)
	}
	cfg := writeConfig(t, dir, "e2e.yaml", testConfig)
	for _, file := range []string{copyPath, salvaged} {
		q := start(t, "-config", cfg, "-data", file)
		if got := q.remaining("b", "backup"); got != 93 {
			t.Errorf("a server on %s: b=backup holds %d, want 93", filepath.Base(file), got)
		}
	}

	code, out = httpDo2(t, http.MethodGet, p.adminAddr, "/v1/config")
	var conf struct {
		Domains []string `json:"domains"`
		Rules   []struct {
			Name string `json:"name"`
		} `json:"rules"`
	}
	decode(t, out, &conf)
	if code != http.StatusOK || len(conf.Domains) != 1 || len(conf.Rules) != 11 {
		t.Errorf("config: %d %s", code, out)
	}
	if code, _ := httpDo2(t, http.MethodGet, p.adminAddr, "/metrics"); code != http.StatusOK {
		t.Errorf("admin /metrics: %d", code)
	}
	for _, path := range []string{"/v1/credit", "/v1/reset", "/v1/backup", "/v1/salvage", "/v1/reload", "/v1/config", "/debug/pprof/"} {
		if code, _ := httpDo2(t, http.MethodGet, p.httpAddr, path); code != http.StatusNotFound {
			t.Errorf("%s on the request port: %d, want 404", path, code)
		}
	}
}

// A backup of a limiter in memory is refused: there is no file.
func TestAdminBackupInMemory(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, t.TempDir(), "e2e.yaml", testConfig)
	p := start(t, "-config", cfg, "-data", "", "-admin-addr", "127.0.0.1:0")
	if code, out := httpDo2(t, http.MethodGet, p.adminAddr, "/v1/backup"); code != http.StatusConflict {
		t.Errorf("backup in memory: %d %s, want 409", code, out)
	}
}

func httpDo2(t *testing.T, method, addr, path string) (int, []byte) {
	t.Helper()
	code, out, _ := httpDo(t, nil, method, "http://"+addr+path, nil)
	return code, out
}
