package routing

import (
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// What a send reads and writes, as plain values: the store reads what the decisions need
// (Need, Read) and writes one recipient's Plan in one transaction (Written); the send
// service runs the loop between them (guards, rendering, Decide, publishing).

// Need says what a send's read of its recipients (the store's ReadRecipients) fetches
// besides the tenant's settings.
type Need struct {
	// Prefs reports whether the recipients' preferences are needed under the tenant's
	// configuration (nil: always). With no configuration cached, the preferences are
	// fetched with it and returned when Prefs says so of the configuration read.
	Prefs func(Tenant) bool
	// Profile: the recipients' channel profiles and push devices (NeedsProfile, or a
	// template that picks their locale).
	Profile bool
	// GroupKey, when set, is the group (GroupKey) whose item of each recipient is read
	// for the write (Plan.Group).
	GroupKey string
}

// Read is what a send's read of its recipients found.
type Read struct {
	// Tenant is the tenant's configuration (its settings over the configured defaults).
	Tenant Tenant
	// Recipients are what is known of each recipient read (by user id; the zero
	// Recipient for one with no items).
	Recipients map[string]Recipient
	// Groups are each recipient's group of Need.GroupKey as read (by user id); empty
	// without a GroupKey.
	Groups map[string]Group
	// At is the store's time of the read: the time the decisions are made at.
	At time.Time
}

// Group is one recipient's group as read before a send writes into it: the send's
// transaction is conditioned on it (its Rev; Stored false: that none exists yet).
type Group struct {
	Key                                  string
	Type, TargetKind, TargetID, Category string
	Rev                                  int64
	// Members are the stored member values by notification id.
	Members map[string]string
	Stored  bool
}

// Guard is one recipient's idempotency guard of a send's key: what the first send of the
// key wrote for them.
type Guard struct {
	// InputHash identifies the content the key was first sent with.
	InputHash string
	// NotificationID is the recipient's notification; "" when in-app was skipped.
	NotificationID string
	// StatusID is the id of the status records of a recipient without a notification.
	StatusID string
}

// Plan is everything one recipient's send transaction writes (the store's
// WriteRecipient): the guard of Send.IdempotencyKey holding InputHash, the notification
// (none when Decisions skip in-app) with the META counter update, its membership of
// Group, its expiry task, and the status records and deliver tasks of Decisions.
type Plan struct {
	TenantID, UserID string
	// Send is the notification as this recipient gets it: its Title and Body are the ones
	// rendered for them.
	Send inbox.SendInput
	// InputHash identifies the send's content (the guard keeps it).
	InputHash string
	// NotificationID is the pre-assigned id ("" for a fresh one).
	NotificationID string
	// Content is what a templated send rendered for the recipient (its channel parts);
	// nil: Send's title and body.
	Content *inbox.Rendered
	// Decisions are Decide's for the recipient.
	Decisions []Decision
	// Group is the recipient's group (GroupKey(Send)) as read; nil: the write reads it.
	Group *Group
	// Retention is the tenant's (Tenant.Retention), for Expiry at the write's time.
	Retention time.Duration
	// Throttle, when set, is the throttle window the notification counts in (Counts'
	// decisions only): the transaction adds one to its counter on condition that it is
	// below the slot's limit, and the write answers ErrThrottled (writing nothing) when
	// it is not.
	Throttle *Slot
}

// Written is what WriteRecipient did for one recipient.
type Written struct {
	// Delivery is the recipient's notification: written by this call (New), or by an
	// earlier call of the key (only its id known); nil Notification when in-app was
	// skipped.
	Delivery inbox.Delivery
	// Wrote is true when this call's transaction committed (the plan's decisions are the
	// stored ones); false when the guard was there (Duplicate).
	Wrote bool
	// Duplicate is true when another call of the key had written the recipient.
	Duplicate bool
	// StatusID is the id the recipient's status is read under: their notification's, or
	// that of their status records alone.
	StatusID string
}
