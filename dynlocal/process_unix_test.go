//go:build unix

package dynlocal_test

import (
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inboxgw/gateway/dynlocal"
)

func TestCloseKillsProcess(t *testing.T) {
	t.Parallel()
	srv, err := dynlocal.Start(t.Context(), dynlocal.Options{StartTimeout: 90 * time.Second})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pid := srv.PID()
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-srv.Done():
	default:
		t.Error("Done() not closed after Close")
	}
	if alive(pid) {
		t.Errorf("java pid %d still alive after Close", pid)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.Endpoint(), nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("endpoint still answers after Close")
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
