package main

// Scenario 9, abuse: the attacks of issues 8 and 16 against the real gateway binary.
//
// The gateway runs as a child process (`go build` of the module's main package, started
// with INBOX_STORE=dynamodb on the bench's engine and table), a fresh one for every
// attack, so that its RSS (VmRSS from /proc/<pid>/status, sampled every 50 ms) is the
// gateway's alone, every attack starts from the same state, and the HTTP server is the
// one server.go configures (its timeouts and limits included), not the bench's own.
// The attacks come from another child (this binary with -abusegen), the normal client
// from the load generator (-loadgen: the initial inbox load at concurrency 1), so
// neither weighs on the gateway's figures.
//
// For every attack: the normal client's p50/p99 at rest; one hostile request alone (the
// gateway's RSS growth, peak minus rest, and its CPU time, user + system from
// /proc/<pid>/stat, until it is quiet again, less its idle rate); then -abuse-conc (8)
// hostile requests at once, repeated for -abuse-window, while the normal client runs
// (peak RSS, the client's p50/p99 during the attack). The connection attacks (slow body, idle connection, silent
// WebSocket peer) hold their connections up to -abuse-hold and report how long the
// gateway kept them. The alias attacks also report the DynamoDB calls of one aliased
// document against the same document without aliases, from the gateway's /metrics
// (inbox_dynamodb_calls_total: the gateway is another process, so the bench's in-process
// call recorder cannot see its calls). A gateway whose RSS passes -abuse-rss-cap is
// killed whenever it does (the attack then reports the cap), so that the run cannot
// exhaust the machine. Issue 16's attacks (abusecost.go: provider callbacks, Liquid range
// bombs, locale amplification) are REST requests; its sends run their one request only,
// counted until their recipients have the notification.
//
// Goals (issue 8): no request without a token grows the gateway by more than 8 MiB;
// eight hostile requests at once leave it under 256 MiB RSS and keep the normal client's
// p99 within 2x its p99 at rest; an aliased document costs the DynamoDB calls of the
// same document without aliases. Issue 16: one hostile request costs the gateway at most
// about a CPU-second and 64 MiB, and one it must refuse answers a 4xx with a code.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
)

// abuseConfig holds the abuse scenario's flags.
type abuseConfig struct {
	rest      time.Duration // the normal client's window at rest
	window    time.Duration // the window of the eight-at-once requests
	hold      time.Duration // how long connection attacks keep their connections
	conc      int           // hostile requests at once
	cacheDocs int           // distinct padded documents of the query-cache attack
	rssCap    float64       // MiB: a gateway above it is killed
	only      string        // comma-separated attack names to run ("" all)
}

// Goals of issue 8.
const (
	goalGrowthMiB = 8.0
	goalPeakMiB   = 256.0
	goalP99Ratio  = 2.0
	// Issue 16's: one hostile request costs the gateway at most about a CPU-second and
	// 64 MiB.
	goalCPUSeconds    = 1.0
	goalGrowthCostMiB = 64.0
	abuseDocBytes     = 1<<20 - 4096 // a hostile document: just under the 1 MiB body limit with its JSON envelope
	viewerAliases     = 4900
	// The "-in-limits" variants are the largest alias documents that the gateway's
	// default limits let through (INBOX_COMPLEXITY_LIMIT 5,000 and, since issue 8,
	// httpapi.ParserTokenLimit 5,000 tokens: 6 tokens a viewer alias, 11 a node alias, 13 a
	// markRead alias): the amplification that is left to the resolvers, where issue 8's
	// "a document costs what it reaches" is seen.
	viewerAliasesInLimits   = 800
	nodeAliasesInLimits     = 450
	markReadAliasesInLimits = 380
	nodeAliases             = 2400
	markReadAliases         = 500
)

// attack kinds (abuseSpec.Kind).
const (
	kindPost     = "post"      // POST the spec's bodies
	kindSlowBody = "slow-body" // a body one byte a second
	kindIdle     = "idle"      // one request, then an idle keep-alive connection
	kindSilentWS = "silent-ws" // a subscriber that never answers
)

// abuseCase is one attack of the scenario.
type abuseCase struct {
	name      string
	kind      string
	tokenless bool
	// body returns the i-th hostile document (a GraphQL request body).
	body func(i int) string
	// plain, when set, is the same document without aliases (DynamoDB calls compared).
	plain func() string
	// reset runs before each single document (markRead: mark the ids unread again).
	reset func(ctx context.Context, gw *childGateway) error
	// total bounds the requests of the at-once phase (0: as many as the window allows).
	total int

	// REST requests (the attacks of issue 16): the path and query (default "/graphql"),
	// method (default POST), content type (default application/json) and headers (called
	// when the spec is made: a signature over a fresh timestamp) of the hostile request;
	// idempotent gives each request its own Idempotency-Key (a send).
	path, method, contentType string
	header                    func() map[string]string
	idempotent                bool
	// service: the request carries a service token of the tenant (send and admin scopes:
	// a tenant's own service, or a template editor it opens to its customers) instead of
	// the attacker user's.
	service bool
	// setup prepares the table for the attack (the templates and user locales a send
	// needs) through a gateway of its own, stopped before the measured one starts; it
	// answers what the gateway said, which the result reports (a PUT refused is a finding,
	// not an error).
	setup func(ctx context.Context, gw *childGateway) (string, error)
	// alone skips the at-once phase: a send's work goes on after its 202, so sends at
	// once would measure a queue, and leave durable work that the next attacks' gateways
	// recover.
	alone bool
	// bound is how long the one hostile request may take (0: abuseOneBound).
	bound time.Duration
	// recipients of a send: when it is accepted (2xx), the one request's CPU is counted
	// until each has a new unread notification (read from the table, not through the
	// gateway) and the gateway is quiet, within abuseCostQuiet; the gateway's work after
	// the 202 waits on DynamoDB at times, when a quiet CPU does not mean it is done.
	recipients []string
	// cost judges the request by issue 16's goals: about a CPU-second and 64 MiB at most;
	// refuse, also by its answer: a 4xx with a code.
	cost, refuse bool
}

// AbuseResult is scenario 9.
type AbuseResult struct {
	Engine      string         `json:"engine"`
	Concurrency int            `json:"hostile_requests_at_once"`
	Window      string         `json:"window"`
	Hold        string         `json:"hold"`
	RSSCapMiB   float64        `json:"rss_cap_mib"`
	Keepalive   string         `json:"gateway_keepalive"`
	Attacks     []AttackResult `json:"attacks"`
	Note        string         `json:"note,omitempty"`
}

