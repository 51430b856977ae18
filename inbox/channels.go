package inbox

import (
	"html"
	"net/mail"
	"slices"
	"strings"
)

// Channels a notification can be delivered through: the names of status records,
// delivery keys, skip counts and channel hints.
const (
	ChannelInApp   = "IN_APP"
	ChannelEmail   = "EMAIL"
	ChannelPush    = "PUSH"
	ChannelSMS     = "SMS"
	ChannelSlack   = "SLACK"
	ChannelWebhook = "WEBHOOK"
)

// ChannelSpec is what the domain knows of one channel: the one place a channel is
// registered outside its adapter (package channel). Preferences, templates, routing,
// status records and the delivery worker read it; none of them names a channel to know
// its switch, its template part or its address.
type ChannelSpec struct {
	// Name is the channel (a Channel* constant).
	Name string
	// Switch is the name of the channel's preference switch: its JSON name and the
	// PREFS attribute ("<Switch>", "cat#<category>#<Switch>"); "" when users have none
	// (the webhook goes to the tenant).
	Switch string
	// Part is the name of the channel's template part (its JSON name and the template
	// version's attribute); "" when templates have none.
	Part string
	// Fields are the part's fields, Content field names ("subject", "html", "text",
	// "title", "body") in order, each with the escaping of its outputs at render.
	Fields []PartField
	// AddressKey names the recipient's address on the channel in their profile
	// (UserProfile.Addresses): its JSON name and the PROFILE attribute; "" when it is not
	// on the profile (in-app, push: the devices, webhook: the tenant).
	AddressKey string
	// ValidAddress returns a BAD_USER_INPUT error naming AddressKey for an address the
	// channel cannot deliver to (nil: anything goes).
	ValidAddress func(string) error
	// NoAddress is the skip reason of a recipient without an address (with AddressKey
	// only).
	NoAddress string
	// Quiet reports whether quiet hours defer the channel (not in-app, not the webhook).
	Quiet bool
	// Check returns what is wrong with a template part of the channel, as "<part> needs
	// ..." ("" when it is fine); nil: anything goes.
	Check func(Content) string
	// Fallback is what the channel shows of a notification whose template has no part
	// for it: from the notification's title and body.
	Fallback func(title, body string) Content
}

// Address returns the recipient's address on the channel from their profile ("" for
// none, and for a channel without an AddressKey).
func (s ChannelSpec) Address(p UserProfile) string {
	if s.AddressKey == "" {
		return ""
	}
	return p.Address(s.AddressKey)
}

// PartField is one field of a channel's template part.
type PartField struct {
	// Name is a Content field name: "subject", "html", "text", "title" or "body".
	Name string
	// Escape is how every output of the field's template is escaped at render (its data
	// shows as written, never as the channel's markup); nil for plain text.
	Escape *Escaping
}

// Escaping is what a channel reads as markup in a field, escaped in every output of a
// template (the template's own text is the author's markup and stays as written).
// Templates know an escaping by its filter: each escaping of the registered channels'
// fields is a template filter of that name, appended to every output of such a field
// that does not already end with it, with one of AsWritten or with raw.
type Escaping struct {
	// Filter is the name of the template filter that escapes a value ("escape").
	Filter string
	// AsWritten are other filters whose output needs no more escaping ("escape_once").
	AsWritten []string
	// Func escapes text: the channel shows Func(s) as s.
	Func func(string) string
}

var (
	// EscapeHTML is HTML (an email's html): & < > " ' as character references.
	EscapeHTML = &Escaping{Filter: "escape", AsWritten: []string{"escape_once"}, Func: html.EscapeString}
	// EscapeSlack is Slack's mrkdwn (a Slack message's text): & < > as &amp; &lt; &gt;,
	// as Slack asks of every text not meant as its markup (<url|label> links, <@U…>
	// mentions, <!here>): data cannot post a disguised link or a mention from the bot.
	EscapeSlack = &Escaping{Filter: "slack_escape", Func: SlackEscape}
)

