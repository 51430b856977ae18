package rest

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest/gen"
)

// Limits of the service API (the document states the same numbers).
const (
	// MaxRecipients is the most recipients one send or broadcast lists.
	MaxRecipients = 1000
	// MaxSegmentChange is the most ids one segment change adds and removes together, and
	// the largest page of members.
	MaxSegmentChange = 1000
	// DefaultSegmentPage is the page of members GET /v1/segments/{id} answers by default.
	DefaultSegmentPage = 100
	// MaxSendAhead is how far ahead sendAt may lie (a year, as the issue says).
	MaxSendAhead = 366 * 24 * time.Hour
)

// checkIdempotencyKey checks an Idempotency-Key: an id (it becomes part of a key).
func checkIdempotencyKey(k string) error {
	return inbox.CheckID("Idempotency-Key", k)
}

// checkIDs checks every id of a list with inbox.CheckID, naming the list and index.
func checkIDs(field string, ids []string) error {
	for i, id := range ids {
		if err := inbox.CheckID(fmt.Sprintf("%s[%d]", field, i), id); err != nil {
			return err
		}
	}
	return nil
}

// checkOptionalID checks id with inbox.CheckID when it is set.
func checkOptionalID(field string, id *string) error {
	if id == nil {
		return nil
	}
	return inbox.CheckID(field, *id)
}

// checkRecipients checks the choice of recipients: exactly one of the choices given.
func checkRecipients(user *string, list *[]string, segment *string, names string) error {
	n := 0
	for _, set := range []bool{user != nil, list != nil, segment != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return inbox.Errorf(inbox.CodeBadUserInput, "exactly one of %s is required", names)
	}
	if err := checkOptionalID("recipientUserId", user); err != nil {
		return err
	}
	if err := checkOptionalID("segment", segment); err != nil {
		return err
	}
	if list != nil {
		switch l := len(*list); {
		case l == 0:
			return inbox.Errorf(inbox.CodeBadUserInput, "recipients must not be empty")
		case l > MaxRecipients:
			return inbox.Errorf(inbox.CodeBadUserInput, "recipients takes at most %d user ids, got %d (send to a segment instead)", MaxRecipients, l)
		}
		return checkIDs("recipients", *list)
	}
	return nil
}

// checkSendAt checks that sendAt, when set, lies in the future and at most MaxSendAhead
// ahead of now.
func checkSendAt(sendAt *time.Time, now time.Time) error {
	if sendAt == nil {
		return nil
	}
	switch {
	case !sendAt.After(now):
		return inbox.Errorf(inbox.CodeBadUserInput, "sendAt is in the past")
	case sendAt.Sub(now) > MaxSendAhead:
		return inbox.Errorf(inbox.CodeBadUserInput, "sendAt is more than a year ahead")
	}
	return nil
}

// checkData checks the size of a data document.
func checkData(data []byte) error {
	if len(data) > inbox.MaxPayloadBytes {
		return inbox.Errorf(inbox.CodeBadUserInput, "data must be at most %d bytes of JSON", inbox.MaxPayloadBytes)
	}
	return nil
}

// checkPriority checks a lane name.
func checkPriority(p *gen.Priority) error {
	if p != nil && !p.Valid() {
		return inbox.Errorf(inbox.CodeBadUserInput, "priority must be transactional or bulk")
	}
	return nil
}