// AttackResult is one attack's figures.
type AttackResult struct {
	Name      string `json:"name"`
	Tokenless bool   `json:"without_token"`
	// ServiceToken: the requests carry a service token of the tenant (issue 16's
	// templates and sends), not a user's.
	ServiceToken bool `json:"service_token,omitempty"`
	// LoadAvg is the machine's 1-minute load average when the attack started (the
	// figures of a busy machine are noisier).
	LoadAvg string `json:"load_average_1m"`
	// SettleSeconds is how long the attack waited for the engine to answer as fast as
	// at the scenario's start (a killed gateway's calls may still be queued in it).
	SettleSeconds float64 `json:"engine_settle_seconds"`
	// RSS of the gateway, MiB: at rest (after the normal client's rest window), the peak
	// while one hostile request ran, the peak with Concurrency at once, and 1 s after.
	RSSRestMiB   float64 `json:"rss_rest_mib"`
	RSSOneMiB    float64 `json:"rss_peak_one_request_mib"`
	GrowthOneMiB float64 `json:"growth_one_request_mib"`
	RSSPeakMiB   float64 `json:"rss_peak_at_once_mib"`
	RSSAfterMiB  float64 `json:"rss_1s_after_mib"`
	Capped       bool    `json:"killed_at_rss_cap,omitempty"`
	// CPUOneSeconds is the gateway's CPU time (user + system, /proc/<pid>/stat) from just
	// before the one hostile request until the gateway was quiet again (what it did after
	// answering included: a send's rendering), less its idle rate over that time
	// (IdleCPUMsPerSecond, measured after its start: its scheduler's polls); CPUBusy says
	// it was still busy at abuseQuietBound (abuseCostQuiet) after the attacker returned,
	// CPUOneSeconds then a lower bound.
	CPUOneSeconds      float64 `json:"cpu_one_request_seconds"`
	CPUBusy            bool    `json:"cpu_still_busy,omitempty"`
	IdleCPUMsPerSecond float64 `json:"idle_cpu_ms_per_second"`
	// Setup is what the gateway answered to the attack's setup (issue 16's sends).
	Setup string `json:"setup,omitempty"`
	// Alone: the attack has no at-once phase (abuseCase.alone).
	Alone bool `json:"one_request_only,omitempty"`
	// The normal client at rest and during the at-once phase.
	ClientRest   Latency `json:"client_at_rest"`
	ClientAttack Latency `json:"client_during_attack"`
	ClientErrors int     `json:"client_errors_during_attack"`
	P99Ratio     float64 `json:"client_p99_attack_over_rest"`
	// The hostile requests.
	One    abuseOutcome `json:"one_request"`
	AtOnce abuseOutcome `json:"at_once"`
	// DynamoDB calls of one document (alias attacks), by operation.
	Calls      map[string]float64 `json:"dynamodb_calls_aliased,omitempty"`
	PlainCalls map[string]float64 `json:"dynamodb_calls_without_aliases,omitempty"`
	// Goals; nil when not judged for this attack.
	GoalGrowth *bool `json:"goal_growth_8mib,omitempty"`
	GoalPeak   *bool `json:"goal_peak_256mib"`
	GoalP99    *bool `json:"goal_p99_2x"`
	GoalCalls  *bool `json:"goal_calls_equal,omitempty"`
	// Issue 16's goals for one hostile request: at most about a CPU-second and 64 MiB of
	// growth, and (refusals) a 4xx answer with a code.
	GoalCPU      *bool  `json:"goal_cpu_1s,omitempty"`
	GoalGrowth64 *bool  `json:"goal_growth_64mib,omitempty"`
	GoalRefused  *bool  `json:"goal_4xx_with_code,omitempty"`
	Error        string `json:"error,omitempty"`
}

// abuseOutcome is what the attacker saw.
type abuseOutcome struct {
	Requests   int            `json:"requests"`
	Outcomes   map[string]int `json:"outcomes"` // "200 ok", "400 GRAPHQL_PARSE_FAILED", "closed", ...
	MaxBytes   int64          `json:"largest_response_bytes"`
	MaxSeconds float64        `json:"slowest_seconds"`
	// Connection attacks: how long the gateway kept each connection (seconds; the hold
	// when it was still open) and how many were still open at the end of the hold.
	Lifetimes []float64 `json:"connection_seconds,omitempty"`
	StillOpen int       `json:"still_open_at_hold,omitempty"`
}

// abuseSpec is what the attacker child (-abusegen) runs.
type abuseSpec struct {
	Kind string
	URL  string // http://host:port/graphql, or a REST path with its query
	// Method (default POST), ContentType (default application/json) and Header of a
	// kindPost request; Idempotent: a fresh Idempotency-Key for each request.
	Method      string
	ContentType string
	Header      map[string]string
	Idempotent  bool
	Token       string
	Bodies      []string // kindPost: cycled (distinct documents are generated from Template)
	Template    string   // kindPost, when set: "%d" in it is replaced by the request index
	Pad         int      // with Template: padded to this many bytes (inside the comment)
	First       int      // with Template: the index of the first document
	Conc        int
	Total       int // 0: until Duration
	Duration    time.Duration
	// Grace is how long a request started within Duration may run past it before the
	// attacker gives up on it (counted as a timeout).
	Grace time.Duration
}

// abuseChildResult is what the attacker child reports.
type abuseChildResult struct {
	Outcome abuseOutcome
	Err     string
}

// ---- the scenario --------------------------------------------------------------------

