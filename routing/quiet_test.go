package routing_test

import (
	"fmt"
	"testing"
	"time"
	_ "time/tzdata" // as package main: zones do not depend on the host

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// mustLoc loads zone or fails the test.
func mustLoc(t testing.TB, zone string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// instant parses an RFC 3339 time (its offset says which pass of a repeated hour it is).
func instant(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The window's end across both daylight-saving transitions of zones west and east of
// UTC, in both hemispheres, with a 30-minute shift (Lord Howe), at midnight (Santiago)
// and over a skipped day (Apia, 2011): the end is the first instant after now whose
// wall clock lies outside the window. In a spring-forward gap that is the jump; in a
// fall-back hour, the pass of the end that follows now; when the clock falls back out
// of the window before reaching its end (a start inside the repeated hour), the fall.
// want "" means now is outside the window.
func TestQuietWindowEndAcrossDST(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, zone, start, end, now, want string
	}{
		// America/New_York 2025: 02:00 EST -> 03:00 EDT on 9 March, 02:00 EDT -> 01:00 EST on 2 November.
		{"NY end in the gap", "America/New_York", "22:00", "02:30", "2025-03-09T01:45:00-05:00", "2025-03-09T03:00:00-04:00"},
		{"NY end in the gap, now the evening before", "America/New_York", "22:00", "02:30", "2025-03-08T23:00:00-05:00", "2025-03-09T03:00:00-04:00"},
		{"NY end in the gap, last second before the jump", "America/New_York", "22:00", "02:30", "2025-03-09T01:59:59.999-05:00", "2025-03-09T03:00:00-04:00"},
		{"NY end at the jump", "America/New_York", "22:00", "03:00", "2025-03-09T01:30:00-05:00", "2025-03-09T03:00:00-04:00"},
		{"NY end after the jump", "America/New_York", "22:00", "07:00", "2025-03-09T01:30:00-05:00", "2025-03-09T07:00:00-04:00"},
		{"NY start in the gap, before", "America/New_York", "02:30", "06:00", "2025-03-09T01:59:00-05:00", ""},
		{"NY start in the gap, after the jump", "America/New_York", "02:30", "06:00", "2025-03-09T03:00:00-04:00", "2025-03-09T06:00:00-04:00"},
		{"NY window inside the gap never holds", "America/New_York", "02:00", "02:30", "2025-03-09T03:10:00-04:00", ""},
		{"NY end in the repeated hour, first pass", "America/New_York", "01:00", "01:30", "2025-11-02T01:10:00-04:00", "2025-11-02T01:30:00-04:00"},
		{"NY end in the repeated hour, second pass", "America/New_York", "01:00", "01:30", "2025-11-02T01:10:00-05:00", "2025-11-02T01:30:00-05:00"},
		{"NY midnight window, second pass", "America/New_York", "22:00", "01:30", "2025-11-02T01:20:00-05:00", "2025-11-02T01:30:00-05:00"},
		{"NY midnight window, between the passes", "America/New_York", "22:00", "01:30", "2025-11-02T01:45:00-04:00", ""},
		{"NY midnight window, the evening before", "America/New_York", "22:00", "01:30", "2025-11-01T23:00:00-04:00", "2025-11-02T01:30:00-04:00"},
		{"NY start in the repeated hour: the fall leaves the window", "America/New_York", "01:30", "03:00", "2025-11-02T01:45:00-04:00", "2025-11-02T01:00:00-05:00"},
		{"NY start in the repeated hour, second pass", "America/New_York", "01:30", "03:00", "2025-11-02T01:45:00-05:00", "2025-11-02T03:00:00-05:00"},
		{"NY night over the fall", "America/New_York", "23:00", "07:00", "2025-11-01T23:30:00-04:00", "2025-11-02T07:00:00-05:00"},
		// Europe/Berlin 2025: 02:00 CET -> 03:00 CEST on 30 March, 03:00 CEST -> 02:00 CET on 26 October.
		{"Berlin end in the gap", "Europe/Berlin", "23:00", "02:30", "2025-03-30T01:50:00+01:00", "2025-03-30T03:00:00+02:00"},
		{"Berlin end in the gap, the evening before", "Europe/Berlin", "23:00", "02:30", "2025-03-29T23:00:00+01:00", "2025-03-30T03:00:00+02:00"},
		{"Berlin end in the repeated hour, first pass", "Europe/Berlin", "02:00", "02:45", "2025-10-26T02:15:00+02:00", "2025-10-26T02:45:00+02:00"},
		{"Berlin end in the repeated hour, second pass", "Europe/Berlin", "02:00", "02:45", "2025-10-26T02:15:00+01:00", "2025-10-26T02:45:00+01:00"},
		{"Berlin night over the fall", "Europe/Berlin", "22:00", "06:30", "2025-10-25T22:00:00+02:00", "2025-10-26T06:30:00+01:00"},
		// Australia/Sydney 2025: 03:00 AEDT -> 02:00 AEST on 6 April, 02:00 AEST -> 03:00 AEDT on 5 October.
		{"Sydney end in the repeated hour, first pass", "Australia/Sydney", "22:00", "02:30", "2025-04-06T02:10:00+11:00", "2025-04-06T02:30:00+11:00"},
		{"Sydney end in the repeated hour, second pass", "Australia/Sydney", "22:00", "02:30", "2025-04-06T02:10:00+10:00", "2025-04-06T02:30:00+10:00"},
		{"Sydney end in the gap", "Australia/Sydney", "22:00", "02:30", "2025-10-05T01:40:00+10:00", "2025-10-05T03:00:00+11:00"},
		// Australia/Lord_Howe 2025: a 30-minute shift, 02:00 -> 01:30 on 6 April, 02:00 -> 02:30 on 5 October.
		{"Lord Howe end in the repeated half hour, first pass", "Australia/Lord_Howe", "01:00", "01:45", "2025-04-06T01:40:00+11:00", "2025-04-06T01:45:00+11:00"},
		{"Lord Howe end in the repeated half hour, second pass", "Australia/Lord_Howe", "01:00", "01:45", "2025-04-06T01:40:00+10:30", "2025-04-06T01:45:00+10:30"},
		{"Lord Howe end in the half-hour gap", "Australia/Lord_Howe", "22:00", "02:15", "2025-10-05T01:50:00+10:30", "2025-10-05T02:30:00+11:00"},
		// America/Santiago 2025: transitions at midnight, 24:00 -> 23:00 on 5 April, 24:00 -> 01:00 on 7 September.
		{"Santiago repeated hour before midnight, second pass", "America/Santiago", "22:00", "23:30", "2025-04-05T23:10:00-04:00", "2025-04-05T23:30:00-04:00"},
		{"Santiago midnight window over the fall", "America/Santiago", "22:00", "06:00", "2025-04-05T23:10:00-03:00", "2025-04-06T06:00:00-04:00"},
		{"Santiago midnight window, end in the gap", "America/Santiago", "22:00", "00:30", "2025-09-06T23:30:00-04:00", "2025-09-07T01:00:00-03:00"},
		{"Santiago start in the gap", "America/Santiago", "00:00", "06:00", "2025-09-07T01:00:00-03:00", "2025-09-07T06:00:00-03:00"},
		// Pacific/Apia skipped 30 December 2011 (-10 -> +14).
		{"Apia over the skipped day", "Pacific/Apia", "22:00", "07:00", "2011-12-29T23:00:00-10:00", "2011-12-31T07:00:00+14:00"},
		{"Apia end on the skipped day", "Pacific/Apia", "22:00", "23:59", "2011-12-29T23:30:00-10:00", "2011-12-29T23:59:00-10:00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := instant(t, c.now)
			got, quiet := routing.QuietWindowEnd(now, inbox.QuietHours{Start: c.start, End: c.end}, mustLoc(t, c.zone))
			switch {
			case c.want == "" && quiet:
				t.Fatalf("%s-%s at %s: quiet until %s, want not quiet", c.start, c.end, c.now, got.Format(time.RFC3339))
			case c.want == "":
			case !quiet:
				t.Fatalf("%s-%s at %s: not quiet, want until %s", c.start, c.end, c.now, c.want)
			case !got.After(now):
				t.Fatalf("%s-%s at %s: ends at %s, not after now", c.start, c.end, c.now, got.Format(time.RFC3339))
			case !got.Equal(instant(t, c.want)):
				t.Fatalf("%s-%s at %s: ends at %s, want %s", c.start, c.end, c.now, got.Format(time.RFC3339), c.want)
			}
		})
	}
}

// The window on days without a transition: bounds (start inside, end outside, to the
// nanosecond), windows within a day and past midnight, and windows that are no window.
func TestQuietWindowEndBounds(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"UTC", "Europe/Berlin", "Asia/Kathmandu", "America/St_Johns"} {
		loc := mustLoc(t, zone)
		at := func(day, h, m, s, ns int) time.Time { return time.Date(2025, 6, day, h, m, s, ns, loc) }
		for _, c := range []struct {
			start, end string
			now, want  time.Time // want zero: not quiet
		}{
			{"22:00", "07:00", at(10, 22, 0, 0, 0), at(11, 7, 0, 0, 0)},
			{"22:00", "07:00", at(10, 21, 59, 59, 999999999), time.Time{}},
			{"22:00", "07:00", at(10, 23, 59, 59, 0), at(11, 7, 0, 0, 0)},
			{"22:00", "07:00", at(11, 0, 0, 0, 0), at(11, 7, 0, 0, 0)},
			{"22:00", "07:00", at(11, 6, 59, 59, 999999999), at(11, 7, 0, 0, 0)},
			{"22:00", "07:00", at(11, 7, 0, 0, 0), time.Time{}},
			{"22:00", "07:00", at(11, 12, 0, 0, 0), time.Time{}},
			{"09:00", "17:00", at(10, 9, 0, 0, 0), at(10, 17, 0, 0, 0)},
			{"09:00", "17:00", at(10, 16, 59, 30, 0), at(10, 17, 0, 0, 0)},
			{"09:00", "17:00", at(10, 17, 0, 0, 0), time.Time{}},
			{"09:00", "17:00", at(10, 8, 59, 0, 0), time.Time{}},
			{"00:00", "23:59", at(10, 0, 0, 0, 0), at(10, 23, 59, 0, 0)},
			{"00:00", "23:59", at(10, 23, 59, 0, 0), time.Time{}},
			{"23:59", "00:00", at(10, 23, 59, 1, 0), at(11, 0, 0, 0, 0)},
			{"00:01", "00:00", at(10, 0, 2, 0, 0), at(11, 0, 0, 0, 0)},
			{"12:00", "12:00", at(10, 12, 0, 0, 0), time.Time{}},
			{"24:00", "07:00", at(10, 23, 0, 0, 0), time.Time{}},
			{"22:00", "7:00", at(10, 23, 0, 0, 0), time.Time{}},
			{"22:00", "07:60", at(10, 23, 0, 0, 0), time.Time{}},
			{"2a:00", "07:00", at(10, 23, 0, 0, 0), time.Time{}},
			{"", "07:00", at(10, 23, 0, 0, 0), time.Time{}},
		} {
			got, quiet := routing.QuietWindowEnd(c.now, inbox.QuietHours{Start: c.start, End: c.end}, loc)
			if quiet != !c.want.IsZero() || !got.Equal(c.want) {
				t.Errorf("%s %s-%s at %s: %s, %v; want %s", zone, c.start, c.end, c.now.Format(time.RFC3339Nano), got, quiet, c.want)
			}
		}
	}
}

