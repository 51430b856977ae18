package service

import (
	"slices"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// TestInputHashIsTheStoresOfOld: the input hash kept in every guard moved from the store
// to the send loop. Its value for a content must not move with it, or a replay of a send
// written before (a retry after an upgrade, a broadcast page redone) is refused as a key
// reused with other content. The hashes below are those the store's Send computed (its
// inputHash over the compacted payload and the distinct recipients, run on the commit
// before the loop moved): plain, every v2 field, a templated one (render key, template
// channels), a JSON null payload, a repeated recipient.
func TestInputHashIsTheStoresOfOld(t *testing.T) {
	exp := time.Date(2027, 1, 2, 3, 4, 5, 6e6, time.UTC)
	for _, c := range []struct {
		in   inbox.SendInput
		want string
	}{
		{inbox.SendInput{IdempotencyKey: "k", Recipients: []string{"bob", "alice"}, Type: "t", Title: "hello"},
			"abc460cb3ceb1149842b614b16da0e3f"},
		{inbox.SendInput{IdempotencyKey: "k2", Recipients: []string{"a"}, Type: "comment", Category: "social", Title: "T", Body: "B",
			Actor: &inbox.Actor{ActorID: "u1", Name: "Ada"}, Target: &inbox.Target{Kind: "issue", TargetID: "42", Title: "x"},
			Payload: inbox.JSON(`{ "a" : [1, 2] }`), ExpiresAt: exp, GroupKey: "g", Actions: []inbox.Action{{Label: "Open", URL: "https://x.test/1"}},
			Channels: []string{"EMAIL", "IN_APP"}, Locale: "de-CH"}, "705f7295bbd5ce41609609cccd57612f"},
		{inbox.SendInput{IdempotencyKey: "k3", Recipients: []string{"a", "b"}, Type: "greeting", Locale: "en", RenderKey: "greet@3@0011223344556677",
			TemplateChannels: []string{"IN_APP", "EMAIL"}}, "235b70648ac4c28aa5bde33855c3cde1"},
		{inbox.SendInput{IdempotencyKey: "k4", Recipients: []string{"z"}, Type: "t", Payload: inbox.JSON(`null`)},
			"61aa2365d2494ee51061b2abace3c160"},
		{inbox.SendInput{IdempotencyKey: "k5", Recipients: []string{"bob", "alice", "bob"}, Type: "t", Title: "hello"},
			"abc460cb3ceb1149842b614b16da0e3f"},
	} {
		in := c.in
		in.Payload = compactPayload(in.Payload)
		var distinct []string
		for _, r := range in.Recipients {
			if !slices.Contains(distinct, r) {
				distinct = append(distinct, r)
			}
		}
		if got := inputHash(in, distinct); got != c.want {
			t.Errorf("hash of %s: %s; the store's was %s", c.in.IdempotencyKey, got, c.want)
		}
	}
}