func (b *harness) abuseScenario(ctx context.Context) (*AbuseResult, error) {
	c := b.c.abuse
	progress("abuse: building the gateway binary")
	bin, cleanup, err := buildGateway(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	secretBytes := make([]byte, 32)
	_, _ = rand.Read(secretBytes)
	secret := hex.EncodeToString(secretBytes)
	verifier, err := auth.NewVerifier(auth.Config{Secret: []byte(secret), Leeway: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	ds, err := b.dataset(ctx)
	if err != nil {
		return nil, err
	}
	if len(ds.users) < 2 {
		return nil, errors.New("the abuse scenario needs at least 2 users (-users)")
	}
	sign := func(user string) (string, error) {
		return verifier.Sign(auth.Claims{TenantID: tenant, UserID: user}, 24*time.Hour)
	}
	normalTok, err := sign(ds.users[0])
	if err != nil {
		return nil, err
	}
	attackerTok, err := sign(ds.users[1])
	if err != nil {
		return nil, err
	}
	serviceTok, err := verifier.Sign(auth.Claims{TenantID: tenant, Subject: "bench-abuse-service",
		Scopes: []string{auth.ScopeSend, auth.ScopeAdmin}}, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	hooks, err := newCallbackSecrets()
	if err != nil {
		return nil, err
	}
	res := &AbuseResult{Engine: b.eng.name, Concurrency: c.conc, Window: c.window.String(), Hold: c.hold.String(),
		RSSCapMiB: c.rssCap, Keepalive: abuseKeepAlive.String()}

	start := func() (*childGateway, error) {
		gw, err := startChildGateway(ctx, bin, b.eng, b.c.table, secret, c.rssCap, hooks.env())
		if err == nil {
			gw.attackerTok, gw.serviceTok = attackerTok, serviceTok
		}
		return gw, err
	}
	// The attacker's notification ids (node and markRead aliases).
	gw, err := start()
	if err != nil {
		return nil, err
	}
	ids, err := gw.inboxIDs(ctx, attackerTok, 2)
	gw.stop()
	if err != nil {
		return nil, fmt.Errorf("attacker's notification ids: %w", err)
	}
	if len(ids) < 2 {
		return nil, fmt.Errorf("the attacker %s has %d notifications, want 2 (seed more: -per-user)", ds.users[1], len(ids))
	}

	baseline := b.engineBaseline(ctx)
	for _, ac := range abuseCases(ids, c.cacheDocs, hooks) {
		if !c.selected(ac.name) {
			continue
		}
		waited := b.settleEngine(ctx, baseline)
		progress("abuse: %s (the engine settled in %s)", ac.name, waited.Round(100*time.Millisecond))
		r, err := b.runAttack(ctx, ac, start, normalTok)
		r.SettleSeconds = waited.Seconds()
		if err != nil {
			r.Error = err.Error()
			progress("abuse: %s: %v", ac.name, err)
		}
		res.Attacks = append(res.Attacks, r)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	return res, nil
}

// abuseGrace is how long a hostile request started in the window may run past it, and
// abuseOneBound how long one hostile document may take alone: both bound the scenario's
// runtime on a gateway that takes minutes to answer (the request is then a timeout, and
// its DynamoDB calls the ones made until then). abuseCostBound is issue 16's (a request
// that costs tens of CPU-seconds shows as a timeout, not as a run of minutes).
// abuseQuietBound (abuseCostQuiet for issue 16's) is how long after the attacker returns
// the gateway's CPU is still counted while it is busy: work it goes on with after the
// client gave up, or after a 202 (a send renders after it); long enough for tens of
// CPU-seconds on two cores, and still a bound.
const (
	abuseGrace      = 3 * time.Second
	abuseOneBound   = 10 * time.Second
	abuseCostBound  = 20 * time.Second
	abuseQuietBound = 10 * time.Second
	abuseCostQuiet  = 2 * time.Minute
)

// abuseKeepAlive is the gateway's INBOX_KEEPALIVE in this scenario: short, so that a
// gateway that drops silent peers after about two intervals does so within the hold.
const abuseKeepAlive = 2 * time.Second

func (c abuseConfig) selected(name string) bool {
	if strings.TrimSpace(c.only) == "" {
		return true
	}
	for _, s := range strings.Split(c.only, ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}

func gqlBody(query string) string {
	b, _ := json.Marshal(map[string]string{"query": query})
	return string(b)
}

// abuseCases are the attacks of issue 8, in its order except that the alias attacks come
// last, heaviest last: on a gateway without bounds they leave thousands of calls queued in
// a local engine, which the next attack would wait for (settleEngine); then issue 16's.
func abuseCases(ids []string, cacheDocs int, hooks callbackSecrets) []abuseCase {
	directives := func() string {
		var q strings.Builder
		q.WriteString("query { __typename")
		for i := 0; q.Len() < abuseDocBytes; i++ {
			fmt.Fprintf(&q, " @d%d", i)
		}
		q.WriteString(" }")
		return gqlBody(q.String())
	}()
	aliases := func(n int, field func(i int) string) string {
		var q strings.Builder
		for i := range n {
			q.WriteString(field(i))
			q.WriteByte(' ')
		}
		return q.String()
	}
	viewerDoc := func(n int) string {
		return gqlBody("query { " + aliases(n, func(i int) string { return fmt.Sprintf("a%d: viewer { unreadCount }", i) }) + "}")
	}
	viewerFull, viewerInLimits := viewerDoc(viewerAliases), viewerDoc(viewerAliasesInLimits)
	nodeDoc := func(n int) string {
		return gqlBody("query { " + aliases(n, func(i int) string { return fmt.Sprintf("n%d: node(id: %q) { id }", i, ids[i%2]) }) + "}")
	}
	markDoc := func(n int) string {
		return gqlBody("mutation { " + aliases(n, func(i int) string {
			return fmt.Sprintf("m%d: markRead(ids: [%q]) { unreadCount }", i, ids[0])
		}) + "}")
	}
	nodeFull, nodeInLimits := nodeDoc(nodeAliases), nodeDoc(nodeAliasesInLimits)
	markFull, markInLimits := markDoc(markReadAliases), markDoc(markReadAliasesInLimits)
	markUnread := func(ctx context.Context, gw *childGateway) error {
		return gw.post(ctx, gw.attackerTok, gqlBody(fmt.Sprintf(`mutation { markUnread(ids: [%q]) { unreadCount } }`, ids[0])))
	}
	viewerPlain := func() string { return gqlBody("query { viewer { unreadCount } }") }
	nodePlain := func() string { return gqlBody(fmt.Sprintf("query { nodes(ids: [%q, %q]) { id } }", ids[0], ids[1])) }
	markPlain := func() string { return gqlBody(fmt.Sprintf(`mutation { markRead(ids: [%q]) { unreadCount } }`, ids[0])) }
	introspection := gqlBody(`query IntrospectionQuery { __schema { queryType { name } mutationType { name } subscriptionType { name } ` +
		`types { kind name description fields(includeDeprecated: true) { name description args { name description type { kind name ofType { kind name ofType { kind name } } } defaultValue } ` +
		`type { kind name ofType { kind name ofType { kind name ofType { kind name } } } } isDeprecated deprecationReason } ` +
		`inputFields { name type { kind name ofType { kind name } } } interfaces { kind name } enumValues(includeDeprecated: true) { name } possibleTypes { kind name } } ` +
		`directives { name description locations args { name } } } }`)
	const form = "application/x-www-form-urlencoded"
	fields := twilioForm(callbackBodyBytes)
	smallForm := twilioForm(0)
	sgBody := sendgridBatch(callbackBodyBytes)
	text := func(s string) func(int) string { return func(int) string { return s } }
	putRange := func(src string) func(int) string { return text(templateBody("en", src, "")) }
	send := func(tpl string, recipients []string, data string) func(int) string {
		return text(sendBody(tpl, recipients, data))
	}
	// Each send its own recipients: a send that a gateway accepts is waited for until
	// they have its notification.
	toInt64, to20M, toData, toLocales := []string{"abuse-r-int64"}, []string{"abuse-r-20m"}, []string{"abuse-r-data"}, localeUsers()
	return []abuseCase{
		{name: "directive-flood", kind: kindPost, tokenless: true, body: func(int) string { return directives }},
		{name: "query-cache", kind: kindPost, tokenless: true, total: cacheDocs},
		{name: "introspection", kind: kindPost, tokenless: true, body: func(int) string { return introspection }},
		{name: "slow-body", kind: kindSlowBody, tokenless: true},
		{name: "idle-connection", kind: kindIdle, tokenless: true},
		{name: "silent-websocket", kind: kindSilentWS},
		{name: "viewer-aliases", kind: kindPost, body: func(int) string { return viewerFull }, plain: viewerPlain},
		{name: "markread-aliases", kind: kindPost, body: func(int) string { return markFull }, reset: markUnread, plain: markPlain},
		{name: "markread-aliases-380", kind: kindPost, body: func(int) string { return markInLimits }, reset: markUnread, plain: markPlain},
		{name: "viewer-aliases-800", kind: kindPost, body: func(int) string { return viewerInLimits }, plain: viewerPlain},
		{name: "node-aliases-450", kind: kindPost, body: func(int) string { return nodeInLimits }, plain: nodePlain},
		{name: "node-aliases", kind: kindPost, body: func(int) string { return nodeFull }, plain: nodePlain},

		// Issue 16's (abusecost.go), the locale attack last: on a gateway without its fix,
		// a send left unfinished is recovered by the gateways that follow.
		{name: "twilio-form-fields", kind: kindPost, tokenless: true, path: twilioURL(0), contentType: form, header: twilioSignature,
			body: text(fields), bound: abuseCostBound, cost: true, refuse: true},
		{name: "twilio-long-query", kind: kindPost, tokenless: true, path: twilioURL(callbackQueryBytes), contentType: form, header: twilioSignature,
			body: text(smallForm), bound: abuseCostBound, cost: true, refuse: true},
		{name: "sendgrid-big-body", kind: kindPost, tokenless: true, path: sendgridPath, header: hooks.sendgridSignature(sgBody),
			body: text(sgBody), bound: abuseCostBound, cost: true, refuse: true},
		// Two integers at the int64 limit are a legitimate range (its old counter overflowed
		// and never ended): the PUT and the send must be answered as any other, cheaply.
		{name: "template-range-int64-put", kind: kindPost, service: true, method: http.MethodPut, path: "/v1/templates/" + tplInt64,
			body: putRange(rangeInt64), bound: abuseCostBound, cost: true},
		{name: "template-range-20m-put", kind: kindPost, service: true, method: http.MethodPut, path: "/v1/templates/" + tpl20M,
			body: putRange(range20M), bound: abuseCostBound, cost: true, refuse: true},
		{name: "template-range-int64-send", kind: kindPost, service: true, path: "/v1/notifications", idempotent: true,
			setup: putTemplates(tplInt64, templateBody("en", rangeInt64, "")), body: send(tplInt64, toInt64, "{}"),
			recipients: toInt64, bound: abuseCostBound, alone: true, cost: true},
		{name: "template-range-20m-send", kind: kindPost, service: true, path: "/v1/notifications", idempotent: true,
			setup: putTemplates(tpl20M, templateBody("en", range20M, "")), body: send(tpl20M, to20M, "{}"),
			recipients: to20M, bound: abuseCostBound, alone: true, cost: true, refuse: true},
		{name: "template-range-data-send", kind: kindPost, service: true, path: "/v1/notifications", idempotent: true,
			setup: putTemplates(tplData, templateBody("en", rangeData, "")), body: send(tplData, toData, `{"n":`+abuseHugeN+`}`),
			recipients: toData, bound: abuseCostBound, alone: true, cost: true, refuse: true},
		{name: "template-locales-40", kind: kindPost, service: true, path: "/v1/notifications", idempotent: true,
			setup: localeSetup, body: send(tplLocales, toLocales, `{"e":""}`), recipients: toLocales,
			bound: abuseCostBound, alone: true, cost: true},
	}
}

// cacheTemplate is the query-cache attack's document: valid, distinct by its index,
// padded to abuseDocBytes inside a comment.
const cacheTemplate = "query { __typename } # %d "

// spec returns the attacker child's spec of ac for conc requests at once.
func (ac abuseCase) spec(gw *childGateway, conc, total int, d time.Duration) abuseSpec {
	s := abuseSpec{Kind: ac.kind, URL: gw.base + cmp.Or(ac.path, "/graphql"), Method: ac.method, ContentType: ac.contentType,
		Idempotent: ac.idempotent, Conc: conc, Total: total, Duration: d, Grace: abuseGrace}
	switch {
	case ac.service:
		s.Token = gw.serviceTok
	case !ac.tokenless:
		s.Token = gw.attackerTok
	}
	if ac.header != nil {
		s.Header = ac.header()
	}
	switch {
	case ac.name == "query-cache":
		s.Template, s.Pad = cacheTemplate, abuseDocBytes
	case ac.body != nil:
		s.Bodies = []string{ac.body(0)}
	}
	return s
}

func (b *harness) runAttack(ctx context.Context, ac abuseCase, start func() (*childGateway, error), normalTok string) (AttackResult, error) {
	c := b.c.abuse
	r := AttackResult{Name: ac.name, Tokenless: ac.tokenless, ServiceToken: ac.service, LoadAvg: loadAvg(), Alone: ac.alone}
	if ac.setup != nil {
		// On a gateway of its own: what the setup allocates (parsing templates at PUT)
		// is not in the measured gateway's RSS at rest.
		gw, err := start()
		if err != nil {
			return r, err
		}
		r.Setup, err = ac.setup(ctx, gw)
		gw.stop()
		if err != nil {
			return r, fmt.Errorf("setup: %w", err)
		}
	}
	gw, err := start()
	if err != nil {
		return r, err
	}
	defer gw.stop()
	gw.measureIdle()
	r.IdleCPUMsPerSecond = float64(gw.idle.Milliseconds()) * float64(time.Second/quietWindow)
	// The normal client gives up on a request after the window and the grace: a stalled
	// gateway shows as errors and a p99 at that bound, not as a scenario of minutes.
	normal := loadSpec{URL: gw.base + "/graphql", Concurrency: 1, Requests: []loadRequest{{Token: normalTok, Body: gqlBody(inboxQuery)}},
		Timeout: c.window + abuseGrace}

	// The normal client: a warm-up, then its figures at rest.
	normal.Duration = min(c.rest, 500*time.Millisecond)
	if _, err := spawnLoad(ctx, normal); err != nil {
		return r, err
	}
	normal.Duration = c.rest
	lr, err := spawnLoad(ctx, normal)
	if err != nil {
		return r, err
	}
	r.ClientRest = lr.Latency
	r.RSSRestMiB = rssMiBOf(gw.pid)

	// The DynamoDB calls of one document without aliases, then with them.
	if ac.plain != nil {
		if ac.reset != nil {
			if err := ac.reset(ctx, gw); err != nil {
				return r, fmt.Errorf("reset: %w", err)
			}
		}
		before, err := gw.calls(ctx)
		if err != nil {
			return r, err
		}
		if err := gw.post(ctx, gw.attackerTok, ac.plain()); err != nil {
			return r, fmt.Errorf("the document without aliases: %w", err)
		}
		after, err := gw.calls(ctx)
		if err != nil {
			return r, err
		}
		r.PlainCalls = diffCalls(before, after)
		if ac.reset != nil {
			if err := ac.reset(ctx, gw); err != nil {
				return r, fmt.Errorf("reset: %w", err)
			}
		}
	}

	// One hostile request alone, once the gateway is quiet (the normal client's requests
	// done). One document gets up to abuseOneBound (or its case's bound); one connection a
	// short look (connection lifetimes are measured in the at-once phase, up to the hold).
	gw.quiet(abuseQuietBound)
	unread, err := b.unreadCounts(ctx, ac.recipients)
	if err != nil {
		return r, err
	}
	before, err := gw.calls(ctx)
	if err != nil {
		return r, err
	}
	one := ac.spec(gw, 1, 1, min(c.hold, 2*time.Second))
	if ac.kind == kindPost {
		one.Duration, one.Grace = cmp.Or(ac.bound, abuseOneBound), 0
	}
	t0, cpu0 := time.Now(), gw.cpu()
	watch := gw.watchRSS()
	r.One, err = runAbuseChild(ctx, one)
	if err != nil {
		_, _ = watch()
		return r, err
	}
	// The DynamoDB calls are the document's own: read before the wait below, in which the
	// gateway's scheduler polls.
	var after map[string]float64
	var afterErr error
	if ac.plain != nil {
		after, afterErr = gw.calls(ctx)
	}
	quietBound := abuseQuietBound
	if ac.cost {
		quietBound = abuseCostQuiet
	}
	end := time.Now().Add(quietBound)
	if accepted(r.One) {
		r.CPUBusy = !b.waitUnread(ctx, gw, ac.recipients, unread, end)
	}
	if !r.CPUBusy {
		r.CPUBusy = gw.quiet(time.Until(end))
	}
	r.RSSOneMiB, r.Capped = watch()
	r.CPUOneSeconds = gw.cpuSince(cpu0, t0).Seconds()
	r.GrowthOneMiB = r.RSSOneMiB - r.RSSRestMiB
	if ac.cost {
		judgeCost(&r, ac)
	}
	if ac.plain != nil && !r.Capped {
		if afterErr != nil {
			return r, afterErr
		}
		r.Calls = diffCalls(before, after)
		ok := sumCalls(r.Calls) <= sumCalls(r.PlainCalls)
		r.GoalCalls = &ok
	}
	if ac.tokenless {
		ok := !r.Capped && r.GrowthOneMiB <= goalGrowthMiB
		r.GoalGrowth = &ok
	}

	// conc hostile requests at once, repeated, while the normal client runs.
	if !r.Capped && !ac.alone {
		d := c.window
		if ac.kind != kindPost {
			d = c.hold
		}
		total := ac.total
		if ac.name == "query-cache" {
			d = max(d, 60*time.Second) // bounded by the documents, not the window
		}
		atOnce := ac.spec(gw, c.conc, total, d)
		atOnce.First = 1 // the cache attack's documents differ from the one sent alone
		watch := gw.watchRSS()
		var wg sync.WaitGroup
		var attackErr error
		wg.Add(1)
		attackDone := make(chan struct{})
		go func() {
			defer wg.Done()
			defer close(attackDone)
			r.AtOnce, attackErr = runAbuseChild(ctx, atOnce)
		}()
		// The normal client runs while the attack does: in slices of the window, until
		// the attack ends (a cache attack ends when its documents are sent).
		var lat []time.Duration
		normal.Duration = min(d, c.window)
		normal.KeepLatencies = true
		for {
			lr, err := spawnLoad(ctx, normal)
			if err != nil {
				wg.Wait()
				return r, err
			}
			lat = append(lat, lr.Latencies...)
			r.ClientErrors += lr.Errors
			select {
			case <-attackDone:
			default:
				continue
			}
			break
		}
		wg.Wait()
		r.RSSPeakMiB, r.Capped = watch()
		r.ClientAttack = summarize(lat)
		if attackErr != nil {
			return r, attackErr
		}
	}
	time.Sleep(time.Second)
	r.RSSAfterMiB = rssMiBOf(gw.pid)
	if ac.alone {
		return r, nil
	}
	okPeak := !r.Capped && r.RSSPeakMiB < goalPeakMiB
	r.GoalPeak = &okPeak
	r.P99Ratio = ratio(r.ClientAttack.P99, r.ClientRest.P99)
	okP99 := !r.Capped && r.ClientAttack.N > 0 && r.P99Ratio <= goalP99Ratio
	r.GoalP99 = &okP99
	return r, nil
}

// judgeCost judges one hostile request by issue 16's goals: at most about a CPU-second
// (goalCPUSeconds; a request whose gateway was still busy at the bound, or was killed at
// the RSS cap, fails), at most goalGrowthCostMiB of RSS growth (requests with a token:
// one without has issue 8's stricter goal), and, for an attack the gateway must refuse,
// every answer a 4xx with a code.
func judgeCost(r *AttackResult, ac abuseCase) {
	okCPU := !r.Capped && !r.CPUBusy && r.CPUOneSeconds <= goalCPUSeconds
	r.GoalCPU = &okCPU
	if !ac.tokenless {
		ok := !r.Capped && r.GrowthOneMiB <= goalGrowthCostMiB
		r.GoalGrowth64 = &ok
	}
	if ac.refuse {
		ok := r.One.Requests > 0
		for outcome, n := range r.One.Outcomes {
			status, code, _ := strings.Cut(outcome, " ")
			if n > 0 && (len(status) != 3 || status[0] != '4' || code == "" || code == "?") {
				ok = false
			}
		}
		r.GoalRefused = &ok
	}
}

// unreadCounts are users' unread counts, read from the table.
func (b *harness) unreadCounts(ctx context.Context, users []string) ([]int, error) {
	out := make([]int, len(users))
	for i, u := range users {
		n, err := b.st.UnreadCount(ctx, inbox.Viewer{TenantID: tenant, UserID: u})
		if err != nil {
			return nil, fmt.Errorf("unread count of %s: %w", u, err)
		}
		out[i] = n
	}
	return out, nil
}

// waitUnread waits until each of users has more unread notifications than before (a
// send was processed for them), polling the table every 100 ms, until end or the
// gateway's exit; it reports whether they all had.
func (b *harness) waitUnread(ctx context.Context, gw *childGateway, users []string, before []int, end time.Time) bool {
	for i := 0; i < len(users); {
		n, err := b.st.UnreadCount(ctx, inbox.Viewer{TenantID: tenant, UserID: users[i]})
		if err == nil && n > before[i] {
			i++
			continue
		}
		if time.Now().After(end) {
			return false
		}
		select {
		case <-gw.done:
			return false
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}

// accepted reports whether a request was answered 2xx.
func accepted(o abuseOutcome) bool {
	for outcome, n := range o.Outcomes {
		if n > 0 && strings.HasPrefix(outcome, "2") {
			return true
		}
	}
	return false
}

// engineBaseline is the median time of 5 DescribeTable calls on an idle engine.
func (b *harness) engineBaseline(ctx context.Context) time.Duration {
	var ds []time.Duration
	for range 5 {
		ds = append(ds, b.describeTime(ctx))
	}
	slices.Sort(ds)
	return ds[2]
}

func (b *harness) describeTime(ctx context.Context) time.Duration {
	t0 := time.Now()
	_, _ = b.eng.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(b.c.table)})
	return time.Since(t0)
}

// settleEngine waits (at most 45 s) until the engine answers within 3x its baseline (and at
// least 25 ms): the calls of an attack's gateway, killed when the attack ended, may still
// be queued in a local engine and would weigh on the next attack's figures at rest.
func (b *harness) settleEngine(ctx context.Context, baseline time.Duration) time.Duration {
	t0 := time.Now()
	bound := max(3*baseline, 25*time.Millisecond)
	for fast := 0; fast < 2 && time.Since(t0) < 45*time.Second && ctx.Err() == nil; {
		if b.describeTime(ctx) <= bound {
			fast++ // two fast answers in a row
			continue
		}
		fast = 0
		time.Sleep(500 * time.Millisecond)
	}
	return time.Since(t0)
}

// loadAvg is the 1-minute load average from /proc/loadavg ("" when unknown).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return ""
}

func diffCalls(a, b map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for op, v := range b {
		if n := v - a[op]; n > 0 {
			d[op] = n
		}
	}
	return d
}

func sumCalls(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// ---- the gateway child ---------------------------------------------------------------

// childGateway is the real gateway binary running on the bench's table.
type childGateway struct {
	cmd         *exec.Cmd
	pid         int
	base        string // http://127.0.0.1:port
	client      *http.Client
	attackerTok string
	serviceTok  string
	killed      atomic.Bool
	done        chan struct{}
	// idle is the gateway's CPU in a quietWindow when nothing is asked of it
	// (measureIdle).
	idle time.Duration
	// What monitor last saw: the RSS peak since the last watchRSS, and the CPU time
	// (kept once the process is gone).
	mu      sync.Mutex
	peakMiB float64
	cpuLast time.Duration
}

// buildGateway builds the module's main package (the gateway) into a temporary directory.
func buildGateway(ctx context.Context) (bin string, cleanup func(), err error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", nil, fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	dir, err := os.MkdirTemp("", "inbox-bench-abuse-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "inbox-gateway")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build the gateway: %w", err)
	}
	return bin, func() { _ = os.RemoveAll(dir) }, nil
}

// startChildGateway starts the gateway binary on eng's table, with extra settings env
// (KEY=value), and waits for /healthz. The gateway is killed whenever its RSS passes
// rssCapMiB (0: never), from its start to its end (monitor).
func startChildGateway(ctx context.Context, bin string, eng *engine, table, secret string, rssCapMiB float64, extra []string) (*childGateway, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INBOX_") {
			env = append(env, kv)
		}
	}
	env = append(env, "INBOX_STORE=dynamodb", "INBOX_TABLE="+table, "INBOX_CREATE_TABLE=false", "INBOX_JWT_SECRET="+secret,
		"INBOX_ADDR="+addr, "INBOX_KEEPALIVE="+abuseKeepAlive.String(), "INBOX_LOG_FORMAT=json")
	env = append(env, extra...)
	if eng.endpoint != "" {
		env = append(env, "AWS_ENDPOINT_URL_DYNAMODB="+eng.endpoint)
	}
	if eng.local {
		env = append(env, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_EC2_METADATA_DISABLED=true")
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = env
	logf, err := os.CreateTemp("", "inbox-bench-abuse-gateway-*.log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	gw := &childGateway{cmd: cmd, pid: cmd.Process.Pid, base: "http://" + addr, done: make(chan struct{}),
		client: &http.Client{Timeout: time.Minute}}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		_ = os.Remove(logf.Name())
		close(gw.done)
	}()
	go gw.monitor(rssCapMiB)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := gw.client.Get(gw.base + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return gw, nil
			}
		}
		select {
		case <-gw.done:
			b, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("the gateway exited at start: %.2000s", b)
		case <-ctx.Done():
			gw.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			gw.stop()
			return nil, errors.New("the gateway did not answer /healthz within 30s")
		}
	}
}

// stop ends the gateway: SIGTERM, then SIGKILL after 2s (connection attacks may still
// hold connections its graceful shutdown would wait for).
func (g *childGateway) stop() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(2 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}

// monitor samples the gateway every 50 ms until it exits: its RSS (the peak since the
// last watchRSS) and its CPU time, and kills it when its RSS passes capMiB (0: never).
// It runs for the gateway's whole life, not only while an attack is measured: work a
// request leaves behind (a send's rendering after its 202, a computation the client
// gave up on) stays under the cap too.
func (g *childGateway) monitor(capMiB float64) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		v := rssMiBOf(g.pid)
		g.cpu()
		g.mu.Lock()
		g.peakMiB = max(g.peakMiB, v)
		g.mu.Unlock()
		if capMiB > 0 && v > capMiB && !g.killed.Swap(true) {
			progress("abuse: gateway RSS %.0f MiB over the cap %.0f MiB: killed", v, capMiB)
			_ = g.cmd.Process.Kill()
		}
		select {
		case <-g.done:
			return
		case <-t.C:
		}
	}
}

