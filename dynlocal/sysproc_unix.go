//go:build unix && !linux

package dynlocal

import (
	"os"
	"os/exec"
	"syscall"
)

// setSysProcAttr puts the engine in its own process group. There is no
// parent-death signal outside Linux: if the parent crashes, the engine
// outlives it.
func setSysProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminate sends SIGTERM to the engine's process group.
func terminate(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGTERM) }

// kill sends SIGKILL to the engine's process group.
func kill(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }
