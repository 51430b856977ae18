package redistest

import "syscall"

// sysProcAttr makes the kernel kill redis-server when the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
