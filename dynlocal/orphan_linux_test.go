package dynlocal_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/inboxgw/gateway/dynlocal"
)

// orphanHelperEnv switches the test binary into the helper role of
// TestNoOrphanWhenParentDies; its value says how the helper dies.
const orphanHelperEnv = "DYNLOCAL_TEST_ORPHAN_HELPER"

// pidPrefix starts the helper's stdout line that carries the java pid.
const pidPrefix = "DYNLOCAL_JAVA_PID="

// TestNoOrphanWhenParentDies re-executes the test binary as a helper that
// starts DynamoDB Local and then dies without calling Close, and checks that
// the java process dies with it (Pdeathsig).
func TestNoOrphanWhenParentDies(t *testing.T) {
	if mode := os.Getenv(orphanHelperEnv); mode != "" {
		orphanHelper(mode)
		return
	}
	t.Parallel()
	for _, mode := range []string{"exit", "kill"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestNoOrphanWhenParentDies$", "-test.count=1")
			cmd.Env = append(os.Environ(), orphanHelperEnv+"="+mode)
			cmd.Stderr = os.Stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := 0
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), pidPrefix); ok {
					pid, _ = strconv.Atoi(v)
				}
			}
			_ = cmd.Wait() // the helper dies abnormally by design
			if pid == 0 {
				t.Fatal("helper did not report a java pid")
			}
			deadline := time.Now().Add(10 * time.Second)
			for alive(pid) {
				if time.Now().After(deadline) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Fatalf("java pid %d still alive 10s after its parent died", pid)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// orphanHelper starts DynamoDB Local, prints its pid, and dies without Close.
func orphanHelper(mode string) {
	srv, err := dynlocal.Start(context.Background(), dynlocal.Options{StartTimeout: 90 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	fmt.Printf("%s%d\n", pidPrefix, srv.PID())
	_ = os.Stdout.Sync()
	if mode == "kill" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
	}
	os.Exit(0)
}

func init() { engineChecks["JVM args reach the process"] = checkJVMArgs }

// checkJVMArgs: JVMArgs reach the java process before -jar (TestInMemoryEngine's engine
// runs with ShortLivedJVMArgs, what the tests' engines run with), and the engine answers
// with them.
func checkJVMArgs(t *testing.T, srv *dynlocal.Server) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", srv.PID()))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	jar := slices.Index(args, "-jar")
	for _, a := range dynlocal.ShortLivedJVMArgs {
		if i := slices.Index(args, a); i < 0 || i > jar {
			t.Errorf("%s is not a JVM option of %q", a, args)
		}
	}
	if _, err := client(srv.Endpoint()).ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("ListTables: %v", err)
	}
}
