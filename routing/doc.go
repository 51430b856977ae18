// Package routing holds the gateway's routing decisions as pure functions over plain
// values: given what a send asks for and what is known of a recipient (preferences, the
// tenant's defaults, the profile, the clock), it answers what to do, and it does nothing
// itself. It is the domain side of DESIGN.md "The shape (v3)": the store reads what a
// decision needs and writes what was decided; routing decides in between, so every rule
// is a table test that runs in milliseconds without DynamoDB Local.
//
// It imports only the standard library, package inbox and golang.org/x/text; never an
// AWS package, never the store.
//
// It holds:
//   - decide.go: which channels a recipient of a send gets (Decide: template ∩ hint ∩
//     preferences ∩ what the recipient has, the critical bypass, quiet-hours deferral),
//     one Decision per delivery record; the in-app rule (InApp); the same preferences
//     rule again at delivery time (Recheck); which channel lists a send may carry
//     (CheckChannels) and what a send's decisions need read (NeedsProfile).
//   - notification.go: the group key, the expiry, the recipient's locale and the
//     template locales to try for it, the channels of a rendered template.
//   - quiet.go: whether an instant lies in a recipient's daily quiet hours in their
//     time zone, and the instant they end, exact across daylight-saving changes.
//
// The skip reasons a decision gives are inbox's Reason constants (inbox/routing.go),
// the one list that status records, skip counts and the APIs share.
package routing
