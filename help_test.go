package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// `help`, `-h` and `--help` print the usage (commands and environment variables) and exit
// 0 without starting a server, even with a configuration that would not start one; an
// unknown command still fails.
func TestHelpPrintsUsageAndExitsZero(t *testing.T) {
	t.Parallel()
	gw := buildGateway(t)
	for _, arg := range []string{"help", "-h", "--help", "-help"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, gw, arg)
		// A server would need a secret and a valid store: help must not read either.
		cmd.Env = []string{"INBOX_STORE=nonsense", "INBOX_ADDR=256.0.0.1:1"}
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v (stdout %q)", arg, err, out)
		}
		for _, want := range []string{"Usage:", "token --user", "import-github", "relay", "INBOX_ADDR", "INBOX_JWT_SECRET", "[:8080]"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s: the usage lacks %q:\n%s", arg, want, out)
			}
		}
	}
	out, err := exec.Command(gw, "frobnicate").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: err %v, output %q", err, out)
	}
}
