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
// Today it holds the quiet-hours window (quiet.go): whether an instant lies in a
// recipient's daily quiet hours in their time zone, and the instant they end, exact
// across daylight-saving changes.
package routing
