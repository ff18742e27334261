//go:build !unix

package filetool

import "os"

// lockShared does nothing where flock is not available.
func lockShared(*os.File) error { return nil }
