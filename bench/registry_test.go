package main

import (
	"slices"
	"testing"
)

// Ours comes first, then the baselines in memory before those on disk;
// -mode and -baselines select among them.
func TestRegistryOrderAndSelection(t *testing.T) {
	var labels []string
	for _, im := range ordered() {
		labels = append(labels, im.label())
	}
	want := []string{"ours/memory", "ours/durable", "ours/redis", "striped/memory", "mutex/memory", "naive/durable", "redis_rate/redis"}
	if !slices.Equal(labels, want) {
		t.Errorf("order %v, want %v", labels, want)
	}
	var got []string
	for _, im := range selectImpls([]string{"durable"}, []string{"naive", "striped"}) {
		got = append(got, im.label())
	}
	if !slices.Equal(got, []string{"ours/durable", "naive/durable"}) {
		t.Errorf("durable with naive and striped selected %v", got)
	}
}

// A second registration of a label, or of a baseline's name, panics.
func TestRegisterRefusesDuplicates(t *testing.T) {
	for _, im := range []*implementation{
		{name: "ours", mode: "memory"},
		{name: "striped", mode: "durable"},
		{name: "", mode: "memory"},
	} {
		saved := registry
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registered %q/%q", im.name, im.mode)
				}
			}()
			im.open = func(*cellEnv) (impl, error) { return nil, nil }
			register(im)
		}()
		registry = saved
	}
}
