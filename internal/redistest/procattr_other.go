//go:build !linux

package redistest

import "syscall"

// procAttr is the default elsewhere: the caller stops its servers.
func procAttr() *syscall.SysProcAttr { return nil }
