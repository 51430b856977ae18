package main

// Helpers of the tests that run the gateway binary as real child processes (several
// gateway instances, the stream relay, graceful shutdown).

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/store"
)

// procTimeout bounds a child process's start and stop.
const procTimeout = 60 * time.Second

var gatewayBinary struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// buildGateway builds this module's binary once per test run (go build -o $TMP/gw .).
func buildGateway(t *testing.T) string {
	t.Helper()
	gatewayBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "inbox-gw-test-")
		if err != nil {
			gatewayBinary.err = err
			return
		}
		gatewayBinary.path = filepath.Join(dir, "gw")
		cmd := exec.Command("go", "build", "-o", gatewayBinary.path, ".")
		gatewayBinary.out, gatewayBinary.err = cmd.CombinedOutput()
	})
	if gatewayBinary.err != nil {
		t.Fatalf("go build: %v\n%s", gatewayBinary.err, gatewayBinary.out)
	}
	return gatewayBinary.path
}

// logLine is one JSON log line of a child process.
type logLine struct {
	at    time.Time
	msg   string
	attrs map[string]any
	raw   string
}

// proc is a running gateway or relay process.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs []logLine
	done chan struct{}
	err  error // Wait's result, once done is closed
}

// gwEnv is the environment of every child process: INBOX_STORE=dynamodb on the test
// engine (DynamoDB Local through the standard AWS configuration), dummy credentials,
// nothing of the caller's INBOX_*/AWS_* configuration; the table is created here.
func gwEnv(t *testing.T, table string, extra ...string) []string {
	ep := dynlocaltest.Endpoint(t)
	// The test creates the table, through package dynlocaltest (without the stream that
	// slows DynamoDB Local down, unless the test called dynlocaltest.KeepStreams), and no
	// process does (INBOX_CREATE_TABLE=0): a process would add the stream.
	st := store.New(dynlocaltest.Client(t), table, store.WithSweepWorkers(0))
	err := st.CreateTable(context.Background())
	st.Close()
	if err != nil {
		t.Fatalf("create table %s: %v", table, err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INBOX_") && !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"INBOX_STORE=dynamodb",
		"AWS_ENDPOINT_URL_DYNAMODB="+ep,
		"AWS_ENDPOINT_URL_DYNAMODB_STREAMS="+ep,
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"INBOX_TABLE="+table,
		"INBOX_JWT_SECRET="+string(testgw.Secret),
		"INBOX_LOG_FORMAT=json",
		// Each gateway's scheduler polls its shards a few times a second; the processes of
		// these tests share one DynamoDB Local, so only the tests of the scheduler run it
		// (a later INBOX_SCHEDULER=true in extra wins: os/exec keeps the last value).
		"INBOX_SCHEDULER=false",
		"INBOX_CREATE_TABLE=0",
	)
	return append(env, extra...)
}

// startProc starts the gateway binary with env and args; it is killed when the test ends.
func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(buildGateway(t), args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	p := &proc{t: t, name: name, cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			l := logLine{at: time.Now(), raw: sc.Text()}
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				l.msg, _ = m["msg"].(string)
				l.attrs = m
			}
			p.mu.Lock()
			p.logs = append(p.logs, l)
			p.mu.Unlock()
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill(syscall.SIGKILL)
		if t.Failed() {
			p.mu.Lock()
			for _, l := range p.logs {
				t.Logf("[%s] %s", p.name, l.raw)
			}
			p.mu.Unlock()
		}
	})
	return p
}

// kill sends sig and waits (bounded) for the process to exit.
func (p *proc) kill(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(procTimeout):
		_ = p.cmd.Process.Kill()
		p.t.Errorf("%s did not exit within %v of %v", p.name, procTimeout, sig)
	}
}

// waitLog waits until the process logged msg (at or after since) and returns that line.
func (p *proc) waitLog(msg string, since time.Time, timeout time.Duration) logLine {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		for _, l := range p.logs {
			if l.msg == msg && !l.at.Before(since) {
				p.mu.Unlock()
				return l
			}
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			p.t.Fatalf("%s exited (%v) before logging %q", p.name, p.err, msg)
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not log %q within %v", p.name, msg, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startGatewayProc starts `gw serve` on a free loopback port and returns it as a
// harness client (testgw.Attach: Post, Send, Mark, DialWS...) once it listens.
func startGatewayProc(t *testing.T, name string, env []string) (*proc, *testgw.Server) {
	t.Helper()
	p := startProc(t, name, append(env, "INBOX_ADDR=127.0.0.1:0"), "serve")
	l := p.waitLog("inbox gateway listening", time.Time{}, procTimeout)
	url, _ := l.attrs["graphql"].(string)
	if url == "" {
		t.Fatalf("%s: no graphql URL in %s", name, l.raw)
	}
	url = strings.Replace(url, "localhost", "127.0.0.1", 1)
	return p, testgw.Attach(t, url)
}