// watchRSS starts a measurement of the gateway's RSS peak; the returned func ends it and
// returns the peak (at least the RSS when it started) and whether the gateway was killed
// at the cap.
func (g *childGateway) watchRSS() (stop func() (peakMiB float64, capped bool)) {
	g.mu.Lock()
	g.peakMiB = rssMiBOf(g.pid)
	g.mu.Unlock()
	return func() (float64, bool) {
		v := rssMiBOf(g.pid)
		g.mu.Lock()
		defer g.mu.Unlock()
		return max(g.peakMiB, v), g.killed.Load()
	}
}

// cpu is the gateway's CPU time so far (user + system); once the process is gone, the
// last value read (at most monitor's 50 ms before its end).
func (g *childGateway) cpu() time.Duration {
	v := procCPU(g.pid)
	g.mu.Lock()
	defer g.mu.Unlock()
	if v > g.cpuLast { // procCPU is 0 once the process is gone
		g.cpuLast = v
	}
	return g.cpuLast
}

// quietWindow is the window in which the gateway's CPU is sampled to tell it idle.
const quietWindow = 500 * time.Millisecond

// measureIdle sets the gateway's idle CPU rate: the least CPU it used in three
// quietWindows with nothing asked of it (its scheduler polls the table all the time:
// tens of ms a second on a fast engine). Called right after the start, before any load.
func (g *childGateway) measureIdle() {
	least := time.Duration(-1)
	for range 3 {
		c0 := g.cpu()
		time.Sleep(quietWindow)
		if d := g.cpu() - c0; least < 0 || d < least {
			least = d
		}
	}
	g.idle = least
}

