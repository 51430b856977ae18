package service_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/tmpl"
)

// templates gives the service a tmpl.Service, as app's adapter does (its Rendered is
// inbox's), and counts the renders the service asks for.
type templates struct {
	*tmpl.Service
	renders atomic.Int64
}

func (t *templates) Render(ctx context.Context, tenant, id string, version int, locale string, data inbox.JSON) (inbox.Rendered, error) {
	t.renders.Add(1)
	return t.Service.Render(ctx, tenant, id, version, locale, data)
}

// templateReads counts the DynamoDB reads of template id's items (HEAD and versions) in
// reqs.
func templateReads(reqs []ddbtrace.Request, id string) int {
	distinct := map[string]bool{}
	for _, r := range reqs {
		var pk types.AttributeValue
		var what map[string]types.AttributeValue
		switch in := r.Input.(type) {
		case *dynamodb.GetItemInput:
			pk, what = in.Key["pk"], in.Key
		case *dynamodb.QueryInput:
			pk, what = in.ExpressionAttributeValues[":pk"], in.ExpressionAttributeValues
		}
		if s, ok := pk.(*types.AttributeValueMemberS); ok && s.Value == "T#"+tenant+"#TPL#"+id {
			// The same request again is the store's retry of it (a throttled or slow
			// engine), not another read the send needed.
			var m map[string]any
			_ = attributevalue.UnmarshalMap(what, &m)
			distinct[fmt.Sprint(r.Op, m)] = true
		}
	}
	return len(distinct)
}

// titles returns each of users' newest notification title.
func (e *env) titles(t *testing.T, users []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, u := range users {
		first := 1
		p, err := e.st.Inbox(context.Background(), inbox.Viewer{TenantID: tenant, UserID: u}, inbox.PageQuery{First: &first})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Edges) == 1 {
			out[u] = p.Edges[0].Node.Title
		}
	}
	return out
}

// TestTemplatedSendRendersPerStoredVersion: a send rendered (and read and parsed) its
// template once per locale its recipients asked for, so 40 users each choosing a private
// tag (en-x-aaaa, en-x-aaab, ...) made one send do it 40 times for the same output. A
// send now renders once per stored version that serves them, reads the template a
// bounded number of times (once per stored locale), and each recipient still gets their
// language (de-CH gets de, an unknown language the default).
func TestTemplatedSendRendersPerStoredVersion(t *testing.T) {
	t.Parallel()
	rec := &ddbtrace.Recorder{}
	rec.KeepInputs()
	e := setup(t, rec.Option())
	ctx := context.Background()
	var ids []string
	for _, c := range []struct {
		name   string
		locale func(i int) string // the recipient's; "" = none
		set    func(e *env, t testing.TB, u, locale string)
		req    string             // the request's locale
		want   func(i int) string // "en" or "de": what recipient i reads
	}{
		{"en private use, preferences", func(i int) string { return fmt.Sprintf("en-x-p%04d", i) }, (*env).setLocale, "",
			func(int) string { return "en" }},
		{"de-CH private use, profile", func(i int) string { return fmt.Sprintf("de-CH-x-p%04d", i) }, (*env).setProfileLocale, "",
			func(int) string { return "de" }},
		{"every kind of tag", func(i int) string {
			return fmt.Sprintf([]string{"en-x-k%04d", "DE-at-x-k%04d", "qaa-x-k%04d", "und-x-k%04d", "mis-x-k%04d",
				"de-1901-x-k%04d", "tlh-x-k%04d", "EN-u-co-x-k%04d"}[i%8], i)
		}, (*env).setLocale, "", func(i int) string { return []string{"en", "de", "en", "en", "en", "de", "en", "en"}[i%8] }},
		{"the request's locale for those without one", func(i int) string {
			if i%2 == 0 {
				return ""
			}
			return fmt.Sprintf("en-x-r%04d", i)
		}, (*env).setLocale, "de_CH-x-req", func(i int) string { return []string{"de", "en"}[i%2] }},
	} {
		id := fmt.Sprintf("greet%d", len(ids))
		ids = append(ids, id)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			const n = 40
			recipients := make([]string, n)
			distinct := map[string]bool{}
			for i := range recipients {
				recipients[i] = fmt.Sprintf("%s-%02d", strings.ReplaceAll(c.name, " ", "_"), i)
				if l := c.locale(i); l != "" {
					c.set(e, t, recipients[i], l)
				}
				distinct[c.want(i)] = true
			}
			ts := &templates{Service: tmpl.New(e.st)}
			for _, l := range []string{"en", "de"} {
				if _, err := ts.Put(ctx, tenant, id, inbox.TemplateInput{Locale: l, Title: l + " {{ name }}"}); err != nil {
					t.Fatal(err)
				}
			}
			svc := e.newService(t, service.Options{Templates: ts}, false)
			before := len(rec.Requests())
			sent, err := svc.Send(ctx, tenant, service.SendRequest{IdempotencyKey: "k-" + id, Recipients: recipients,
				Type: "greeting", Template: id, Data: inbox.JSON(`{"name": "Ada"}`), Locale: c.req})
			if err != nil || sent.Result.Accepted != n {
				t.Fatalf("send: %+v, %v", sent, err)
			}
			titles := e.titles(t, recipients)
			for i, u := range recipients {
				if want := c.want(i) + " Ada"; titles[u] != want {
					t.Errorf("%s (locale %q) reads %q; want %q", u, c.locale(i), titles[u], want)
				}
			}
			if got := ts.renders.Load(); got != int64(len(distinct)) {
				t.Errorf("%d renders for %d recipients; want %d (one per stored version served)", got, n, len(distinct))
			}
			// The pin reads HEAD and each stored locale's version once (3 distinct reads; a
			// retry repeats one); the renders nothing. One read per locale asked for (the old
			// way) is 47 to 85 here.
			if got := templateReads(rec.Requests()[before:], id); got != 3 {
				t.Errorf("%d distinct template reads for one send; want 3 (HEAD, then one per stored locale)", got)
			}
			// The pin parses both stored locales and renders each; the send renders the
			// ones its recipients use.
			if st := ts.Stats(); st.Parses != 2 || st.Renders != 2+int64(len(distinct)) {
				t.Errorf("stats %+v; want 2 parses, %d renders", st, 2+len(distinct))
			}
		})
	}
}

