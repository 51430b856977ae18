package routing

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"golang.org/x/text/language"

	"github.com/inboxgw/gateway/inbox"
)

// GroupKey is the group a notification of in joins in its recipient's inbox: in.GroupKey
// as given, else "{type}|{targetKind}:{targetId}" when it has a target, else its type.
func GroupKey(in inbox.SendInput) string {
	switch {
	case in.GroupKey != "":
		return in.GroupKey
	case in.Target != nil:
		return in.Type + "|" + in.Target.Kind + ":" + in.Target.TargetID
	}
	return in.Type
}

// Expiry is when a notification of in, written at now, expires: in.ExpiresAt, else now
// + retention (the tenant's, Tenant.Retention) when it is positive, else never (the
// zero time).
func Expiry(in inbox.SendInput, now time.Time, retention time.Duration) time.Time {
	if !in.ExpiresAt.IsZero() {
		return in.ExpiresAt
	}
	if retention > 0 {
		return now.Add(retention)
	}
	return time.Time{}
}

// Locale is the locale a recipient's notification is rendered in: the first set of
// own (their preferences' locale), profile (their channel profile's), send (the send's
// locale) and tenant (the tenant's default preferences' locale); "" leaves the choice
// to the template (its default locale, LocaleCandidates).
func Locale(own, profile, send, tenant string) string {
	return cmp.Or(own, profile, send, tenant)
}

// LocaleCandidates are the stored locales of a template to try for want (a canonical
// BCP 47 tag; "" = the default), in order: want itself when locales has it, its base
// language when locales has it ("de-CH-x-abc" → "de"), then the default def. locales
// are the template's stored locales, def its default locale. The first candidate that
// has a version at or below the one asked for serves want; which one does never changes
// for a version once written (later versions are above it). Every candidate is a stored
// locale (or def), so however many tags are asked for, they resolve to the template's
// few stored ones.
func LocaleCandidates(want string, locales []string, def string) []string {
	var out []string
	if want != "" && slices.Contains(locales, want) {
		out = append(out, want)
	}
	if tag, err := language.Parse(want); want != "" && err == nil {
		if base, conf := tag.Base(); conf != language.No && base.String() != want && slices.Contains(locales, base.String()) {
			out = append(out, base.String())
		}
	}
	if !slices.Contains(out, def) {
		out = append(out, def)
	}
	return out
}

// TemplateChannels are the channels a templated send's template defines, from the
// content rendered for its recipients (keyed by recipient; each in their locale): every
// channel any rendering defines (a part given in one locale is a channel of the
// template), first seen first, keys in sorted order. Never nil: a template that defines
// no channel (or a send with nothing rendered) has none, where nil would mean "no
// template: in-app only" (InTemplate).
func TemplateChannels(rendered map[string]inbox.Rendered) []string {
	out := []string{}
	for _, k := range slices.Sorted(maps.Keys(rendered)) {
		for _, ch := range rendered[k].Channels {
			if !slices.Contains(out, ch) {
				out = append(out, ch)
			}
		}
	}
	return out
}