// quiet waits until the gateway uses at most its idle CPU and 20 ms in a quietWindow, or
// is gone, for at most bound; busy reports that it was still busy.
func (g *childGateway) quiet(bound time.Duration) (busy bool) {
	end := time.Now().Add(bound)
	for {
		c0 := g.cpu()
		select {
		case <-g.done:
			return false
		case <-time.After(quietWindow):
		}
		if g.cpu()-c0 <= g.idle+20*time.Millisecond {
			return false
		}
		if time.Now().After(end) {
			return true
		}
	}
}

// cpuSince is the gateway's CPU time since it was cpu0 at t0, less its idle rate over
// that time (what the request cost, not what the gateway costs anyway); at least 0.
func (g *childGateway) cpuSince(cpu0 time.Duration, t0 time.Time) time.Duration {
	idle := time.Duration(float64(g.idle) * float64(time.Since(t0)) / float64(quietWindow))
	return max(g.cpu()-cpu0-idle, 0)
}

// rssMiBOf is process pid's resident set size (VmRSS), in MiB (0 when it is gone).
func rssMiBOf(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// post sends one GraphQL request that must succeed.
func (g *childGateway) post(ctx context.Context, token, body string) error {
	return postGraphQL(ctx, g.client, g.base+"/graphql", token, body, nil)
}

// inboxIDs returns the ids of token's first n notifications.
func (g *childGateway) inboxIDs(ctx context.Context, token string, n int) ([]string, error) {
	var out struct {
		Data struct {
			Viewer struct {
				Inbox struct {
					Edges []struct {
						Node struct {
							ID string `json:"id"`
						} `json:"node"`
					} `json:"edges"`
				} `json:"inbox"`
			} `json:"viewer"`
		} `json:"data"`
	}
	err := postGraphQL(ctx, g.client, g.base+"/graphql", token, gqlBody(fmt.Sprintf("query { viewer { inbox(first: %d) { edges { node { id } } } } }", n)), &out)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range out.Data.Viewer.Inbox.Edges {
		ids = append(ids, e.Node.ID)
	}
	return ids, nil
}

// calls scrapes the gateway's /metrics: DynamoDB calls so far by operation.
func (g *childGateway) calls(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape /metrics: HTTP %d (the gateway serves no metrics?)", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	out := map[string]float64{}
	if f := fams["inbox_dynamodb_calls_total"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out, nil
}

// ---- the attacker child --------------------------------------------------------------

// runAbuseChild runs spec in a child process (this binary with -abusegen).
func runAbuseChild(ctx context.Context, spec abuseSpec) (abuseOutcome, error) {
	res, err := runChild[abuseChildResult](ctx, "-abusegen", "attacker", spec)
	if err != nil {
		return abuseOutcome{}, err
	}
	if res.Err != "" {
		return res.Outcome, errors.New(res.Err)
	}
	return res.Outcome, nil
}

// runAbusegen is the attacker child: it reads an abuseSpec from r and writes an
// abuseChildResult to w.
func runAbusegen(r io.Reader, w io.Writer) error {
	var spec abuseSpec
	if err := json.NewDecoder(r).Decode(&spec); err != nil {
		return err
	}
	out, err := attack(spec)
	res := abuseChildResult{Outcome: out}
	if err != nil {
		res.Err = err.Error()
	}
	return json.NewEncoder(w).Encode(res)
}

// outcomes collects what the attacker saw, from many goroutines.
type outcomes struct {
	mu sync.Mutex
	o  abuseOutcome
}

func (c *outcomes) add(outcome string, bytes int64, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.o.Outcomes == nil {
		c.o.Outcomes = map[string]int{}
	}
	c.o.Requests++
	c.o.Outcomes[outcome]++
	c.o.MaxBytes = max(c.o.MaxBytes, bytes)
	c.o.MaxSeconds = max(c.o.MaxSeconds, d.Seconds())
}

// lifetime records how long a held connection lasted, and its outcome ("still open" at
// the hold's end, or "closed by the gateway").
func (c *outcomes) lifetime(d time.Duration, stillOpen bool) {
	outcome := "closed by the gateway"
	if stillOpen {
		outcome = "still open"
	}
	c.add(outcome, 0, d)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.o.Lifetimes = append(c.o.Lifetimes, float64(d.Milliseconds())/1000)
	if stillOpen {
		c.o.StillOpen++
	}
}

func attack(spec abuseSpec) (abuseOutcome, error) {
	var col outcomes
	start := time.Now()
	deadline := start.Add(spec.Duration)
	var next atomic.Int64
	take := func() (int, bool) {
		i := int(next.Add(1)) - 1
		if spec.Total > 0 && i >= spec.Total {
			return 0, false
		}
		if spec.Total == 0 && i > 0 && time.Now().After(deadline) {
			return 0, false
		}
		return i, true
	}
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range max(spec.Conc, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok || time.Now().After(deadline) {
					return
				}
				var err error
				switch spec.Kind {
				case kindPost:
					err = postOnce(spec, i, deadline.Add(spec.Grace), &col)
				case kindSlowBody:
					err = slowBody(spec, deadline, &col)
				case kindIdle:
					err = idleConnection(spec, deadline, &col)
				case kindSilentWS:
					err = silentWebSocket(spec, deadline, &col)
				default:
					err = fmt.Errorf("unknown attack kind %q", spec.Kind)
				}
				if err != nil {
					if !errors.Is(err, errGatewayGone) {
						firstErr.CompareAndSwap(nil, err)
					}
					return
				}
				if spec.Kind != kindPost {
					return // a connection attack holds one connection per worker
				}
			}
		}()
	}
	wg.Wait()
	col.mu.Lock()
	defer col.mu.Unlock()
	slices.Sort(col.o.Lifetimes)
	if err, ok := firstErr.Load().(error); ok {
		return col.o, err
	}
	return col.o, nil
}

