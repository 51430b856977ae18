package routing_test

import (
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

func TestCheckThrottleBounds(t *testing.T) {
	ok := []inbox.Throttle{
		{Key: "comment", Limit: 1, Window: time.Second},
		{Key: "comment", Limit: 1000, Window: 7 * 24 * time.Hour},
		{Key: "k", Limit: 2, Window: time.Hour},
	}
	for _, th := range ok {
		if err := routing.CheckThrottle(th); err != nil {
			t.Errorf("%+v refused: %v", th, err)
		}
	}
	bad := []inbox.Throttle{
		{Key: "", Limit: 1, Window: time.Hour},
		{Key: "a#b", Limit: 1, Window: time.Hour},
		{Key: strings.Repeat("k", 10*1024), Limit: 1, Window: time.Hour},
		{Key: "k", Limit: 0, Window: time.Hour},
		{Key: "k", Limit: 1001, Window: time.Hour},
		{Key: "k", Limit: -1, Window: time.Hour},
		{Key: "k", Limit: 1, Window: 999 * time.Millisecond},
		{Key: "k", Limit: 1, Window: 1500 * time.Millisecond},
		{Key: "k", Limit: 1, Window: 7*24*time.Hour + time.Second},
		{Key: "k", Limit: 1, Window: -time.Hour},
	}
	for _, th := range bad {
		if err := routing.CheckThrottle(th); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%.40v: got %v, want BAD_USER_INPUT", th, err)
		}
	}
	for _, w := range []string{"", "1 hour", "1h1", strings.Repeat("1", 40) + "s", "1e3s"} {
		if _, err := routing.ParseThrottle("k", 1, w); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("window %q: got %v, want BAD_USER_INPUT", w, err)
		}
	}
	if th, err := routing.ParseThrottle("", 3, "90m"); err != nil || th.Window != 90*time.Minute || th.Limit != 3 || th.Key != "" {
		t.Errorf("90m: %+v %v", th, err)
	}
}

// TestThrottleSlotWindows: windows are aligned on the Unix epoch, an instant at a
// window's start is in that window, the last millisecond before it in the previous one.
func TestThrottleSlotWindows(t *testing.T) {
	th := inbox.Throttle{Key: "k", Limit: 2, Window: time.Hour}
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at    time.Time
		start time.Time
	}{
		{at, at},
		{at.Add(59*time.Minute + 59*time.Second + 999*time.Millisecond), at},
		{at.Add(-time.Millisecond), at.Add(-time.Hour)},
		{at.Add(time.Hour), at.Add(time.Hour)},
		{at.In(time.FixedZone("x", 5*3600+1800)).Add(30 * time.Minute), at},
	} {
		s := routing.ThrottleSlot(th, c.at)
		if !s.Start.Equal(c.start) || !s.End.Equal(c.start.Add(time.Hour)) || s.Key != "k" || s.Limit != 2 {
			t.Errorf("at %v: slot %+v, want start %v", c.at, s, c.start)
		}
	}
	week := routing.ThrottleSlot(inbox.Throttle{Key: "k", Limit: 1, Window: 7 * 24 * time.Hour}, at)
	if week.Start.After(at) || !week.End.After(at) || week.End.Sub(week.Start) != 7*24*time.Hour || week.Start.UnixMilli()%(7*24*3600*1000) != 0 {
		t.Errorf("a week's slot: %+v", week)
	}
}

// TestThrottledSkipsEveryChannel: a throttled recipient's decisions skip every channel
// with reason throttled (push devices as one record), reasons already there kept; only
// decisions that deliver something count.
func TestThrottledSkipsEveryChannel(t *testing.T) {
	in := inbox.SendInput{Type: "comment", Category: "social", TemplateChannels: all, Target: issue}
	ds := routing.Decide(in, tenant(), recipients()["devices"], now)
	if !routing.Counts(ds) {
		t.Fatal("a delivering recipient does not count")
	}
	if got, want := describe(routing.Throttled(ds)), "IN_APP:throttled EMAIL:throttled PUSH:throttled SMS:throttled WEBHOOK:throttled"; got != want {
		t.Errorf("throttled: %s, want %s", got, want)
	}
	bare := routing.Decide(inbox.SendInput{Type: "comment", Category: "social", TemplateChannels: all, Channels: []string{email}}, routing.Tenant{Prefs: tenant().Prefs}, recipients()["bare"], now)
	if routing.Counts(bare) {
		t.Errorf("a recipient nothing delivers to counts: %s", describe(bare))
	}
	if got := describe(routing.Throttled(bare)); got != describe(bare) {
		t.Errorf("throttling changed skips: %s -> %s", describe(bare), got)
	}
}
