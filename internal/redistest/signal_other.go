//go:build !unix

package redistest

import "os"

// No signal pauses a process here: Pause and Resume fail.
var sigStop, sigCont os.Signal
