//go:build unix

package redistest

import "syscall"

// The signals that pause and resume a process.
var sigStop, sigCont = syscall.SIGSTOP, syscall.SIGCONT