// runNonce makes this attacker's Idempotency-Keys differ from an earlier run's on the
// same table (abuseSpec.Idempotent).
var runNonce = func() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// errGatewayGone stops an attacker's worker: the gateway is gone (killed at the RSS cap).
var errGatewayGone = errors.New("the gateway is gone")

var abuseClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}

// postOnce sends the i-th body and records the status, the first error code and the
// response size (read whole, kept only up to 64 KiB).
func postOnce(spec abuseSpec, i int, deadline time.Time, col *outcomes) error {
	body := ""
	switch {
	case spec.Template != "":
		var sb strings.Builder
		sb.Grow(spec.Pad + 64)
		sb.WriteString(fmt.Sprintf(spec.Template, spec.First+i))
		for sb.Len() < spec.Pad-64 {
			sb.WriteString("padding-padding-padding-padding-padding-padding-padding-padding ")
		}
		body = gqlBody(sb.String())
	case len(spec.Bodies) > 0:
		body = spec.Bodies[i%len(spec.Bodies)]
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, cmp.Or(spec.Method, http.MethodPost), spec.URL, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", cmp.Or(spec.ContentType, "application/json"))
	for k, v := range spec.Header {
		req.Header.Set(k, v)
	}
	if spec.Idempotent {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("abuse-%s-%d", runNonce, spec.First+i))
	}
	if spec.Token != "" {
		req.Header.Set("Authorization", "Bearer "+spec.Token)
	}
	t0 := time.Now()
	resp, err := abuseClient.Do(req)
	if err != nil {
		col.add("error: "+errClass(err), 0, time.Since(t0))
		if errors.Is(err, syscall.ECONNREFUSED) {
			return errGatewayGone
		}
		return nil
	}
	head := make([]byte, 64<<10)
	n, _ := io.ReadFull(resp.Body, head)
	rest, err := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	size := int64(n) + rest
	code := firstCode(head[:n])
	if code == "?" && resp.StatusCode/100 == 2 {
		code = "ok" // a REST answer: no data member, no code
	}
	outcome := fmt.Sprintf("%d %s", resp.StatusCode, code)
	if err != nil {
		outcome += " (cut: " + errClass(err) + ")"
	}
	col.add(outcome, size, time.Since(t0))
	return nil
}