// checkSend checks what the handler can check of a send without the store: the
// recipients, every id, the sizes, the lane, the channels and the times.
func checkSend(r gen.SendRequest, now time.Time) error {
	if err := checkRecipients(r.RecipientUserId, r.Recipients, r.Segment, "recipientUserId, recipients and segment"); err != nil {
		return err
	}
	if err := inbox.CheckID("type", r.Type); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"category", r.Category}, {"template", r.Template}, {"groupKey", r.GroupKey}} {
		if err := checkOptionalID(f.name, f.v); err != nil {
			return err
		}
	}
	if r.Locale != nil {
		if err := inbox.CheckLocale(*r.Locale); err != nil {
			return err
		}
	}
	if r.Actor != nil {
		if err := inbox.CheckID("actor.id", r.Actor.Id); err != nil {
			return err
		}
	}
	if r.Target != nil {
		if err := inbox.CheckID("target.id", r.Target.Id); err != nil {
			return err
		}
		if err := inbox.CheckID("target.kind", r.Target.Kind); err != nil {
			return err
		}
	}
	if r.Actions != nil && len(*r.Actions) > inbox.MaxActions {
		return inbox.Errorf(inbox.CodeBadUserInput, "actions takes at most %d actions", inbox.MaxActions)
	}
	for _, c := range deref(r.ChannelsHint) {
		if !c.Valid() {
			return inbox.Errorf(inbox.CodeBadUserInput, "channelsHint: %q is not a channel (%s)", string(c), strings.ToLower(strings.Join(inbox.Channels, ", ")))
		}
	}
	if err := checkPriority(r.Priority); err != nil {
		return err
	}
	if r.Data != nil {
		if err := checkData(*r.Data); err != nil {
			return err
		}
	}
	if err := checkSendAt(r.SendAt, now); err != nil {
		return err
	}
	if r.ExpiresAt != nil {
		from := now
		if r.SendAt != nil {
			from = *r.SendAt
		}
		if !r.ExpiresAt.After(from) {
			return inbox.Errorf(inbox.CodeBadUserInput, "expiresAt must be after sendAt (or now)")
		}
		if r.ExpiresAt.Sub(now) > inbox.MaxSnooze+MaxSendAhead {
			return inbox.Errorf(inbox.CodeBadUserInput, "expiresAt is too far ahead")
		}
	}
	return nil
}

// checkAnnouncement checks an announcement as checkSend checks a send; the service checks
// the rest (inbox.AnnouncementInput.Validate: title or body, expiry).
func checkAnnouncement(r gen.AnnouncementRequest, now time.Time) error {
	if err := inbox.CheckID("type", r.Type); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"category", r.Category}, {"template", r.Template}} {
		if err := checkOptionalID(f.name, f.v); err != nil {
			return err
		}
	}
	if r.Locale != nil {
		if err := inbox.CheckLocale(*r.Locale); err != nil {
			return err
		}
	}
	if r.Actor != nil {
		if err := inbox.CheckID("actor.id", r.Actor.Id); err != nil {
			return err
		}
	}
	if r.Target != nil {
		if err := inbox.CheckID("target.id", r.Target.Id); err != nil {
			return err
		}
		if err := inbox.CheckID("target.kind", r.Target.Kind); err != nil {
			return err
		}
	}
	if r.Actions != nil && len(*r.Actions) > inbox.MaxActions {
		return inbox.Errorf(inbox.CodeBadUserInput, "actions takes at most %d actions", inbox.MaxActions)
	}
	if r.Data != nil {
		if err := checkData(*r.Data); err != nil {
			return err
		}
	}
	if r.ExpiresAt != nil {
		if !r.ExpiresAt.After(now) {
			return inbox.Errorf(inbox.CodeBadUserInput, "expiresAt must be in the future")
		}
		if r.ExpiresAt.Sub(now) > inbox.MaxAnnouncementTTL {
			return inbox.Errorf(inbox.CodeBadUserInput, "expiresAt must be at most %d days ahead", int(inbox.MaxAnnouncementTTL/(24*time.Hour)))
		}
	}
	return nil
}

// checkBroadcast checks a broadcast as checkSend checks a send.
func checkBroadcast(r gen.BroadcastRequest, now time.Time) error {
	if err := checkRecipients(nil, r.Recipients, r.Segment, "segment and recipients"); err != nil {
		return err
	}
	if err := inbox.CheckID("type", r.Type); err != nil {
		return err
	}
	if err := checkOptionalID("template", r.Template); err != nil {
		return err
	}
	if err := checkOptionalID("category", r.Category); err != nil {
		return err
	}
	if err := checkPriority(r.Priority); err != nil {
		return err
	}
	if r.Data != nil {
		if err := checkData(*r.Data); err != nil {
			return err
		}
	}
	// A sendAt in the past is the Backend's to refuse, after it looked for a replay: the
	// replay of a scheduled broadcast may come after its sendAt and must answer the first
	// 202 (Backend.StartBroadcast).
	if r.SendAt != nil && r.SendAt.After(now) {
		return checkSendAt(r.SendAt, now)
	}
	return nil
}

