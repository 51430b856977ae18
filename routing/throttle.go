package routing

import (
	"errors"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// Bounds of a send's throttle (inbox.Throttle).
const (
	MinThrottleLimit  = 1
	MaxThrottleLimit  = 1000
	MinThrottleWindow = time.Second
	MaxThrottleWindow = 7 * 24 * time.Hour
)

// ErrThrottled is the store's answer to a recipient's write whose throttle slot
// (Plan.Throttle) was full when its transaction ran: nothing was written; the caller
// writes the recipient again with Throttled's decisions.
var ErrThrottled = errors.New("routing: the recipient's throttle window is full")

// CheckThrottle checks a send's throttle: Key a valid id, Limit 1..1,000, Window
// 1 s..7 days in whole seconds. Errors: BAD_USER_INPUT naming the member.
func CheckThrottle(t inbox.Throttle) error {
	if err := inbox.CheckID("throttle.key", t.Key); err != nil {
		return err
	}
	if t.Limit < MinThrottleLimit || t.Limit > MaxThrottleLimit {
		return inbox.Errorf(inbox.CodeBadUserInput, "throttle.limit must be from %d to %d", MinThrottleLimit, MaxThrottleLimit)
	}
	if t.Window < MinThrottleWindow || t.Window > MaxThrottleWindow || t.Window%time.Second != 0 {
		return inbox.Errorf(inbox.CodeBadUserInput, "throttle.window must be whole seconds from 1s to 168h (7 days)")
	}
	return nil
}

// Slot is the throttle window one recipient's notification counts in: the store counts
// it, on condition that fewer than Limit were counted before (ErrThrottled otherwise).
type Slot struct {
	// Key is the throttle's key; Start the window's start (the slot's identity), End its
	// end (after which the counter may go: its TTL).
	Key        string
	Limit      int
	Start, End time.Time
}

// ThrottleSlot is the slot of a send's throttle t at time at: the window of length
// t.Window, aligned on the Unix epoch, that holds at.
func ThrottleSlot(t inbox.Throttle, at time.Time) Slot {
	start := time.UnixMilli(at.UnixMilli() - at.UnixMilli()%t.Window.Milliseconds()).UTC()
	return Slot{Key: t.Key, Limit: t.Limit, Start: start, End: start.Add(t.Window)}
}

// Counts reports whether a recipient's decisions deliver anything (in-app written or
// some channel queued): only such a notification takes a place in a throttle window.
func Counts(ds []Decision) bool {
	for _, d := range ds {
		if d.Queued() {
			return true
		}
	}
	return false
}

// Throttled returns ds with every channel skipped for inbox.ReasonThrottled (the
// throttle applies to the notification, not to one channel): one decision per
// channel, PUSH's devices as one "PUSH" record, reasons already there kept.
func Throttled(ds []Decision) []Decision {
	var out []Decision
	pushed := false
	for _, d := range ds {
		if d.Channel == inbox.ChannelPush && d.Reason == "" {
			if pushed {
				continue
			}
			pushed = true
		}
		if d.Reason == "" {
			d = Decision{Channel: d.Channel, Key: d.Channel, Reason: inbox.ReasonThrottled}
		}
		out = append(out, d)
	}
	return out
}

// ParseThrottle builds a send's throttle from a transport's members: key ("" leaves
// the default to the service), limit, and window as a Go duration ("1h", "90s").
// Errors: BAD_USER_INPUT for a window that is not a duration (bounds: CheckThrottle).
func ParseThrottle(key string, limit int, window string) (inbox.Throttle, error) {
	if len(window) > 32 {
		return inbox.Throttle{}, inbox.Errorf(inbox.CodeBadUserInput, "throttle.window must be a duration such as \"1h\"")
	}
	d, err := time.ParseDuration(window)
	if err != nil {
		return inbox.Throttle{}, inbox.Errorf(inbox.CodeBadUserInput, "throttle.window must be a duration such as \"1h\" (%q)", window)
	}
	return inbox.Throttle{Key: key, Limit: limit, Window: d}, nil
}
