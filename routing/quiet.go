package routing

import (
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// QuietWindowEnd reports whether now lies in the daily window q in loc, and when that
// window ends (the first end time after now, in loc: a window past midnight ends the
// next day when now is before midnight).
func QuietWindowEnd(now time.Time, q inbox.QuietHours, loc *time.Location) (time.Time, bool) {
	start, okS := clockMinutes(q.Start)
	end, okE := clockMinutes(q.End)
	if !okS || !okE || start == end {
		return time.Time{}, false
	}
	l := now.In(loc)
	m := l.Hour()*60 + l.Minute()
	var quiet bool
	if start < end {
		quiet = m >= start && m < end
	} else {
		quiet = m >= start || m < end
	}
	if !quiet {
		return time.Time{}, false
	}
	day := l
	if m >= end {
		day = l.AddDate(0, 0, 1)
	}
	return time.Date(day.Year(), day.Month(), day.Day(), end/60, end%60, 0, 0, loc), true
}

// clockMinutes returns the minutes since midnight of "HH:MM".
func clockMinutes(s string) (int, bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	h, m := int(s[0]-'0')*10+int(s[1]-'0'), int(s[3]-'0')*10+int(s[4]-'0')
	if h < 0 || h > 23 || m < 0 || m > 59 {
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
