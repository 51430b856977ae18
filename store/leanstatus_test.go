package store_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// TestInAppSendWritesNoInAppRecord checks that an in-app-only send stores one status
// item, its summary (the only item the notification's id names: the status read's way
// to its user), and no in-app delivery record, while the status still answers in-app
// DELIVERED by provider inbox, one attempt, at the notification's createdAt.
func TestInAppSendWritesNoInAppRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := f.send(t, 1, "comment", "ada")[0]
	out, err := f.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(f.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: store.StatusPK(f.tenant, id)}},
		ConsistentRead:            aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var sks []string
	for _, it := range out.Items {
		sks = append(sks, it["sk"].(*types.AttributeValueMemberS).Value)
	}
	if len(sks) != 1 || sks[0] != "S" {
		t.Fatalf("status partition holds %v, want only the summary [S]", sks)
	}
	ns, err := f.s.Notifications(ctx, f.viewer("ada"), []string{id})
	if err != nil || len(ns) != 1 || ns[0] == nil {
		t.Fatalf("notification %s: %v, %v", id, ns, err)
	}
	n := ns[0]
	st, err := f.s.Status(ctx, f.tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	want := inbox.ChannelStatus{Channel: inbox.ChannelInApp, Key: inbox.ChannelInApp, Provider: inbox.ProviderInbox,
		Status: inbox.DeliveryDelivered, Attempts: 1, SentAt: n.CreatedAt, DeliveredAt: n.CreatedAt, UpdatedAt: n.CreatedAt}
	if st.UserID != "ada" || st.Status != inbox.NotificationWritten || !st.CreatedAt.Equal(n.CreatedAt) ||
		len(st.Channels) != 1 || st.Channels[0] != want {
		t.Fatalf("status %+v, want written by ada at %v with %+v", st, n.CreatedAt, want)
	}
}

// TestChannelSendWritesNoSummaryItem checks that an in-app + email send stores its
// email record and no summary item (the record carries it: the status read's Query
// reads the record anyway), while the status answers as with the summary: ada's,
// written at the notification's createdAt, in-app DELIVERED by provider inbox, the
// email QUEUED to her address.
func TestChannelSendWritesNoSummaryItem(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.s.PutUserProfile(ctx, f.viewer("ada"), inbox.UserProfile{Addresses: map[string]string{"email": "ada@example.com"}}); err != nil {
		t.Fatal(err)
	}
	res, err := writer(f.s).Send(ctx, f.tenant, inbox.SendInput{IdempotencyKey: "k-email" + randSuffix(), Recipients: []string{"ada"},
		Type: "comment", Title: "Bob commented", TemplateChannels: []string{inbox.ChannelInApp, inbox.ChannelEmail}})
	if err != nil || len(res.NotificationIDs) != 1 {
		t.Fatalf("send: %+v, %v", res, err)
	}
	id := res.NotificationIDs[0]
	out, err := f.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(f.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: store.StatusPK(f.tenant, id)}},
		ConsistentRead:            aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var sks []string
	for _, it := range out.Items {
		sks = append(sks, it["sk"].(*types.AttributeValueMemberS).Value)
	}
	if len(sks) != 1 || sks[0] != "D#"+inbox.ChannelEmail {
		t.Fatalf("status partition holds %v, want only the email record [D#EMAIL]", sks)
	}
	ns, err := f.s.Notifications(ctx, f.viewer("ada"), []string{id})
	if err != nil || len(ns) != 1 || ns[0] == nil {
		t.Fatalf("notification %s: %v, %v", id, ns, err)
	}
	n := ns[0]
	st, err := f.s.Status(ctx, f.tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	inApp := inbox.ChannelStatus{Channel: inbox.ChannelInApp, Key: inbox.ChannelInApp, Provider: inbox.ProviderInbox,
		Status: inbox.DeliveryDelivered, Attempts: 1, SentAt: n.CreatedAt, DeliveredAt: n.CreatedAt, UpdatedAt: n.CreatedAt}
	email := inbox.ChannelStatus{Channel: inbox.ChannelEmail, Key: inbox.ChannelEmail, Status: inbox.DeliveryQueued, UpdatedAt: n.CreatedAt}
	if st.UserID != "ada" || st.Status != inbox.NotificationWritten || !st.CreatedAt.Equal(n.CreatedAt) ||
		len(st.Channels) != 2 || st.Channels[0] != inApp || st.Channels[1] != email {
		t.Fatalf("status %+v, want written by ada at %v with %+v and %+v", st, n.CreatedAt, inApp, email)
	}
}
