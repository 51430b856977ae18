package inbox_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// The switches of the release before the channel registry, as it decoded stored tenant
// preferences (encoding/json into structs; field names matched case-insensitively).
type (
	prevSwitches struct{ InApp, Email, Push, SMS bool }
	prevChanges  struct{ InApp, Email, Push, SMS *bool }
	prevTenant   struct {
		Channels   prevSwitches
		Categories []struct {
			Category string
			Channels prevChanges
		}
		Critical []string
	}
)

// Tenant preferences this release stores (PutTenantSettings: json.Marshal) are read the
// same by the release before it, which a rolling deploy runs beside this one and a
// rollback goes back to: its struct had no field the channel names IN_APP would match,
// so it read every stored tenant's in-app default as off (every in-app notification
// skipped as opted out) and a category's in-app switch as not set. And this release
// reads back what it wrote, whatever the switches say.
func TestStoredSwitchesReadByThePreviousRelease(t *testing.T) {
	t.Parallel()
	b := func(v bool) *bool { return &v }
	for _, tc := range []struct {
		name string
		in   inbox.TenantPreferences
		want prevTenant
	}{
		{
			name: "all on",
			in:   inbox.DefaultTenantPreferences(),
			want: prevTenant{Channels: prevSwitches{true, true, true, true}},
		},
		{
			name: "in-app only, slack off, categories",
			in: inbox.TenantPreferences{
				Channels: inbox.ChannelSwitches{inbox.ChannelInApp: true, inbox.ChannelEmail: false, inbox.ChannelPush: false, inbox.ChannelSMS: false, inbox.ChannelSlack: false},
				Categories: []inbox.CategorySwitches{
					{Category: "marketing", Channels: inbox.SwitchChanges{inbox.ChannelInApp: false, inbox.ChannelSlack: true}},
					{Category: "digest", Channels: inbox.SwitchChanges{inbox.ChannelSMS: true}},
					{Category: "none", Channels: nil},
				},
				Critical: []string{"security"},
			},
			want: prevTenant{Channels: prevSwitches{InApp: true},
				Categories: []struct {
					Category string
					Channels prevChanges
				}{
					{Category: "marketing", Channels: prevChanges{InApp: b(false)}},
					{Category: "digest", Channels: prevChanges{SMS: b(true)}},
					{Category: "none"},
				},
				Critical: []string{"security"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, err := json.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			var prev prevTenant
			if err := json.Unmarshal(js, &prev); err != nil {
				t.Fatalf("the release before cannot read %s: %v", js, err)
			}
			if !reflect.DeepEqual(prev, tc.want) {
				t.Errorf("the release before reads %s as\n %+v, want\n %+v", js, prev, tc.want)
			}
			var back inbox.TenantPreferences
			if err := json.Unmarshal(js, &back); err != nil || !reflect.DeepEqual(back, tc.in) {
				t.Errorf("read back %s as %+v (%v), want %+v", js, back, err, tc.in)
			}
		})
	}
}

// A notification without a Slack part shows its title and body in Slack as the inbox
// does: as text, Slack's control characters escaped (a title quoting a user's
// "<https://evil|bank>" is no link, "<!here>" no mention); an SMS keeps them as they are.
func TestSlackFallbackIsText(t *testing.T) {
	t.Parallel()
	r := inbox.Rendered{Title: "Re: <https://evil.example|https://bank.example>", Body: "<!here> & <@U024BE7LH>"}
	if got := r.Content(inbox.ChannelSlack).Text; got != "Re: &lt;https://evil.example|https://bank.example&gt;\n&lt;!here&gt; &amp; &lt;@U024BE7LH&gt;" {
		t.Errorf("slack: %q", got)
	}
	if got := r.Content(inbox.ChannelSMS).Text; got != r.Title+"\n"+r.Body {
		t.Errorf("sms: %q", got)
	}
	// A template's own Slack part is used as rendered (its outputs escaped at render).
	r.Parts = map[string]inbox.Content{inbox.ChannelSlack: {Text: "<https://app.example|View>"}}
	if got := r.Content(inbox.ChannelSlack).Text; got != "<https://app.example|View>" {
		t.Errorf("slack part: %q", got)
	}
}