// The zone of quiet hours: the user's own, else their profile's, else the tenant's;
// without one, or with a zone the host does not know, there are no quiet hours (the
// delivery goes at once); nor without a window or outside it.
func TestQuietUntilZones(t *testing.T) {
	t.Parallel()
	q := &inbox.QuietHours{Start: "22:00", End: "07:00"}
	// 23:30 in Berlin (CEST), 17:30 in New York (EDT).
	now := instant(t, "2025-06-10T21:30:00Z")
	berlinEnd := instant(t, "2025-06-11T07:00:00+02:00")
	for _, c := range []struct {
		own, profile, tenant string
		q                    *inbox.QuietHours
		want                 time.Time
	}{
		{"Europe/Berlin", "America/New_York", "America/New_York", q, berlinEnd},
		{"", "Europe/Berlin", "America/New_York", q, berlinEnd},
		{"", "", "Europe/Berlin", q, berlinEnd},
		{"America/New_York", "Europe/Berlin", "Europe/Berlin", q, time.Time{}},
		{"", "", "", q, time.Time{}},
		{"Mars/Olympus_Mons", "Europe/Berlin", "Europe/Berlin", q, time.Time{}},
		{"", "not a zone", "Europe/Berlin", q, time.Time{}},
		{"Europe/Berlin", "", "", nil, time.Time{}},
		{"Europe/Berlin", "", "", &inbox.QuietHours{Start: "22:00", End: "22:00"}, time.Time{}},
	} {
		zone := routing.Zone(c.own, c.profile, c.tenant)
		if got := routing.QuietUntil(now, c.q, zone); !got.Equal(c.want) {
			t.Errorf("own %q, profile %q, tenant %q (zone %q), %+v: %s, want %s", c.own, c.profile, c.tenant, zone, c.q, got, c.want)
		}
	}
}