// slackEscaper escapes Slack's control characters.
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// SlackEscape returns s with Slack's control characters (& < >) escaped: Slack shows it
// as written.
func SlackEscape(s string) string { return slackEscaper.Replace(s) }

// Escapings are the distinct escapings of the registered channels' fields (by Filter),
// in Channels order.
func Escapings() []*Escaping {
	var out []*Escaping
	for _, s := range channelSpecs {
		for _, f := range s.Fields {
			if f.Escape != nil && !slices.ContainsFunc(out, func(e *Escaping) bool { return e.Filter == f.Escape.Filter }) {
				out = append(out, f.Escape)
			}
		}
	}
	return out
}

// Content is one channel's message, rendered or as template sources: the fields a
// ChannelSpec's Fields name (an email's subject, HTML and text; a push notification's
// title and body; an SMS's or a Slack message's text).
type Content struct {
	Subject, HTML, Text, Title, Body string
}

// Field returns c's field name ("" for a name that is none of Content's).
func (c Content) Field(name string) string {
	if p := c.field(name); p != nil {
		return *p
	}
	return ""
}

// SetField sets c's field name to v; it reports false for a name that is none of
// Content's.
func (c *Content) SetField(name, v string) bool {
	if p := c.field(name); p != nil {
		*p = v
		return true
	}
	return false
}

func (c *Content) field(name string) *string {
	switch name {
	case "subject":
		return &c.Subject
	case "html":
		return &c.HTML
	case "text":
		return &c.Text
	case "title":
		return &c.Title
	case "body":
		return &c.Body
	}
	return nil
}

// titleThenBody is the text of a channel with one text field: the title, then the body
// on a line of its own.
func titleThenBody(title, body string) Content {
	if title != "" && body != "" {
		return Content{Text: title + "\n" + body}
	}
	return Content{Text: title + body}
}

// channelSpecs is every channel, in Channels order.
var channelSpecs = []ChannelSpec{
	{Name: ChannelInApp, Switch: "inApp"},
	{
		Name: ChannelEmail, Switch: "email", Part: "email",
		Fields:     []PartField{{Name: "subject"}, {Name: "html", Escape: EscapeHTML}, {Name: "text"}},
		AddressKey: "email", ValidAddress: validEmail,
		NoAddress: ReasonNoEmail, Quiet: true,
		Check: func(c Content) string {
			switch {
			case strings.TrimSpace(c.Subject) == "":
				return "email needs a subject"
			case c.HTML == "" && c.Text == "":
				return "email needs html or text"
			}
			return ""
		},
		Fallback: func(title, body string) Content { return Content{Subject: title, Text: body} },
	},
	{
		Name: ChannelPush, Switch: "push", Part: "push",
		Fields: []PartField{{Name: "title"}, {Name: "body"}},
		Quiet:  true,
		Check: func(c Content) string {
			if c.Title == "" && c.Body == "" {
				return "push needs a title or a body"
			}
			return ""
		},
		Fallback: func(title, body string) Content { return Content{Title: title, Body: body} },
	},
	{
		Name: ChannelSMS, Switch: "sms", Part: "sms",
		Fields:     []PartField{{Name: "text"}},
		AddressKey: "phone", ValidAddress: validPhone,
		NoAddress: ReasonNoPhone, Quiet: true,
		Check:    requireText("sms"),
		Fallback: titleThenBody,
	},
	{
		Name: ChannelSlack, Switch: "slack", Part: "slack",
		Fields: []PartField{{Name: "text", Escape: EscapeSlack}},
		// The recipient's Slack member id ("U024BE7LH"): a direct message from the
		// tenant's bot; without one the record is skipped as no_slack_user.
		AddressKey: "slackUserId", ValidAddress: validSlackUserID,
		NoAddress: "no_slack_user", Quiet: true,
		Check: requireText("slack"),
		// The title and body are plain text: Slack shows them as the inbox does.
		Fallback: func(title, body string) Content {
			return Content{Text: SlackEscape(titleThenBody(title, body).Text)}
		},
	},
	{Name: ChannelWebhook},
}

