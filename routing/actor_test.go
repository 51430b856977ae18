package routing_test

import (
	"testing"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// TestDecideLeavesOutTheActor: the recipient a send leaves out (its actor) is skipped
// in every candidate channel with reason actor, critical category or not, and every
// other recipient, or a send that leaves no one out, is decided as before.
func TestDecideLeavesOutTheActor(t *testing.T) {
	tpl := inbox.SendInput{Type: "comment", Category: "social", TemplateChannels: all, Target: issue,
		Actor: &inbox.Actor{ActorID: "ann"}}
	ann := routing.Recipient{ID: "ann", Profile: both, Devices: twoDev}
	bob := routing.Recipient{ID: "bob", Profile: both, Devices: twoDev}
	crit := tpl
	crit.Category = "security"
	for _, c := range []struct {
		name     string
		in       inbox.SendInput
		leaveOut string
		r        routing.Recipient
		want     string
	}{
		{"actor left out", tpl, "ann", ann, "IN_APP:actor EMAIL:actor PUSH:actor SMS:actor WEBHOOK:actor"},
		{"critical: still left out", crit, "ann", ann, "IN_APP:actor EMAIL:actor PUSH:actor SMS:actor WEBHOOK:actor"},
		{"another recipient", tpl, "ann", bob, "IN_APP:Q EMAIL:Q PUSH#d1:Q PUSH#d2:Q SMS:Q WEBHOOK:Q"},
		{"includeActor (nothing left out)", tpl, "", ann, "IN_APP:Q EMAIL:Q PUSH#d1:Q PUSH#d2:Q SMS:Q WEBHOOK:Q"},
		{"recipient id unknown", tpl, "ann", routing.Recipient{Profile: both, Devices: twoDev}, "IN_APP:Q EMAIL:Q PUSH#d1:Q PUSH#d2:Q SMS:Q WEBHOOK:Q"},
	} {
		in := c.in
		in.LeaveOut = c.leaveOut
		ds := routing.Decide(in, tenant(), c.r, now)
		if got := describe(ds); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
		if c.want[len("IN_APP:"):len("IN_APP:")+5] == "actor" && routing.InApp(ds).Queued() {
			t.Errorf("%s: in-app queued for the actor", c.name)
		}
	}
}

// TestDecideSkipsSuppressedAddresses: an address on the suppression list is skipped
// with reason suppressed, critical or not, and only in its own channel.
func TestDecideSkipsSuppressedAddresses(t *testing.T) {
	in := inbox.SendInput{Type: "comment", Category: "social", TemplateChannels: all, Target: issue}
	r := routing.Recipient{ID: "kim", Profile: both, Suppressed: map[string]bool{email: true}}
	if got, want := describe(routing.Decide(in, tenant(), r, now)), "IN_APP:Q EMAIL:suppressed PUSH:no_device SMS:Q WEBHOOK:Q"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	in.Category = "security"
	r.Suppressed = map[string]bool{sms: true}
	if got, want := describe(routing.Decide(in, tenant(), r, now)), "IN_APP:Q EMAIL:Q PUSH:no_device SMS:suppressed WEBHOOK:Q"; got != want {
		t.Errorf("critical: got %s, want %s", got, want)
	}
}