// transitions returns the zone transitions of loc in year.
func transitions(loc *time.Location, year int) []time.Time {
	var out []time.Time
	t := time.Date(year, 1, 1, 0, 0, 0, 0, loc)
	for {
		_, next := t.ZoneBounds()
		if next.IsZero() || next.Year() > year {
			return out
		}
		out = append(out, next)
		t = next
	}
}

// Every minute from a day before to a day after each transition of several zones, for
// windows whose bounds sit before, inside and after the jumps: the answer equals a
// brute-force scan of the wall clock, minute by minute (these zones' offsets are whole
// minutes, so whether an instant is quiet changes only on a minute of UTC): now is quiet
// exactly when its wall clock is inside the window, and the end is the first instant
// after now outside it; so the end is after now and [now, end) lies in the window.
func TestQuietWindowEndEveryMinuteOfDSTDays(t *testing.T) {
	t.Parallel()
	clocks := []string{"00:00", "00:30", "01:00", "01:30", "02:00", "02:30", "03:00", "22:00", "23:30"}
	for _, z := range []struct {
		zone string
		year int
	}{
		{"America/New_York", 2025}, {"Europe/Berlin", 2025}, {"Australia/Sydney", 2025},
		{"Australia/Lord_Howe", 2025}, {"America/Santiago", 2025}, {"America/Havana", 2025},
		{"Pacific/Apia", 2011},
	} {
		loc := mustLoc(t, z.zone)
		trs := transitions(loc, z.year)
		if len(trs) < 2 {
			t.Fatalf("%s has %d transitions in %d", z.zone, len(trs), z.year)
		}
		for _, tr := range trs {
			t.Run(fmt.Sprintf("%s/%s", z.zone, tr.UTC().Format(time.RFC3339)), func(t *testing.T) {
				t.Parallel()
				lo := tr.Add(-26 * time.Hour).Truncate(time.Minute)
				const span = 52 * 60      // minutes of nows
				const scan = span + 50*60 // and of the scan for their ends (a window is under a day, a skipped day adds one)
				for _, start := range clocks {
					for _, end := range clocks {
						if start == end {
							continue
						}
						checkEveryMinute(t, loc, lo, span, scan, start, end)
					}
				}
			})
		}
	}
}