// maxEmailBytes is the longest address SMTP carries (RFC 5321's path limit less "<>").
const maxEmailBytes = 254

// validEmail checks an email address: a bare address (net/mail, local@domain, no display
// name) of at most maxEmailBytes.
func validEmail(s string) error {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s || len(s) > maxEmailBytes || !strings.Contains(s, "@") {
		return Errorf(CodeBadUserInput, "email must be an address such as ada@example.com (at most %d bytes)", maxEmailBytes)
	}
	return nil
}

// validPhone checks a phone number: E.164, "+" followed by 2..15 digits, the first not 0.
func validPhone(s string) error {
	d, ok := strings.CutPrefix(s, "+")
	valid := ok && len(d) >= 2 && len(d) <= 15 && d[0] != '0'
	for _, r := range d {
		valid = valid && r >= '0' && r <= '9'
	}
	if !valid {
		return Errorf(CodeBadUserInput, "phone must be an E.164 number such as +4915112345678")
	}
	return nil
}

// validSlackUserID checks a Slack member id: U or W, then 2..31 upper-case letters and
// digits (Slack's ids are opaque; these are the shapes its user ids take).
func validSlackUserID(s string) error {
	valid := len(s) >= 3 && len(s) <= 32 && (s[0] == 'U' || s[0] == 'W')
	for i, r := range s {
		valid = valid && (i == 0 || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}
	if !valid {
		return Errorf(CodeBadUserInput, "slackUserId must be a Slack member id such as U024BE7LH")
	}
	return nil
}

func requireText(name string) func(Content) string {
	return func(c Content) string {
		if strings.TrimSpace(c.Text) == "" {
			return name + " needs text"
		}
		return ""
	}
}

// Channels lists every channel in the order status records and skip counts use.
var Channels = func() []string {
	out := make([]string, len(channelSpecs))
	for i, s := range channelSpecs {
		out[i] = s.Name
	}
	return out
}()

// SwitchChannels are the channels users switch on and off, in Channels order.
var SwitchChannels = collectSpecs(func(s ChannelSpec) (string, bool) { return s.Name, s.Switch != "" })

// PartChannels are the channels templates have a part for, in Channels order.
var PartChannels = collectSpecs(func(s ChannelSpec) (string, bool) { return s.Name, s.Part != "" })

// AddressKeys are the channels' AddressKeys (the profile's address names), in Channels
// order.
var AddressKeys = collectSpecs(func(s ChannelSpec) (string, bool) { return s.AddressKey, s.AddressKey != "" })

// collectSpecs returns, in Channels order, what f returns of each channel spec for which
// it reports true.
func collectSpecs(f func(ChannelSpec) (string, bool)) []string {
	var out []string
	for _, s := range channelSpecs {
		if v, ok := f(s); ok {
			out = append(out, v)
		}
	}
	return out
}

// Specs returns every channel's ChannelSpec, in Channels order.
func Specs() []ChannelSpec { return slices.Clone(channelSpecs) }

// ValidChannel reports whether c is one of Channels.
func ValidChannel(c string) bool { return slices.Contains(Channels, c) }

// Spec returns channel's ChannelSpec; false for a name that is none of Channels.
func Spec(channel string) (ChannelSpec, bool) {
	for _, s := range channelSpecs {
		if s.Name == channel {
			return s, true
		}
	}
	return ChannelSpec{}, false
}

// ChannelBySwitch returns the channel whose Switch is name ("" for none).
func ChannelBySwitch(name string) string {
	for _, s := range channelSpecs {
		if s.Switch != "" && s.Switch == name {
			return s.Name
		}
	}
	return ""
}
