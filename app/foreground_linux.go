package app

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// takeForeground, when the gateway runs under a parent on a terminal (make run: make,
// and the recipe's shell it execs over, share the terminal's foreground process group),
// moves the gateway into a process group of its own and makes that group the terminal's
// foreground, as a shell does for a job: Ctrl-C then interrupts the gateway alone (its
// DynamoDB Local has a group of its own already), which stops cleanly and exits 0, and
// make, never interrupted, exits 0 in turn instead of dying of the SIGINT (GNU make
// re-raises it: the shell showed status 130). restore gives the terminal back to the
// parent's group. Nothing changes when stdin is not a terminal, when the gateway is not
// in the foreground, or when it already leads its group (started by an interactive
// shell, which did the same).
func takeForeground() (restore func()) {
	noop := func() {}
	fd := os.Stdin.Fd()
	fg, err := tcgetpgrp(fd)
	if err != nil {
		return noop // not a terminal
	}
	own := syscall.Getpgrp()
	if fg != own || own == syscall.Getpid() {
		return noop
	}
	if err := syscall.Setpgid(0, 0); err != nil {
		return noop
	}
	if err := tcsetpgrp(fd, syscall.Getpid()); err != nil {
		_ = syscall.Setpgid(0, own)
		return noop
	}
	return func() { _ = tcsetpgrp(fd, own) }
}

// tcgetpgrp is the foreground process group of the terminal fd.
func tcgetpgrp(fd uintptr) (int, error) {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return 0, errno
	}
	return int(pgrp), nil
}

// tcsetpgrp makes pgrp the foreground process group of the terminal fd. A process outside
// the foreground group gets SIGTTOU for it, ignored for the call.
func tcsetpgrp(fd uintptr, pgrp int) error {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	p := int32(pgrp)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&p))); errno != 0 {
		return errno
	}
	return nil
}