// setProfileLocale sets u's channel profile's locale.
func (e *env) setProfileLocale(t testing.TB, u, locale string) {
	t.Helper()
	if _, err := e.st.PutUserProfile(context.Background(), inbox.Viewer{TenantID: tenant, UserID: u},
		inbox.UserProfile{Locale: locale}); err != nil {
		t.Fatalf("profile locale %q of %s: %v", locale, u, err)
	}
}

// setLocale sets u's preferences' locale.
func (e *env) setLocale(t testing.TB, u, locale string) {
	t.Helper()
	if _, err := e.st.UpdatePreferences(context.Background(), inbox.Viewer{TenantID: tenant, UserID: u},
		inbox.PreferencesUpdate{Locale: &locale}); err != nil {
		t.Fatalf("locale %q of %s: %v", locale, u, err)
	}
}

// largePart is a Liquid source of about n bytes (under tmpl.MaxPartBytes) that outputs
// its variables often and loops over an upcase of s: some milliseconds of parsing and
// of rendering.
func largePart(prefix string, n int) string {
	var b strings.Builder
	b.WriteString(prefix + " {{ name }}\n{% for i in (1..300) %}{% assign u = s | upcase %}{% endfor %}{{ u | size }}\n")
	for b.Len() < n {
		b.WriteString("<p>{{ name }} ordered {{ order.id }}{% if vip %} (VIP){% endif %}: lorem ipsum dolor sit amet.</p>\n")
	}
	return b.String()
}

// BenchmarkTemplatedSendPrivateLocales is one send of a large template (locales en and
// de, three parts near tmpl.MaxPartBytes each) to 40 users who each chose a private-use
// locale of their own (en-x-…, de-CH-x-…), on a cold template cache: the cost the send's
// renders add per distinct locale. It reports the process's CPU seconds per send.
//
//	INBOX_TEST_DYNAMODB_ENDPOINT=http://127.0.0.1:8765 go test -run '^$' \
//	  -bench TemplatedSendPrivateLocales -benchtime 3x ./service/
func BenchmarkTemplatedSendPrivateLocales(b *testing.B) {
	const n = 40
	e := setup(b)
	ts := &templates{}
	svc := e.newService(b, service.Options{Templates: ts}, false)
	ctx := context.Background()
	recipients := users(n)
	for i, u := range recipients {
		loc := fmt.Sprintf("en-x-u%04d", i)
		if i%2 == 1 {
			loc = fmt.Sprintf("de-CH-x-u%04d", i)
		}
		e.setLocale(b, u, loc)
	}
	const part = tmpl.MaxPartBytes - 2<<10
	for _, l := range []string{"en", "de"} {
		in := inbox.TemplateInput{Locale: l, Title: l + " {{ name }}", Body: largePart(l, part),
			Parts: map[string]inbox.Content{inbox.ChannelEmail: {Subject: "{{ name }}", HTML: largePart(l, part), Text: largePart(l, part)}}}
		if _, err := tmpl.New(e.st).Put(ctx, tenant, "big", in); err != nil {
			b.Fatal(err)
		}
	}
	data := inbox.JSON(`{"name": "Ada", "order": {"id": 42}, "vip": true, "s": "` + strings.Repeat("a", 4<<10) + `"}`)
	b.ReportAllocs()
	b.ResetTimer()
	var cpu float64
	for i := range b.N {
		b.StopTimer()
		ts.Service = tmpl.New(e.st) // a cold cache: the locales are new to it
		b.StartTimer()
		start := cpuSeconds()
		sent, err := svc.Send(ctx, tenant, service.SendRequest{IdempotencyKey: fmt.Sprintf("big-%d", i), Recipients: recipients,
			Type: "order", Template: "big", Data: data})
		cpu += cpuSeconds() - start
		if err != nil || !sent.Processed || sent.Result.Accepted != n {
			b.Fatalf("send: %+v, %v", sent, err)
		}
	}
	b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
	st := ts.Stats() // the last send's
	b.ReportMetric(float64(st.Parses), "parses/op")
	b.ReportMetric(float64(st.Renders), "renders/op")
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
