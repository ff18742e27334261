package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// tool runs a ratelimitd file tool and returns its exit code, stdout and
// stderr.
func tool(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// The file tools on a file a server wrote: inspect, verify, dump and
// salvage; a damaged file fails verify with exit code 1, and a file a
// server has open is refused (exit code 2).
func TestFileTools(t *testing.T) {
	t.Parallel()
	p, f := serveConfig(t)
	p.should(hits(30, d("b", "tool")), d("a", "tool"))
	if code, _, stderr := tool(t, "verify", f.data); code != 2 || !strings.Contains(stderr, "limiter has the file open") {
		t.Errorf("verify of a live file: exit %d, %s", code, stderr)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	code, out, _ := tool(t, "inspect", f.data)
	if code != 0 || !strings.Contains(out, "buckets         2") || !strings.Contains(out, "e2e.b") || !strings.Contains(out, "problems        none") {
		t.Errorf("inspect: exit %d\n%s", code, out)
	}
	if code, out, _ := tool(t, "verify", f.data); code != 0 || !strings.Contains(out, "ok") {
		t.Errorf("verify: exit %d %s", code, out)
	}
	code, out, _ = tool(t, "dump", f.data)
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("dump line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if code != 0 || len(lines) != 2 || lines[1]["name"] != "e2e.b" || lines[1]["key"] != "b=tool" || lines[1]["value"] != 70.0 {
		t.Errorf("dump: exit %d %v", code, lines)
	}

	salvaged := filepath.Join(t.TempDir(), "salvaged.db")
	if code, out, stderr := tool(t, "salvage", f.data, salvaged); code != 0 || !strings.Contains(out, "nothing lost") {
		t.Errorf("salvage: exit %d %s %s", code, out, stderr)
	}
	q := start(t, "-config", f.config, "-data", salvaged)
	if got := q.remaining("b", "tool"); got != 70 {
		t.Errorf("a server on the salvaged file: %d, want 70", got)
	}

	data, err := os.ReadFile(f.data)
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(t.TempDir(), "damaged.db")
	copy(data[4096+16:4096+64], bytes.Repeat([]byte{0xa5}, 48)) // the second meta page
	if err := os.WriteFile(damaged, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := tool(t, "verify", damaged); code != 1 {
		t.Errorf("verify of a damaged file: exit %d %s, want 1", code, out)
	}
	resalvaged := filepath.Join(t.TempDir(), "resalvaged.db")
	if code, out, stderr := tool(t, "salvage", damaged, resalvaged); code != 1 || !strings.Contains(out, "lost: ") {
		t.Errorf("salvage of a damaged file: exit %d %s %s, want 1 and what was lost", code, out, stderr)
	}
	if _, err := os.Stat(resalvaged); err != nil {
		t.Errorf("salvage of a damaged file wrote nothing: %v", err)
	}
	for _, args := range [][]string{{"inspect"}, {"salvage", f.data}, {"nope"}, {"verify", filepath.Join(t.TempDir(), "absent.db")}} {
		if code, _, _ := tool(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
