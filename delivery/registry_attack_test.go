package delivery_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/delivery"
	"github.com/inboxgw/gateway/inbox"
)

// A push record whose platform the registry has no adapter for (an unknown one, none, a
// case variant) or whose platform no longer matches its device, and deliver tasks whose
// key names no channel the handler knows, are settled at once: the record SKIPPED (no
// send, no retry, the same on a second run of the task) or the task dropped with the
// record untouched. (A retry would be due within the first backoff, 30 s at most.)
func TestDeliverRegistryMissesSettleOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	apns := &fakePush{provider: channel.ProviderAPNs}
	fcm := &fakePush{provider: channel.ProviderFCM}
	h := delivery.NewHandler(f.st, delivery.Options{Logger: quiet, Clock: f.clk,
		Channels: channel.NewRegistry().Register(inbox.ChannelPush, inbox.PlatformAPNs, apns).Register(inbox.ChannelPush, inbox.PlatformFCM, fcm)})
	dev, err := f.st.RegisterDevice(ctx, viewer, strings.Repeat("cd", 32), inbox.PlatformAPNs)
	if err != nil {
		t.Fatal(err)
	}
	key := inbox.DeliveryKey(inbox.ChannelPush, dev.ID)
	for i, c := range []struct {
		platform string // "-" removes the attribute
		reasons  []string
	}{
		{"WINDOWS", []string{inbox.ReasonNoProvider}},
		{"-", []string{inbox.ReasonNoProvider}},
		{"APNS", []string{inbox.ReasonNoProvider}},
		{inbox.PlatformFCM, []string{inbox.ReasonNoDevice, inbox.ReasonNoProvider}},
	} {
		id, task := f.send(t, "k"+string(rune('a'+i)), key, inbox.ChannelPush)
		u := &dynamodb.UpdateItemInput{TableName: aws.String(f.table),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "T#" + tenant + "#NOTIF#" + id},
				"sk": &types.AttributeValueMemberS{Value: "D#" + key}},
			ConditionExpression: aws.String("attribute_exists(pk)")}
		if c.platform == "-" {
			u.UpdateExpression = aws.String("REMOVE platform")
		} else {
			u.UpdateExpression = aws.String("SET platform = :p")
			u.ExpressionAttributeValues = map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: c.platform}}
		}
		if _, err := f.db.UpdateItem(ctx, u); err != nil {
			t.Fatalf("forge platform %q: %v", c.platform, err)
		}
		for run := range 2 {
			if err := h.Handle(ctx, task); err != nil {
				t.Fatalf("platform %q, run %d: %v (the scheduler would retry)", c.platform, run, err)
			}
		}
		rec := f.record(t, id, key)
		ok := rec.Status == inbox.DeliverySkipped
		if ok {
			ok = false
			for _, r := range c.reasons {
				ok = ok || rec.Reason == r
			}
		}
		if !ok {
			t.Errorf("platform %q: record %+v, want SKIPPED %v", c.platform, rec, c.reasons)
		}
		if n := len(f.tasks(t, key, 10*time.Minute)); n > i+1 {
			t.Errorf("platform %q: %d deliver tasks of %s, a retry was scheduled", c.platform, n, key)
		}
	}
	if apns.sends.Load() != 0 || fcm.sends.Load() != 0 {
		t.Fatalf("sends: APNs %d, FCM %d, want none", apns.sends.Load(), fcm.sends.Load())
	}

	// Keys no channel knows: dropped without touching the notification's real record.
	id, task := f.send(t, "kz", key, inbox.ChannelPush)
	for _, bad := range []string{"FAX", "", "Push#" + dev.ID, inbox.ChannelPush + "#", inbox.ChannelPush + "#../x",
		inbox.ChannelEmail + "#" + dev.ID, inbox.ChannelInApp, strings.Repeat("P", 5000)} {
		forged := task
		forged.Token = bad
		if err := h.Handle(ctx, forged); err != nil {
			t.Errorf("key %q: %v (the scheduler would retry)", bad, err)
		}
	}
	if rec := f.record(t, id, key); rec.Status != inbox.DeliveryQueued || rec.Attempts != 0 {
		t.Fatalf("the real record after forged keys: %+v", rec)
	}
	if apns.sends.Load() != 0 || fcm.sends.Load() != 0 {
		t.Fatalf("forged keys sent: APNs %d, FCM %d", apns.sends.Load(), fcm.sends.Load())
	}
}
