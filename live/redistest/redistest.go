// Package redistest starts throwaway redis-server processes for tests.
//
// Server starts `redis-server --port N --save "" --appendonly no` on a free port of
// 127.0.0.1 and stops it when the test ends. The binary comes from $INBOX_TEST_REDIS_SERVER
// or PATH (Debian: apt-get install -y redis-server; scripts/ensure-redis.sh does it).
// Tests that need Redis fail with that advice when it is missing.
package redistest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BinaryEnv names the environment variable that points at a redis-server binary.
const BinaryEnv = "INBOX_TEST_REDIS_SERVER"

// Redis is a running redis-server owned by a test.
type Redis struct {
	t    testing.TB
	bin  string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd
	out *bytes.Buffer
}

// Server starts a redis-server on a free port and registers its stop with t.Cleanup.
func Server(t testing.TB) *Redis {
	t.Helper()
	bin := os.Getenv(BinaryEnv)
	if bin == "" {
		var err error
		bin, err = exec.LookPath("redis-server")
		if err != nil {
			t.Fatalf("redistest: redis-server not found on PATH (install it: apt-get install -y redis-server, or run scripts/ensure-redis.sh; or set %s)", BinaryEnv)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: free port: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	r := &Redis{t: t, bin: bin, port: port}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// URL returns the server's redis:// URL.
func (r *Redis) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

// Addr returns host:port.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Start starts the server (again, after Stop) on the same port and waits until it
// accepts connections.
func (r *Redis) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return
	}
	out := &bytes.Buffer{}
	cmd := exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("redistest: start %s: %v", r.bin, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", r.Addr(), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			r.t.Fatalf("redistest: redis-server did not listen on %s: %v\n%s", r.Addr(), err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.cmd, r.out = cmd, out
}

// Stop kills the server (SIGKILL: connections drop as in a crash) and waits for it.
func (r *Redis) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	_ = r.cmd.Wait()
	r.cmd = nil
}
