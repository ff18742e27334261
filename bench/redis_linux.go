package main

import "syscall"

// serverProcAttr puts a server the harness starts in a process group of
// its own (a terminal's ^C reaches the harness, which stops it) and kills
// it if the harness dies without stopping it.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
