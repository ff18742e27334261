package main

import "runtime/debug"

// version is the module version the binary was built from ("(devel)"
// for a build from a checkout).
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
