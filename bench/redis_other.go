//go:build !linux

package main

import "syscall"

// serverProcAttr is the default elsewhere: the harness stops its server
// when the run ends.
func serverProcAttr() *syscall.SysProcAttr { return nil }
