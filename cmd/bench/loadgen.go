package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// loadSpec is what the load generator child runs: requests cycled over by Concurrency
// workers for Duration.
type loadSpec struct {
	URL         string
	Duration    time.Duration
	Concurrency int
	Requests    []loadRequest
	// KeepLatencies asks for every request's latency in the result (so that the
	// latencies of several runs can be summarised together).
	KeepLatencies bool
	// Timeout bounds each request (0: none); a request cut by it is an error.
	Timeout time.Duration
}

type loadRequest struct {
	Token string
	Body  string
}

// loadResult is what the child reports.
type loadResult struct {
	Requests   int
	Errors     int
	FirstError string
	Seconds    float64
	Latency    Latency
	Latencies  []time.Duration `json:",omitempty"` // when the spec asked (KeepLatencies)
}

// Latency summarizes request latencies, in milliseconds.
type Latency struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Mean float64 `json:"mean_ms"`
}

func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	q := func(p float64) float64 {
		i := int(p*float64(len(ds))+0.5) - 1
		i = min(max(i, 0), len(ds)-1)
		return ms(ds[i])
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Latency{N: len(ds), P50: q(0.50), P90: q(0.90), P99: q(0.99), Mean: ms(sum / time.Duration(len(ds)))}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// runLoadgen is the child: it reads a loadSpec from r and writes a loadResult to w.
func runLoadgen(r io.Reader, w io.Writer) error {
	var spec loadSpec
	if err := json.NewDecoder(r).Decode(&spec); err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 4 * spec.Concurrency, MaxIdleConnsPerHost: 4 * spec.Concurrency}, Timeout: spec.Timeout}
	var (
		mu       sync.Mutex
		all      []time.Duration
		errs     atomic.Int64
		firstErr atomic.Value
	)
	start := time.Now()
	deadline := start.Add(spec.Duration)
	var wg sync.WaitGroup
	for wk := range spec.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(wk) + 1))
			lat := make([]time.Duration, 0, 4096)
			for time.Now().Before(deadline) {
				rq := spec.Requests[rng.Intn(len(spec.Requests))]
				t0 := time.Now()
				err := postGraphQL(context.Background(), client, spec.URL, rq.Token, rq.Body, nil)
				lat = append(lat, time.Since(t0))
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res := loadResult{Requests: len(all), Errors: int(errs.Load()), Seconds: time.Since(start).Seconds(), Latency: summarize(all)}
	if spec.KeepLatencies {
		res.Latencies = all
	}
	if s, ok := firstErr.Load().(string); ok {
		res.FirstError = s
	}
	return json.NewEncoder(w).Encode(res)
}

// postGraphQL sends one GraphQL POST; a non-200 status or an "errors" member is an error.
// The response body is decoded into out when out is not nil.
func postGraphQL(ctx context.Context, client *http.Client, url, token, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || bytes.Contains(b, []byte(`"errors"`)) {
		return fmt.Errorf("status %d: %.300s", resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// spawnLoad runs spec in a child process (this binary with -loadgen).
func spawnLoad(ctx context.Context, spec loadSpec) (loadResult, error) {
	return runChild[loadResult](ctx, "-loadgen", "load generator", spec)
}

// runChild runs this binary with flag, spec as JSON on its stdin, and decodes the JSON
// it prints as a T; what names the child in errors.
func runChild[T any](ctx context.Context, flag, what string, spec any) (T, error) {
	var res T
	exe, err := os.Executable()
	if err != nil {
		return res, err
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return res, err
	}
	cmd := exec.CommandContext(ctx, exe, flag)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return res, fmt.Errorf("%s: %w", what, err)
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return res, fmt.Errorf("%s output: %w", what, err)
	}
	return res, nil
}

// usage is a snapshot of this process's resource use (and the local engine's CPU).
type usage struct {
	cpu       time.Duration // user + system CPU of this process
	mallocs   uint64
	allocated uint64 // bytes
	engineCPU time.Duration
	ops       []string
}

func snapshot(eng *engine) usage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{
		cpu:       time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		mallocs:   ms.Mallocs,
		allocated: ms.TotalAlloc,
		engineCPU: procCPU(eng.pid),
		ops:       eng.rec.Ops(),
	}
}

// procCPU returns the CPU time of process pid from /proc (0 when unknown).
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // utime: field 14 of stat
	st, _ := strconv.ParseInt(f[12], 10, 64) // stime: field 15
	// The kernel's USER_HZ is 100 on every Linux that Go supports.
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// perRequest turns the usage between a and b into per-request figures.
func perRequest(a, b usage, requests int) Cost {
	if requests == 0 {
		return Cost{}
	}
	n := float64(requests)
	c := Cost{
		CPUMicros:     float64((b.cpu - a.cpu).Microseconds()) / n,
		Allocs:        float64(b.mallocs-a.mallocs) / n,
		AllocKB:       float64(b.allocated-a.allocated) / 1024 / n,
		EngineCPUMs:   float64((b.engineCPU - a.engineCPU).Microseconds()) / 1000 / n,
		DynamoDBCalls: map[string]float64{},
	}
	for _, op := range b.ops[min(len(a.ops), len(b.ops)):] {
		c.DynamoDBCalls[op]++
		c.CallsPerRequest++
	}
	for k, v := range c.DynamoDBCalls {
		c.DynamoDBCalls[k] = v / n
	}
	c.CallsPerRequest /= n
	return c
}

// rssMiB is this process's resident set size (VmRSS), in MiB.
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// peak samples RSS while loads run and keeps the maximum.
type peak struct {
	mu sync.Mutex
	v  float64
}

func (p *peak) sampleWhile(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			v := rssMiB()
			p.mu.Lock()
			p.v = max(p.v, v)
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (p *peak) max() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.v
}