// checkEveryMinute checks QuietWindowEnd against a brute-force scan for the nows of span
// minutes from lo (at the minute and 30.5 s into it), window start-end, in loc.
func checkEveryMinute(t *testing.T, loc *time.Location, lo time.Time, span, scan int, start, end string) {
	t.Helper()
	s, e := clock(start), clock(end)
	inside := func(m int) bool {
		if s < e {
			return m >= s && m < e
		}
		return m >= s || m < e
	}
	quiet := make([]bool, scan)
	for k := range quiet {
		h, m, _ := lo.Add(time.Duration(k) * time.Minute).In(loc).Clock()
		quiet[k] = inside(h*60 + m)
	}
	// next[k] is the first minute after k that is not quiet (scan when none is).
	next := make([]int, scan)
	next[scan-1] = scan
	for k := scan - 2; k >= 0; k-- {
		if !quiet[k+1] {
			next[k] = k + 1
		} else {
			next[k] = next[k+1]
		}
	}
	q := inbox.QuietHours{Start: start, End: end}
	for k := range span {
		for _, into := range []time.Duration{0, 30*time.Second + 500*time.Millisecond} {
			now := lo.Add(time.Duration(k)*time.Minute + into)
			got, isQuiet := routing.QuietWindowEnd(now, q, loc)
			if isQuiet != quiet[k] {
				t.Fatalf("%s-%s at %s: quiet %v, want %v", start, end, now.In(loc).Format(time.RFC3339Nano), isQuiet, quiet[k])
			}
			if !isQuiet {
				continue
			}
			if next[k] == scan {
				t.Fatalf("%s-%s at %s: the scan found no end", start, end, now.In(loc).Format(time.RFC3339))
			}
			want := lo.Add(time.Duration(next[k]) * time.Minute)
			if !got.After(now) || !got.Equal(want) {
				t.Fatalf("%s-%s at %s: ends at %s, want %s", start, end, now.In(loc).Format(time.RFC3339Nano),
					got.In(loc).Format(time.RFC3339), want.In(loc).Format(time.RFC3339))
			}
		}
	}
}

// clock returns the minutes since midnight of a well-formed "HH:MM".
func clock(s string) int {
	return int(s[0]-'0')*600 + int(s[1]-'0')*60 + int(s[3]-'0')*10 + int(s[4]-'0')
}
