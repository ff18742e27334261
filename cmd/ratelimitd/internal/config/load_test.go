package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// domainFile is a one-rule configuration of domain.
func domainFile(domain string) string {
	return doc("domain: "+domain, "descriptors:", "  - key: k", "    rate_limit: {unit: second, requests_per_unit: 1}")
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "one.yaml")
	write(t, path, domainFile("a"))
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Domains(), []string{"a"}) || !slices.Equal(c.Files(), []string{path}) || !c.HasDomain("a") ||
		c.HasDomain("b") {
		t.Errorf("Domains %v Files %v", c.Domains(), c.Files())
	}
}

// A directory is read recursively in lexical order, whatever the files'
// extensions, skipping hidden names and what is not a regular file, and
// following symbolic links.
func TestLoadDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "limits")
	write(t, filepath.Join(dir, "b.yaml"), domainFile("b"))
	write(t, filepath.Join(dir, "a.yml"), domainFile("a"))
	write(t, filepath.Join(dir, "c"), domainFile("c"))
	write(t, filepath.Join(dir, "sub", "d.yaml"), domainFile("d"))
	write(t, filepath.Join(dir, ".hidden.yaml"), domainFile("hidden"))
	write(t, filepath.Join(dir, ".git", "x.yaml"), "not: a domain\n")
	write(t, filepath.Join(dir, "b.yaml.swp~"), domainFile("swap")) // not hidden: read
	write(t, filepath.Join(root, "elsewhere", "e.yaml"), domainFile("e"))
	write(t, filepath.Join(root, "elsewhere2", "f.yaml"), domainFile("f"))
	if err := os.Symlink(filepath.Join(root, "elsewhere", "e.yaml"), filepath.Join(dir, "e-link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "elsewhere2"), filepath.Join(dir, "linked-dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(dir, "sub", "loop")); err != nil { // a cycle: read once
		t.Fatal(err)
	}
	makeFIFO(t, filepath.Join(dir, "pipe"))
	c, err := Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "d", "e", "f", "swap"}; !slices.Equal(c.Domains(), want) {
		t.Errorf("Domains = %v, want %v", c.Domains(), want)
	}
	var rel []string
	for _, f := range c.Files() {
		r, _ := filepath.Rel(dir, f)
		rel = append(rel, r)
	}
	want := []string{"a.yml", "b.yaml", "b.yaml.swp~", "c", "e-link.yaml", "linked-dir/f.yaml", "sub/d.yaml"}
	if !slices.Equal(rel, want) {
		t.Errorf("Files = %v, want %v", rel, want)
	}
}

func TestLoadErrors(t *testing.T) {
	root := t.TempDir()
	if _, err := Load(filepath.Join(root, "missing.yaml"), nil); !errors.Is(err, ErrRead) ||
		!strings.Contains(err.Error(), "missing.yaml: ") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Load(filepath.Join(root, "missing"), nil); !errors.Is(err, ErrRead) {
		t.Errorf("missing directory: %v", err)
	}

	dangling := filepath.Join(root, "dangling")
	write(t, filepath.Join(dangling, "ok.yaml"), domainFile("ok"))
	if err := os.Symlink(filepath.Join(root, "nowhere"), filepath.Join(dangling, "gone.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dangling, nil); !errors.Is(err, ErrRead) || !strings.Contains(err.Error(), "gone.yaml") {
		t.Errorf("dangling link: %v", err)
	}

	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(empty, nil); err != nil || len(c.Domains()) != 0 {
		t.Errorf("empty directory: %v, %v; want no domains", c, err)
	}

	// Errors name files as Load was given the path.
	bad := filepath.Join(root, "bad")
	write(t, filepath.Join(bad, "api.yaml"), doc("domain: api", "descriptors:", "  - key: k", "    rate_limit:",
		"      unit: fortnight", "      requests_per_unit: 1"))
	_, err := Load(bad, nil)
	want := filepath.Join(bad, "api.yaml") + `:5: rate_limit.unit: unknown unit "fortnight"`
	if !errors.Is(err, ErrInvalidValue) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v, want it to start with %s", err, want)
	}
}

func TestLoadDuplicateDomains(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "1.yaml"), domainFile("a"))
	write(t, filepath.Join(dir, "2.yaml"), doc("domain: a", "descriptors:", "  - key: other",
		"    rate_limit: {unit: hour, requests_per_unit: 2}"))
	_, err := Load(dir, nil)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrDuplicate) || e.File != filepath.Join(dir, "2.yaml") || e.Line != 1 ||
		e.Field != "domain" || !strings.Contains(e.Msg, "1.yaml:1") {
		t.Errorf("duplicate domain: %v", err)
	}

	// MergeDomains joins them; their descriptors still must not collide.
	c, err := Load(dir, &Options{MergeDomains: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := limitFor(t, c, "a", "k=1"); !ok {
		t.Errorf("merged domain lost the first file's rule")
	}
	if m, ok := limitFor(t, c, "a", "other=1"); !ok || m.Limit.File != filepath.Join(dir, "2.yaml") {
		t.Errorf("merged domain lost the second file's rule")
	}
	write(t, filepath.Join(dir, "3.yaml"), domainFile("a"))
	_, err = Load(dir, &Options{MergeDomains: true})
	if !errors.As(err, &e) || !errors.Is(err, ErrDuplicate) || e.File != filepath.Join(dir, "3.yaml") || e.Line != 3 ||
		!strings.Contains(e.Msg, "1.yaml:3") {
		t.Errorf("merged duplicate descriptor: %v", err)
	}
}

func TestParseNil(t *testing.T) {
	c, err := Parse(nil, nil)
	if err != nil || len(c.Domains()) != 0 || len(c.Limits()) != 0 {
		t.Errorf("Parse(nil) = %v, %v", c, err)
	}
	var zero Config
	if _, ok := zero.Match("d", entries("k=v")); ok || zero.HasDomain("d") || len(zero.LimiterConfigs()) != 0 {
		t.Errorf("the zero Config matches")
	}
}
