package dynlocal

import (
	"os"
	"os/exec"
	"syscall"
)

// setSysProcAttr puts the engine in its own process group (so a terminal's
// Ctrl-C reaches only the gateway, which then stops the engine in order) and
// asks the kernel to SIGKILL it when its parent dies, so it is never orphaned.
func setSysProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// terminate sends SIGTERM to the engine's process group.
func terminate(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGTERM) }

// kill sends SIGKILL to the engine's process group.
func kill(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }
