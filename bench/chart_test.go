package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The chart is written as PNG or SVG by the file's extension, one panel
// per scenario, and any other extension is refused.
func TestWriteChart(t *testing.T) {
	o := hbOutcome(t)
	for _, r := range o.results { // a second caller count for every line
		c := *r
		c.Callers, c.DecisionsPerSec = 1, r.DecisionsPerSec/100
		o.results = append(o.results, &c)
	}
	dir := t.TempDir()
	png := filepath.Join(dir, "c.png")
	if err := writeChart(png, o); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(png); !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("%s is not a PNG", png)
	}
	svg := filepath.Join(dir, "c.svg")
	if err := writeChart(svg, o); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(svg)
	for _, sc := range o.scenarios {
		if !bytes.Contains(b, []byte(sc.name+": ")) {
			t.Errorf("SVG has no panel titled %q", sc.name)
		}
	}
	if !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "decisions/s") {
		t.Errorf("SVG lacks the svg element or the axis label")
	}
	if err := writeChart(filepath.Join(dir, "c.jpg"), o); err == nil {
		t.Errorf("wrote a .jpg")
	}
}

func TestDecadeTicks(t *testing.T) {
	var labels []string
	for _, tk := range decadeTicks(100, 1e7) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := strings.Join(labels, " "); got != "100 1k 10k 100k 1M 10M" {
		t.Errorf("labels %q", got)
	}
}
