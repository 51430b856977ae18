// Package ddbfault is a fault-injecting HTTP proxy for the DynamoDB JSON protocol, for
// tests: put it in front of DynamoDB Local (a client's BaseEndpoint points at the proxy)
// and it injects, at seeded rates, what a bad day on DynamoDB looks like:
//
//   - throttling: HTTP 400 with the __type of ThrottlingException (or
//     ProvisionedThroughputExceededException), as DynamoDB sends it; the call never
//     reaches the engine;
//   - outages: HTTP 500 InternalServerError; the call never reaches the engine;
//   - answers lost after the commit: the call is forwarded and runs, then the client gets
//     an HTTP 500 or a connection closed without an answer;
//   - latency spikes: the call is held before it is forwarded.
//
// Decisions come from one math/rand/v2 PCG source seeded by Config.Seed, taken in call
// order, so a run with one client goroutine is repeatable; with several, the set of faults
// is the same in kind and rate. The proxy counts what it did (Stats).
package ddbfault

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config sets the fault rates, each a probability in [0, 1] drawn independently per call
// in this order: Throttle, Outage, LostAnswer, then Latency (a delayed call may still be
// answered normally).
type Config struct {
	// Seed seeds the decisions (PCG).
	Seed uint64
	// Throttle is the rate of calls answered 400 ThrottlingException (a quarter of them as
	// ProvisionedThroughputExceededException).
	Throttle float64
	// Outage is the rate of calls answered 500 InternalServerError without running.
	Outage float64
	// LostAnswer is the rate of calls that run and whose answer is lost: half get a 500,
	// half a connection closed without a response.
	LostAnswer float64
	// Latency is the rate of calls held for a random time in [0, LatencySpike) first.
	Latency      float64
	LatencySpike time.Duration
	// Ops, when not empty, limits the faults to these operations (e.g. "GetItem");
	// other calls pass through untouched.
	Ops []string
}

// Stats counts the proxy's calls and the faults injected, by kind.
type Stats struct {
	Calls, Throttled, Outages, LostAnswers, Delayed int64
}

// Proxy is an http.Handler that forwards DynamoDB calls to Target with faults. It is safe
// for concurrent use. Faults are injected only while it is enabled (SetEnabled); a
// disabled proxy forwards everything unchanged.
type Proxy struct {
	target string
	client *http.Client

	mu  sync.Mutex
	cfg Config
	rnd *rand.Rand

	enabled                                         atomic.Bool
	calls, throttled, outages, lostAnswers, delayed atomic.Int64
	forced                                          atomic.Int64 // calls left to fail with forcedFault
	forcedFault                                     atomic.Int64
}

// Fault is a failure FailNext forces.
type Fault int

// The faults FailNext can force, each answered as DynamoDB answers it.
const (
	Throttling         Fault = Fault(throttle)   // 400 ThrottlingException
	ThroughputExceeded Fault = Fault(throughput) // 400 ProvisionedThroughputExceededException
	Outage             Fault = Fault(outage)     // 500 InternalServerError
	// AnswerLost runs the call, then answers 500 InternalServerError: the write
	// committed, the client cannot know it.
	AnswerLost Fault = Fault(lost500)
)

// FailNext makes the next n calls, of any operation and whether the proxy is enabled or
// not, fail with f; then the proxy goes on as before. Tests use it for exact counts.
func (p *Proxy) FailNext(n int, f Fault) {
	p.forcedFault.Store(int64(f))
	p.forced.Store(int64(n))
}

// New returns a disabled proxy forwarding to target (a base URL such as
// "http://127.0.0.1:8000") with the faults of cfg.
func New(target string, cfg Config) *Proxy {
	return &Proxy{
		target: strings.TrimSuffix(target, "/"),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		cfg:    cfg,
		rnd:    rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
	}
}

// SetEnabled turns fault injection on or off.
func (p *Proxy) SetEnabled(on bool) { p.enabled.Store(on) }

// SetConfig replaces the fault rates (the random source keeps its state).
func (p *Proxy) SetConfig(cfg Config) {
	p.mu.Lock()
	p.cfg = cfg
	p.mu.Unlock()
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	return Stats{Calls: p.calls.Load(), Throttled: p.throttled.Load(), Outages: p.outages.Load(),
		LostAnswers: p.lostAnswers.Load(), Delayed: p.delayed.Load()}
}

type fault int

const (
	none fault = iota
	throttle
	throughput
	outage
	lost500
	lostDrop
)

// decide draws the fault and the delay of one call of op.
func (p *Proxy) decide(op string) (fault, time.Duration) {
	if p.forced.Load() > 0 && p.forced.Add(-1) >= 0 {
		return fault(p.forcedFault.Load()), 0
	}
	if !p.enabled.Load() {
		return none, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.cfg
	if len(c.Ops) > 0 && !contains(c.Ops, op) {
		return none, 0
	}
	f := none
	switch {
	case p.rnd.Float64() < c.Throttle:
		f = throttle
		if p.rnd.IntN(4) == 0 {
			f = throughput
		}
	case p.rnd.Float64() < c.Outage:
		f = outage
	case p.rnd.Float64() < c.LostAnswer:
		f = lost500
		if p.rnd.IntN(2) == 0 {
			f = lostDrop
		}
	}
	var d time.Duration
	if c.LatencySpike > 0 && p.rnd.Float64() < c.Latency {
		d = time.Duration(p.rnd.Int64N(int64(c.LatencySpike)))
	}
	return f, d
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// errorBody is DynamoDB's JSON error document (awsJson1_0: the __type names the shape).
func errorBody(shape, msg string) []byte {
	return []byte(fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, shape, msg))
}

func writeError(w http.ResponseWriter, status int, shape, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Requestid", "ddbfault")
	w.WriteHeader(status)
	_, _ = w.Write(errorBody(shape, msg))
}

// ServeHTTP forwards one call, with the fault drawn for it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.calls.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	op := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(op, '.'); i >= 0 {
		op = op[i+1:]
	}
	f, delay := p.decide(op)
	if delay > 0 {
		p.delayed.Add(1)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	switch f {
	case throttle:
		p.throttled.Add(1)
		writeError(w, http.StatusBadRequest, "ThrottlingException", "Rate of requests exceeds the allowed throughput.")
		return
	case throughput:
		p.throttled.Add(1)
		writeError(w, http.StatusBadRequest, "ProvisionedThroughputExceededException",
			"The level of configured provisioned throughput for the table was exceeded.")
		return
	case outage:
		p.outages.Add(1)
		writeError(w, http.StatusInternalServerError, "InternalServerError", "Internal server error")
		return
	}
	resp, err := p.forward(r, body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalServerError", "proxy: "+err.Error())
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalServerError", "proxy: "+err.Error())
		return
	}
	switch f {
	case lost500:
		p.lostAnswers.Add(1)
		writeError(w, http.StatusInternalServerError, "InternalServerError", "Internal server error")
		return
	case lostDrop:
		p.lostAnswers.Add(1)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close() // no response at all: the client sees EOF
				return
			}
		}
		writeError(w, http.StatusInternalServerError, "InternalServerError", "Internal server error")
		return
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// forward sends the call to the target with its method, path, headers and body.
func (p *Proxy) forward(r *http.Request, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Host = r.Host
	return p.client.Do(req)
}

// Close releases the proxy's idle connections to the target.
func (p *Proxy) Close() { p.client.CloseIdleConnections() }
