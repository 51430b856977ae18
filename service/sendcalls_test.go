package service_test

import (
	"context"
	"fmt"
	"slices"
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

// TestTemplatedSendReadsEachRecipientOnce: a templated send read every recipient's
// PREFS and PROFILE twice (once to choose their locales, once to decide their
// channels). It now reads each of a recipient's items (PREFS, PROFILE, group) once, in
// the send's one BatchGetItem (one per 100 keys), whatever the template's channels, and
// the recipients still get their locale's content and their channels' decisions.
func TestTemplatedSendReadsEachRecipientOnce(t *testing.T) {
	t.Parallel()
	rec := &ddbtrace.Recorder{}
	rec.KeepInputs()
	e := setup(t, rec.Option())
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		n     int
		email bool // the template has an email part
		hint  []string
	}{
		{"in-app only", 5, false, nil},
		{"email part", 10, true, nil},
		{"email part, hint in-app", 7, true, []string{inbox.ChannelInApp}},
		{"over one batch", 40, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := fmt.Sprintf("calls%d%v", c.n, c.email)
			ts := &templates{Service: tmpl.New(e.st)}
			for _, l := range []string{"en", "de"} {
				in := inbox.TemplateInput{Locale: l, Title: l + " {{ name }}"}
				if c.email {
					in.Parts = map[string]inbox.Content{inbox.ChannelEmail: {Subject: l + " {{ name }}", Text: "t"}}
				}
				if _, err := ts.Put(ctx, tenant, id, in); err != nil {
					t.Fatal(err)
				}
			}
			recipients := make([]string, c.n)
			for i := range recipients {
				recipients[i] = fmt.Sprintf("%s-%02d", id, i)
				switch i % 3 {
				case 0:
					e.setLocale(t, recipients[i], "de")
				case 1:
					if _, err := e.st.PutUserProfile(ctx, inbox.Viewer{TenantID: tenant, UserID: recipients[i]},
						inbox.UserProfile{Addresses: map[string]string{"email": recipients[i] + "@example.com"}, Locale: "de-CH"}); err != nil {
						t.Fatal(err)
					}
				}
			}
			svc := e.newService(t, service.Options{Templates: ts}, false)
			before := len(rec.Requests())
			sent, err := svc.Send(ctx, tenant, service.SendRequest{IdempotencyKey: "k-" + id, Recipients: recipients,
				Type: "greeting", Template: id, Data: inbox.JSON(`{"name": "Ada"}`), Channels: c.hint})
			if err != nil || sent.Result.Accepted != c.n {
				t.Fatalf("send: %+v, %v", sent, err)
			}
			t.Logf("%d recipients: the send's DynamoDB calls %v", c.n, countOps(rec.Ops()[before:]))
			reads := map[string]int{} // "pk sk" of a recipient's item -> times read
			for _, r := range rec.Requests()[before:] {
				in, ok := r.Input.(*dynamodb.BatchGetItemInput)
				if !ok {
					continue
				}
				for _, ka := range in.RequestItems {
					for _, k := range ka.Keys {
						pk, sk := k["pk"].(*types.AttributeValueMemberS), k["sk"].(*types.AttributeValueMemberS)
						for _, u := range recipients {
							if pk.Value == "T#"+tenant+"#U#"+u {
								reads[pk.Value+" "+sk.Value]++
							}
						}
					}
				}
			}
			for _, u := range recipients {
				for _, sk := range []string{"PREFS", "PROFILE"} {
					if got := reads["T#"+tenant+"#U#"+u+" "+sk]; got != 1 {
						t.Errorf("%s's %s read %d times; want once", u, sk, got)
					}
				}
			}
			for k, n := range reads {
				if n != 1 {
					t.Errorf("%s read %d times; want once", k, n)
				}
			}
			titles := e.titles(t, recipients)
			for i, u := range recipients {
				want := []string{"de Ada", "de Ada", "en Ada"}[i%3]
				if titles[u] != want {
					t.Errorf("%s reads %q; want %q", u, titles[u], want)
				}
			}
			for i, u := range []string{recipients[0], recipients[1]} {
				st, err := e.st.Status(ctx, tenant, sent.Result.NotificationIDs[i])
				if err != nil {
					t.Fatal(err)
				}
				var email string
				for _, ch := range st.Channels {
					if ch.Channel == inbox.ChannelEmail {
						email = ch.Status + ch.Reason
					}
				}
				want := ""
				switch {
				case !c.email:
				case c.hint != nil:
					want = inbox.DeliverySkipped + inbox.ReasonNotInHint
				case i == 0:
					want = inbox.DeliverySkipped + inbox.ReasonNoEmail
				default:
					want = inbox.DeliveryQueued
				}
				if email != want || st.UserID != u {
					t.Errorf("%s's email record %q; want %q", u, email, want)
				}
			}
		})
	}
}

func countOps(ops []string) map[string]int {
	out := map[string]int{}
	for _, o := range ops {
		out[o]++
	}
	return out
}

// TestReplayOfGuardsWrittenBeforeTheMove: guards written by the store's own send loop
// (before it moved to the service; their hash is the one it computed) are recognised by
// the service's: a replay of the same content answers their notifications as a
// duplicate and writes nothing; other content under the key is refused.
func TestReplayOfGuardsWrittenBeforeTheMove(t *testing.T) {
	t.Parallel()
	rec := &ddbtrace.Recorder{}
	e := setup(t, rec.Option())
	ctx := context.Background()
	// As the store's Send wrote them for {Key "old", Recipients [bob alice], Type "t",
	// Title "hello"} (TestInputHashIsTheStoresOfOld has the hash).
	ids := map[string]string{"bob": "01JD0000000000000000000001", "alice": "01JD0000000000000000000002"}
	for u, id := range ids {
		item, err := attributevalue.MarshalMap(map[string]any{"pk": "T#" + tenant + "#IDEM#old", "sk": "R#" + u,
			"entityType": "IdempotencyGuard", "userId": u, "notificationId": id,
			"inputHash": "abc460cb3ceb1149842b614b16da0e3f", "expiresAt": time.Now().Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.table, Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	w := service.Writer{Store: e.st}
	in := inbox.SendInput{IdempotencyKey: "old", Recipients: []string{"bob", "alice", "bob"}, Type: "t", Title: "hello"}
	before := len(rec.Ops())
	res, err := w.Send(ctx, tenant, in)
	if err != nil || !res.Duplicate || !slices.Equal(res.NotificationIDs, []string{ids["bob"], ids["alice"]}) {
		t.Fatalf("replay of an old send: %+v, %v; want a duplicate answering %v", res, err, ids)
	}
	if ops := rec.Ops()[before:]; !slices.Equal(ops, []string{"Query"}) {
		t.Errorf("the replay called %v; want only the guards' Query", ops)
	}
	for _, changed := range []inbox.SendInput{
		{IdempotencyKey: "old", Recipients: []string{"bob", "alice"}, Type: "t", Title: "hello!"},
		{IdempotencyKey: "old", Recipients: []string{"bob"}, Type: "t", Title: "hello"},
		{IdempotencyKey: "old", Recipients: []string{"bob", "alice"}, Type: "t", Title: "hello", Category: "c"},
	} {
		if _, err := w.Send(ctx, tenant, changed); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("other content under an old key (%+v): %v; want BAD_USER_INPUT", changed, err)
		}
	}
}
