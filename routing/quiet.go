package routing

import (
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// QuietWindowEnd reports whether now lies in the daily window q in loc (a non-nil
// location), and the instant it ends. An instant is quiet when the wall clock in loc
// shows a minute of the day from q.Start (included) to q.End (excluded); End before
// Start wraps past midnight. A malformed q ("HH:MM", 00:00..23:59 each), or one with
// Start equal to End, is no window: never quiet.
//
// The end is the first instant after now at which the wall clock lies outside the
// window, so it is always after now and every instant of [now, end) is quiet. On most
// days that is when the clock shows End. Across a daylight-saving change:
//   - End in a spring-forward gap (02:30 on the day 02:00 jumps to 03:00): the instant
//     of the jump, when the clock passes End without showing it.
//   - End in a repeated hour (01:30 on the day 02:00 falls back to 01:00): the pass of
//     End that follows now, the first pass from before it and the second from within
//     the repeated hour; between the passes the clock is outside the window, and it is
//     quiet again from its Start on the second pass.
//   - The clock falling back to before Start (a Start inside the repeated hour) ends the
//     window at the fall; it starts again when the clock shows Start once more.
//   - Start in a gap: the window starts when the clock jumps into it.
//
// The wall clock is linear between two transitions of loc's offset (time.Time.ZoneBounds),
// so the end is found by walking the transitions from now: within each stretch, the
// clock reaches End after the time-of-day distance to it; at each transition the clock
// jumps, and the window ends there if the jump lands outside it.
func QuietWindowEnd(now time.Time, q inbox.QuietHours, loc *time.Location) (time.Time, bool) {
	w, ok := parseWindow(q)
	if !ok {
		return time.Time{}, false
	}
	t := now.In(loc)
	if !w.holds(t) {
		return time.Time{}, false
	}
	// Each round crosses one transition within the day before the clock shows End;
	// tz data has at most a few a day (maxTransitions is far above any zone's).
	for range maxTransitions {
		end := t.Add(w.untilEnd(t))
		_, next := t.ZoneBounds()
		if next.IsZero() || end.Before(next) {
			return end, true
		}
		t = next.In(loc)
		if !w.holds(t) {
			return t, true
		}
	}
	return t, true
}

// maxTransitions bounds QuietWindowEnd's walk over offset transitions. A window is under
// a day of wall clock and no zone changes its offset more than twice in a day, so the
// walk never gets near it; were it reached, the last transition crossed (after now, and
// quiet until then) is the end.
const maxTransitions = 16

// window is a daily quiet window in minutes since midnight: [start, end), wrapping past
// midnight when end < start; start != end.
type window struct{ start, end int }

// parseWindow returns q's window; false when q is malformed or empty (Start == End).
func parseWindow(q inbox.QuietHours) (window, bool) {
	start, okS := clockMinutes(q.Start)
	end, okE := clockMinutes(q.End)
	if !okS || !okE || start == end {
		return window{}, false
	}
	return window{start, end}, true
}

// holds reports whether the wall clock of t (in its location) lies in w.
func (w window) holds(t time.Time) bool {
	h, m, _ := t.Clock()
	mm := h*60 + m
	if w.start < w.end {
		return mm >= w.start && mm < w.end
	}
	return mm >= w.start || mm < w.end
}

// untilEnd is how long the wall clock of t (in its location), running without a jump,
// takes to show w's end: in (0, 24h] (24h when it shows it now).
func (w window) untilEnd(t time.Time) time.Duration {
	h, m, s := t.Clock()
	of := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second +
		time.Duration(t.Nanosecond())
	d := time.Duration(w.end)*time.Minute - of
	if d <= 0 {
		d += 24 * time.Hour
	}
	return d
}

// clockMinutes returns the minutes since midnight of "HH:MM" (00:00..23:59).
func clockMinutes(s string) (int, bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	for _, i := range []int{0, 1, 3, 4} {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	h, m := int(s[0]-'0')*10+int(s[1]-'0'), int(s[3]-'0')*10+int(s[4]-'0')
	if h > 23 || m > 59 {
		return 0, false
	}
	return h*60 + m, true
}

// Zone returns the IANA zone name a recipient's quiet hours are read in: own (their
// preferences' timezone) when set, else profile (their channel profile's), else tenant
// (the tenant's default preferences'); "" when none is set.
func Zone(own, profile, tenant string) string {
	switch {
	case own != "":
		return own
	case profile != "":
		return profile
	}
	return tenant
}

// QuietUntil returns when a delivery that quiet hours hold back, asked for at now, may
// go out: the end of the window q in zone (QuietWindowEnd) when now lies inside it. It
// returns the zero time, meaning at once, when q is nil, now is outside the window, or
// zone is "" or not a name time.LoadLocation knows (without a zone there are no quiet
// hours; an unknown one is not guessed at).
func QuietUntil(now time.Time, q *inbox.QuietHours, zone string) time.Time {
	if q == nil || zone == "" {
		return time.Time{}
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return time.Time{}
	}
	end, quiet := QuietWindowEnd(now, *q, loc)
	if !quiet {
		return time.Time{}
	}
	return end
}
