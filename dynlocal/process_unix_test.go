//go:build unix

package dynlocal_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/inboxgw/gateway/dynlocal"
)

func init() {
	closedChecks["the java process is gone"] = func(t *testing.T, srv *dynlocal.Server) {
		if alive(srv.PID()) {
			t.Errorf("java pid %d still alive after Close", srv.PID())
		}
	}
}

// alive reports whether pid names a live process; a zombie (exited, not yet
// reaped by an init that may never reap it) counts as dead.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return !os.IsNotExist(err) || runtime.GOOS != "linux"
	}
	// After the parenthesised command name come "state ppid ...".
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}
