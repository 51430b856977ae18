//go:build !unix

package dynlocal

import (
	"os"
	"os/exec"
)

// setSysProcAttr does nothing where there are no process groups or
// parent-death signals.
func setSysProcAttr(*exec.Cmd) {}

// terminate kills the process; there is no SIGTERM here.
func terminate(p *os.Process) error { return p.Kill() }

// kill kills the process.
func kill(p *os.Process) error { return p.Kill() }
