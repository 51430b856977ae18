package app

import (
	"context"
	"sync"
	"time"

	"github.com/inboxgw/gateway/channel/smtpcatch"
	"github.com/inboxgw/gateway/inbox"
)

// devRecentSends is how many recipients of the last sends dev mode's mail page lists:
// each costs one Query of its status when the page is read.
const devRecentSends = 10

// recentSend is one recipient a send wrote, as recentSends keeps it.
type recentSend struct {
	tenantID, statusID, userID string
	at                         time.Time
}

// recentSends keeps the last devRecentSends recipients the gateway's sends wrote (told
// by service.Options.Written), so that dev mode's mail page can say what became of their
// channels, a skipped email's reason among them. Safe for concurrent use.
type recentSends struct {
	now  func() time.Time
	mu   sync.Mutex
	last []recentSend // oldest first
}

// record is a service.Writer.Written: it keeps res's recipients, in order, each once.
func (r *recentSends) record(tenantID string, recipients []string, res inbox.SendResult) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range recipients {
		id := res.StatusIDs[u]
		if id == "" {
			continue
		}
		kept := r.last[:0]
		for _, s := range r.last {
			if s.tenantID != tenantID || s.statusID != id {
				kept = append(kept, s)
			}
		}
		r.last = append(kept, recentSend{tenantID: tenantID, statusID: id, userID: u, at: now})
		if n := len(r.last) - devRecentSends; n > 0 {
			r.last = append(r.last[:0], r.last[n:]...)
		}
	}
}

// statusReader reads a notification's status (*store.Store implements it).
type statusReader interface {
	Status(ctx context.Context, tenantID, notificationID string) (inbox.NotificationStatus, error)
}

// outcomes returns the channels of the kept sends, newest first, as their status records
// tell them now (one strongly consistent Query each). A status gone (expired) is left
// out; another error ends the list with it.
func (r *recentSends) outcomes(st statusReader) smtpcatch.Sends {
	return func(ctx context.Context) ([]smtpcatch.SendOutcome, error) {
		r.mu.Lock()
		last := append([]recentSend(nil), r.last...)
		r.mu.Unlock()
		var out []smtpcatch.SendOutcome
		for i := len(last) - 1; i >= 0; i-- {
			s := last[i]
			status, err := st.Status(ctx, s.tenantID, s.statusID)
			if inbox.ErrorCode(err) == inbox.CodeNotFound {
				continue
			}
			if err != nil {
				return out, err
			}
			for _, c := range status.Channels {
				channel := c.Channel
				if c.DeviceID != "" {
					channel += " (device " + c.DeviceID + ")"
				}
				o := smtpcatch.SendOutcome{At: s.at, NotificationID: s.statusID, UserID: s.userID, Channel: channel, Status: c.Status}
				if c.Status == inbox.DeliverySkipped {
					o.Reason, o.Explain = c.Reason, explainSkip(c.Reason)
				} else if c.Error != "" {
					o.Explain = c.Error
				}
				out = append(out, o)
			}
		}
		return out, nil
	}
}

// explainSkip says in words why a channel was skipped with reason and what changes it.
func explainSkip(reason string) string {
	switch reason {
	case inbox.ReasonOptedOut:
		return "the user turned this channel off (their preferences: GraphQL updatePreferences, REST PUT /v1/users/{id}/preferences)"
	case inbox.ReasonCategoryOptedOut:
		return "the user turned this channel off for the notification's category (their preferences)"
	case inbox.ReasonMuted:
		return "the user muted the notification's target"
	case inbox.ReasonSuppressed:
		return "the address is on the tenant's suppression list (GET /v1/suppressions; DELETE /v1/suppressions/{channel}/{address} removes it)"
	case inbox.ReasonNoEmail:
		return "the user's profile has no email address (PUT /v1/users/{id})"
	case inbox.ReasonNoPhone:
		return "the user's profile has no phone number (PUT /v1/users/{id})"
	case inbox.ReasonNoDevice:
		return "the user has no push device registered (POST /v1/users/{id}/devices)"
	case inbox.ReasonNoWebhook:
		return "the tenant's settings have no webhook URL (PUT /v1/tenant/settings)"
	case inbox.ReasonNoProvider:
		return "the gateway has no provider configured for this channel"
	case inbox.ReasonNotInTemplate:
		return "the template (or, without one, the send) does not define this channel"
	case inbox.ReasonNotInHint:
		return "the send's channels hint leaves this channel out"
	case inbox.ReasonThrottled:
		return "the send's throttle limit was reached for this user"
	case inbox.ReasonActor:
		return "the user is the send's actor, left out of it"
	case inbox.ReasonDeviceMoved:
		return "the push device was registered by another user since"
	}
	return ""
}
