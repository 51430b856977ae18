package app

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Every environment variable of Config is described in the usage, and nothing else is:
// a new setting without a line in envHelp fails here.
func TestUsageCoversEveryVariable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, v := range envVars() {
		seen[v.name] = true
		if envHelp[v.name] == "" {
			t.Errorf("%s has no description in envHelp (app/usage.go)", v.name)
		}
	}
	for name := range envHelp {
		if !seen[name] {
			t.Errorf("envHelp describes %s, which Config does not read", name)
		}
	}
	var b bytes.Buffer
	Usage(&b)
	for _, v := range envVars() {
		if !strings.Contains(b.String(), "  "+v.name+" ") {
			t.Errorf("usage lacks %s", v.name)
		}
	}
}

// Run answers help before reading the configuration (which here would fail).
func TestRunHelpNeedsNoConfiguration(t *testing.T) {
	t.Setenv("INBOX_STORE", "nonsense")
	for _, arg := range []string{"help", "-h", "--help"} {
		if !isHelp([]string{arg}) {
			t.Errorf("%s is not help", arg)
		}
		if err := Run(context.Background(), []string{arg}); err != nil {
			t.Errorf("Run(%s) = %v, want nil", arg, err)
		}
	}
	if err := Run(context.Background(), []string{"serve"}); err == nil || !strings.Contains(err.Error(), "INBOX_STORE") {
		t.Errorf("Run(serve) with a bad INBOX_STORE = %v, want the configuration error", err)
	}
	if isHelp([]string{"serve", "-h"}) || isHelp(nil) {
		t.Error("only a first argument asks for help")
	}
}