// firstCode is the first error's extensions.code in a response's beginning, "ok" for
// data without errors, "answered" when the response has data and errors.
func firstCode(b []byte) string {
	i := bytes.Index(b, []byte(`"code":"`))
	hasData := bytes.Contains(b, []byte(`"data":{`))
	if i < 0 {
		if hasData {
			return "ok"
		}
		return "?"
	}
	rest := b[i+len(`"code":"`):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 && j < 64 {
		code := string(rest[:j])
		if hasData && bytes.Contains(b, []byte(`"__schema":{`)) {
			return code + " (schema answered)"
		}
		return code
	}
	return "?"
}

func errClass(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

func dialGateway(spec abuseSpec) (net.Conn, string, error) {
	u, err := url.Parse(spec.URL)
	if err != nil {
		return nil, "", err
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	return c, u.Host, err
}

// closedBy waits until the gateway closes c (any read result: a response, EOF, a reset)
// or until deadline; it reports how long it took from since and whether c is still open.
func closedBy(c net.Conn, r io.Reader, since, deadline time.Time) (time.Duration, bool) {
	_ = c.SetReadDeadline(deadline)
	buf := make([]byte, 4096)
	for {
		_, err := r.Read(buf)
		if err == nil {
			continue // data (a response, keep-alive frames): read on until the close
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return time.Since(since), true
		}
		return time.Since(since), false
	}
}

// slowBody opens a request that announces a 64 KiB body and sends it one byte a second.
func slowBody(spec abuseSpec, deadline time.Time, col *outcomes) error {
	c, host, err := dialGateway(spec)
	if err != nil {
		return err
	}
	defer c.Close()
	t0 := time.Now()
	if _, err := fmt.Fprintf(c, "POST /graphql HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n{", host); err != nil {
		return err
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	d, open := closedBy(c, c, t0, deadline)
	col.lifetime(d, open)
	return nil
}

// idleConnection sends one complete request on a keep-alive connection, reads the
// answer, then stays silent.
func idleConnection(spec abuseSpec, deadline time.Time, col *outcomes) error {
	c, host, err := dialGateway(spec)
	if err != nil {
		return err
	}
	defer c.Close()
	body := gqlBody("query { __typename }")
	if _, err := fmt.Fprintf(c, "POST /graphql HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", host, len(body), body); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("idle connection: first response: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	t0 := time.Now()
	d, open := closedBy(c, br, t0, deadline)
	col.lifetime(d, open)
	return nil
}

// silentWebSocket opens a graphql-transport-ws connection, subscribes to unreadCount and
// then never writes again: no pong, nothing (it reads, so the network is not what
// stalls: the peer is silent). It reports how long the gateway kept the connection.
func silentWebSocket(spec abuseSpec, deadline time.Time, col *outcomes) error {
	c, host, err := dialGateway(spec)
	if err != nil {
		return err
	}
	defer c.Close()
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	k := base64.StdEncoding.EncodeToString(key)
	if _, err := fmt.Fprintf(c, "GET /graphql HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n", host, k); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("websocket handshake: %w", err)
	}
	h := sha1.Sum([]byte(k + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(h[:]) {
		return fmt.Errorf("websocket handshake: HTTP %d", resp.StatusCode)
	}
	init, _ := json.Marshal(map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + spec.Token}})
	sub, _ := json.Marshal(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]string{"query": "subscription { unreadCount }"}})
	for _, m := range [][]byte{init, sub} {
		if _, err := c.Write(wsTextFrame(m)); err != nil {
			return err
		}
	}
	t0 := time.Now()
	d, open := closedBy(c, br, t0, deadline)
	col.lifetime(d, open)
	return nil
}

// wsTextFrame is a client's (masked) final text frame carrying p.
func wsTextFrame(p []byte) []byte {
	var f []byte
	f = append(f, 0x81)
	switch {
	case len(p) < 126:
		f = append(f, 0x80|byte(len(p)))
	case len(p) <= 0xffff:
		f = append(f, 0x80|126)
		f = binary.BigEndian.AppendUint16(f, uint16(len(p)))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(len(p)))
	}
	mask := make([]byte, 4)
	_, _ = rand.Read(mask)
	f = append(f, mask...)
	for i, b := range p {
		f = append(f, b^mask[i%4])
	}
	return f
}

// ---- the report ----------------------------------------------------------------------

// Table renders scenario 9.
func (a *AbuseResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### 9. abuse: the attacks of issues 8 and 16 (the gateway binary as a child process, fresh for each attack; %d hostile requests at once for %s; connections held up to %s; INBOX_KEEPALIVE=%s; RSS cap %.0f MiB)\n\n",
		a.Concurrency, a.Window, a.Hold, a.Keepalive, a.RSSCapMiB)
	fmt.Fprintf(&b, "One request is cut at %s (issue 16's at %s); its gateway CPU is counted until the gateway is quiet again, at most %s (issue 16's %s) after the answer (≥: still busy then), less the gateway's idle rate (its scheduler's polls, measured after its start). Issue 16's goals: ≤ %.0f CPU-second and ≤ %.0f MiB a request, refusals a 4xx with a code.\n\n",
		abuseOneBound, abuseCostBound, abuseQuietBound, abuseCostQuiet, goalCPUSeconds, goalGrowthCostMiB)
	fmt.Fprintln(&b, "| attack (load avg; engine settle s) | one request: outcome, largest response | RSS MiB: rest → one request (growth) | gateway CPU s, one request | RSS MiB peak, at once (1 s after) | normal client p50/p99 ms: rest → during (p99 ×; errors: requests cut at window + 3 s) | DynamoDB calls: aliased vs without aliases | connections kept (s) | goals |")
	fmt.Fprintln(&b, "| --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |")
	for _, r := range a.Attacks {
		tok := ""
		switch {
		case r.Tokenless:
			tok = " (no token)"
		case r.ServiceToken:
			tok = " (service token)"
		}
		calls := ""
		if r.PlainCalls != nil || r.Calls != nil {
			calls = fmt.Sprintf("%.0f vs %.0f (%s vs %s)", sumCalls(r.Calls), sumCalls(r.PlainCalls), opsOf(r.Calls), opsOf(r.PlainCalls))
			if r.One.Outcomes["error: timeout"] > 0 {
				calls = fmt.Sprintf("≥ %s, cut at %s", calls, abuseOneBound)
			}
		}
		conns := ""
		if lt := r.AtOnce.Lifetimes; len(lt) > 0 {
			conns = fmt.Sprintf("%.1f–%.1f; still open at the hold: %d of %d", lt[0], lt[len(lt)-1], r.AtOnce.StillOpen, len(lt))
		}
		var goals []string
		judge := func(name string, ok *bool) {
			if ok != nil {
				goals = append(goals, name+" "+yes(*ok))
			}
		}
		judge("growth ≤ 8 MiB:", r.GoalGrowth)
		judge("peak < 256 MiB:", r.GoalPeak)
		judge("p99 ≤ 2×:", r.GoalP99)
		judge("calls ≤ without aliases:", r.GoalCalls)
		judge("CPU ≤ 1 s:", r.GoalCPU)
		judge("growth ≤ 64 MiB:", r.GoalGrowth64)
		judge("4xx with a code:", r.GoalRefused)
		peak := fmt.Sprintf("%s (%s)", f1(r.RSSPeakMiB), f1(r.RSSAfterMiB))
		if r.Capped {
			peak = fmt.Sprintf("≥ %.0f (killed at the cap)", a.RSSCapMiB)
		}
		client := fmt.Sprintf("%s/%s → %s/%s (%s; client errors %d)", f2(r.ClientRest.P50), f2(r.ClientRest.P99),
			f2(r.ClientAttack.P50), f2(r.ClientAttack.P99), f2(r.P99Ratio), r.ClientErrors)
		if r.Alone {
			peak, client = "— (one request only)", fmt.Sprintf("%s/%s at rest", f2(r.ClientRest.P50), f2(r.ClientRest.P99))
		}
		cpu := fmt.Sprintf("%s (idle %.0f ms/s)", f2(r.CPUOneSeconds), r.IdleCPUMsPerSecond)
		if r.CPUBusy {
			cpu = "≥ " + cpu
		}
		outcome := outcomesOf(r.One)
		if r.Setup != "" {
			outcome = "setup: " + r.Setup + "; then " + outcome
		}
		if r.Capped && r.AtOnce.Requests == 0 {
			outcome += "; the gateway killed at the RSS cap"
		}
		if r.Error != "" {
			outcome += "; error: " + r.Error
		}
		fmt.Fprintf(&b, "| %s%s (%s; %.1f) | %s, %s | %s → %s (%+.1f) | %s | %s | %s | %s | %s | %s |\n",
			r.Name, tok, r.LoadAvg, r.SettleSeconds, outcome, bytesOf(r.One.MaxBytes), f1(r.RSSRestMiB), f1(r.RSSOneMiB), r.GrowthOneMiB, cpu, peak,
			client, calls, conns, strings.Join(goals, "; "))
	}
	if a.Note != "" {
		fmt.Fprintf(&b, "\n%s\n", a.Note)
	}
	return b.String()
}

func outcomesOf(o abuseOutcome) string {
	keys := make([]string, 0, len(o.Outcomes))
	for k := range o.Outcomes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, o.Outcomes[k])
	}
	return strings.Join(parts, ", ")
}

func opsOf(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%.0f %s", m[k], k)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " + ")
}

func bytesOf(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