// checkSegmentChange checks a segment change: at most MaxSegmentChange ids together,
// each an id, none both added and removed.
func checkSegmentChange(add, remove []string) error {
	if n := len(add) + len(remove); n == 0 {
		return inbox.Errorf(inbox.CodeBadUserInput, "add or remove at least one user id")
	} else if n > MaxSegmentChange {
		return inbox.Errorf(inbox.CodeBadUserInput, "a segment change takes at most %d user ids (add and remove together), got %d", MaxSegmentChange, n)
	}
	if err := checkIDs("add", add); err != nil {
		return err
	}
	if err := checkIDs("remove", remove); err != nil {
		return err
	}
	adding := make(map[string]bool, len(add))
	for _, id := range add {
		adding[id] = true
	}
	for _, id := range remove {
		if adding[id] {
			return inbox.Errorf(inbox.CodeBadUserInput, "user %q is both added and removed", id)
		}
	}
	return nil
}

// e164 is a phone number in E.164 form.
var e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// checkProfile checks a channel profile: an address with one '@', an E.164 phone, a BCP
// 47 locale and an IANA time zone, each when given.
func checkProfile(p gen.UserProfileInput) error {
	if e := deref(p.Email); e != "" {
		at := strings.IndexByte(e, '@')
		if at < 1 || at != strings.LastIndexByte(e, '@') || at == len(e)-1 || len(e) > 320 || strings.ContainsAny(e, " \t\r\n<>") {
			return inbox.Errorf(inbox.CodeBadUserInput, "email %q is not an email address", e)
		}
	}
	if ph := deref(p.Phone); ph != "" && !e164.MatchString(ph) {
		return inbox.Errorf(inbox.CodeBadUserInput, "phone must be E.164, e.g. +4915112345678")
	}
	if l := deref(p.Locale); l != "" {
		if err := inbox.CheckLocale(l); err != nil {
			return err
		}
	}
	if tz := deref(p.Timezone); tz != "" {
		if err := inbox.CheckTimezone(tz); err != nil {
			return err
		}
	}
	return nil
}

// checkSettings checks tenant settings: the default preferences as a preferences update,
// the critical categories as ids, a webhook URL that is absolute http(s), a webhook secret
// of at least 24 bytes whose "whsec_" form (if it has one) is base64.
func checkSettings(s gen.TenantSettingsInput) error {
	if d := s.DefaultPreferences; d != nil {
		u := inbox.PreferencesUpdate{Timezone: d.Timezone, Locale: d.Locale}
		var err error
		if u.Channels, err = switchChanges(d.Channels); err != nil {
			return err
		}
		if u.Categories, err = switchCategories(deref(d.Categories)); err != nil {
			return err
		}
		if d.QuietHours != nil {
			u.QuietHours = &inbox.QuietHours{Start: d.QuietHours.Start, End: d.QuietHours.End}
			if deref(d.Timezone) == "" {
				return inbox.Errorf(inbox.CodeBadUserInput, "defaultPreferences: quietHours need a timezone")
			}
		}
		if err := u.Validate(); err != nil {
			return err
		}
	}
	if err := checkIDs("criticalCategories", deref(s.CriticalCategories)); err != nil {
		return err
	}
	if w := s.Webhook; w != nil {
		u, err := url.Parse(w.Url)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return inbox.Errorf(inbox.CodeBadUserInput, "webhook.url must be an absolute http(s) URL")
		}
		if len(w.Secret) < 24 {
			return inbox.Errorf(inbox.CodeBadUserInput, "webhook.secret must be at least 24 bytes")
		}
		// The webhook channel keys a "whsec_" secret (the Standard Webhooks form) with the
		// standard base64 after the prefix; a secret it cannot decode would fail every
		// delivery, so it is refused here.
		if k, ok := strings.CutPrefix(w.Secret, "whsec_"); ok {
			if key, err := base64.StdEncoding.DecodeString(k); err != nil || len(key) == 0 {
				return inbox.Errorf(inbox.CodeBadUserInput, "webhook.secret starts with whsec_ but the rest is not standard base64 (a Standard Webhooks secret is whsec_ + base64 of the key; any other secret is used as raw bytes)")
			}
		}
	}
	if r := s.RetentionDays; r != nil && (*r < 1 || *r > 3660) {
		return inbox.Errorf(inbox.CodeBadUserInput, "retentionDays must be 1 to 3660")
	}
	return nil
}
