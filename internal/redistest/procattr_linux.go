package redistest

import "syscall"

// procAttr puts a server in a process group of its own (a terminal's ^C
// reaches the tests or the harness, which stop it, not the server first)
// and has the kernel kill it when the thread that started it exits.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
