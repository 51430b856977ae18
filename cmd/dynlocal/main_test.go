package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRunStopsOnStdinEOF(t *testing.T) {
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(t.Context(), []string{"-timeout", "90s"}, stdinR, stdoutW, io.Discard)
		stdoutW.Close()
	}()
	endpoint, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil {
		t.Fatalf("reading endpoint: %v (run: %v)", err, <-done)
	}
	endpoint = strings.TrimSpace(endpoint)
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		t.Fatalf("endpoint line %q", endpoint)
	}
	stdinW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after stdin EOF")
	}
	if resp, err := http.Post(endpoint, "application/x-amz-json-1.0", nil); err == nil {
		resp.Body.Close()
		t.Error("engine still answers after run returned")
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-stdin=false", "-timeout", "90s"}, strings.NewReader(""), stdoutW, io.Discard)
		stdoutW.Close()
	}()
	if _, err := bufio.NewReader(stdoutR).ReadString('\n'); err != nil {
		t.Fatalf("reading endpoint: %v (run: %v)", err, <-done)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

func TestRunRejectsArguments(t *testing.T) {
	if err := run(t.Context(), []string{"extra"}, strings.NewReader(""), io.Discard, io.Discard); err == nil {
		t.Fatal("run accepted a positional argument")
	}
}
