package app

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
)

// Every environment variable of Config, those of its embedded channel settings
// included, is described in the usage once (a help tag or envHelp, not both), and
// nothing else is: a new setting without a description fails here.
func TestUsageCoversEveryVariable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, v := range envVars() {
		if seen[v.name] {
			t.Errorf("%s is read twice", v.name)
		}
		seen[v.name] = true
		if v.help == "" {
			t.Errorf("%s has no description (a help tag, or envHelp in app/usage.go)", v.name)
		}
	}
	for _, name := range []string{"INBOX_SLACK_BOT_TOKEN", "INBOX_SLACK_URL", "INBOX_RATE_SLACK", "INBOX_ADDR"} {
		if !seen[name] {
			t.Errorf("%s is not among the variables", name)
		}
	}
	var tagged func(rt reflect.Type)
	tagged = func(rt reflect.Type) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			if f.Tag.Get("env") == "" && f.Type.Kind() == reflect.Struct {
				tagged(f.Type)
			} else if f.Tag.Get("help") != "" && envHelp[f.Tag.Get("env")] != "" {
				t.Errorf("%s is described twice: its help tag and envHelp", f.Tag.Get("env"))
			}
		}
	}
	tagged(reflect.TypeFor[Config]())
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
