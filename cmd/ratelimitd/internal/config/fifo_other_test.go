//go:build !unix

package config

import "testing"

// makeFIFO does nothing where named pipes are not files in a directory.
func makeFIFO(t *testing.T, path string) {}
