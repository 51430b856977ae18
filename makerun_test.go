package main

// `make run` as a developer runs it: Ctrl-C (SIGINT to its process group, what a terminal
// sends) stops the gateway and its DynamoDB Local cleanly and make exits 0.

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is an io.Writer safe for the command's two pipes and the test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMakeRunExitsZeroOnCtrlC runs `make run` on a terminal of its own (script(1) gives
// it a pseudo-terminal; a throwaway engine and free ports), waits for its scheduler to
// start, types Ctrl-C, and checks that make exits 0 without an error or interrupt line,
// that the gateway stopped its DynamoDB Local, and that nothing is left running.
func TestMakeRunExitsZeroOnCtrlC(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"make", "script"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (%v): the test runs `make run` on a pseudo-terminal (apt-get install make bsdutils)", tool, err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INBOX_") && !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MFLAGS=") {
			env = append(env, kv)
		}
	}
	env = append(env, "INBOX_ADDR=127.0.0.1:0", "INBOX_DEV_SMTP_ADDR=127.0.0.1:0", "INBOX_DATA_DIR=:memory:")
	// script runs the command as a session leader on a new pseudo-terminal, copies what it
	// reads on stdin to the terminal (a typed ^C: SIGINT to the terminal's foreground
	// group) and, with -e, exits with the command's status: make's, printed too.
	cmd := exec.Command("script", "-qefc", "make --no-print-directory run; echo make-status=$?", "/dev/null")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	keys, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = keys.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("make run's terminal:\n%s", out.String())
		}
	})

	// make builds the binary and starts DynamoDB Local and the demo import first.
	deadline := time.Now().Add(4 * time.Minute)
	for !strings.Contains(out.String(), "scheduler: starting") {
		select {
		case err := <-done:
			t.Fatalf("make run ended (%v) before the gateway started", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway did not start within 4 minutes")
		}
	}
	// The gateway of this terminal's session (script's child leads it).
	session := strings.TrimSpace(pgrepOut(t, "-P", strconv.Itoa(cmd.Process.Pid)))
	gateway := strings.TrimSpace(pgrepOut(t, "-s", session, "-f", "^bin/inbox-gateway serve$"))
	if _, err := keys.Write([]byte{3}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("make run did not exit within 30 s of Ctrl-C")
	}
	text := out.String()
	if err != nil || !strings.Contains(text, "make-status=0") {
		t.Fatalf("make run after Ctrl-C: %v, want make's status 0", err)
	}
	if strings.Contains(text, "make: ***") || !strings.Contains(text, "dynamodb local stopped") {
		t.Fatal("make run's output after Ctrl-C has an error line or no clean engine stop")
	}
	// Nothing is left: the gateway's pid is gone (its DynamoDB Local dies with it at the
	// latest, by its parent-death signal).
	for _, pid := range strings.Fields(gateway) {
		n, err := strconv.Atoi(pid)
		if err != nil {
			t.Fatalf("pgrep printed %q", gateway)
		}
		if err := syscall.Kill(n, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("the gateway %d is still running after Ctrl-C (kill -0: %v)", n, err)
		}
	}
}

// pgrepOut answers what pgrep with args prints, failing the test when it finds nothing.
func pgrepOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("pgrep", args...).Output()
	if err != nil {
		t.Fatalf("pgrep %v: %v", args, err)
	}
	return string(out)
}
