package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

func mustTiming(t *testing.T, def ScheduleTiming) timing {
	t.Helper()
	tm, err := parseTiming(&def)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// ticks returns the first n ticks after from, in loc, formatted.
func ticks(tm timing, from time.Time, n int, loc *time.Location) []string {
	var out []string
	ms := from.UnixMilli()
	for range n {
		ms = tm.next(ms)
		out = append(out, time.UnixMilli(ms).In(loc).Format("2006-01-02 15:04:05 MST"))
	}
	return out
}

// TestTimingAcrossDST pins what a cron expression does in a zone with daylight saving time (the
// robfig/cron semantics docs/schedules.md states): a wall time the spring change skips has no tick
// that day; one the autumn change repeats ticks at both instants. Every tick is a distinct
// instant, so each gets one id and is published once.
func TestTimingAcrossDST(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no tz database:", err)
	}
	cases := []struct {
		name, cron string
		from       time.Time
		want       []string
	}{
		{"spring forward, skipped wall time", "30 2 * * *", time.Date(2026, 3, 6, 12, 0, 0, 0, ny), []string{
			"2026-03-07 02:30:00 EST", "2026-03-09 02:30:00 EDT", "2026-03-10 02:30:00 EDT"}},
		{"spring forward, hourly", "0 * * * *", time.Date(2026, 3, 8, 0, 30, 0, 0, ny), []string{
			"2026-03-08 01:00:00 EST", "2026-03-08 03:00:00 EDT", "2026-03-08 04:00:00 EDT"}},
		{"fall back, repeated wall time", "30 1 * * *", time.Date(2026, 10, 31, 12, 0, 0, 0, ny), []string{
			"2026-11-01 01:30:00 EDT", "2026-11-01 01:30:00 EST", "2026-11-02 01:30:00 EST"}},
		{"fall back, every 30 minutes", "0,30 * * * *", time.Date(2026, 11, 1, 0, 45, 0, 0, ny), []string{
			"2026-11-01 01:00:00 EDT", "2026-11-01 01:30:00 EDT", "2026-11-01 01:00:00 EST", "2026-11-01 01:30:00 EST",
			"2026-11-01 02:00:00 EST"}},
		{"noon is noon in both seasons", "0 12 * * *", time.Date(2026, 3, 7, 13, 0, 0, 0, ny), []string{
			"2026-03-08 12:00:00 EDT", "2026-03-09 12:00:00 EDT"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm := mustTiming(t, ScheduleTiming{Cron: c.cron, TimeZone: "America/New_York"})
			got := ticks(tm, c.from, len(c.want), ny)
			if !slices.Equal(got, c.want) {
				t.Errorf("ticks of %q after %v:\n got  %q\n want %q", c.cron, c.from, got, c.want)
			}
		})
	}
	// The same expression in UTC and in Berlin are different instants.
	utc := mustTiming(t, ScheduleTiming{Cron: "0 9 * * *"})
	berlin := mustTiming(t, ScheduleTiming{Cron: "0 9 * * *", TimeZone: "Europe/Berlin"})
	from := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	if d := utc.next(from) - berlin.next(from); d != (2 * time.Hour).Milliseconds() {
		t.Errorf("09:00 UTC - 09:00 CEST = %d ms, want 2h", d)
	}
}

func TestTimingNext(t *testing.T) {
	t.Parallel()
	at := func(s string) int64 {
		tt, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tt.UnixMilli()
	}
	cases := []struct {
		def  ScheduleTiming
		from string
		want string
	}{
		{ScheduleTiming{Every: time.Second}, "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01Z"},
		{ScheduleTiming{Every: time.Second}, "2026-01-01T00:00:00.999Z", "2026-01-01T00:00:01Z"},
		{ScheduleTiming{Every: time.Hour}, "2026-01-01T10:20:00Z", "2026-01-01T11:00:00Z"},
		{ScheduleTiming{Cron: "@every 90s"}, "2026-01-01T00:00:00Z", "2026-01-01T00:01:30Z"},
		{ScheduleTiming{Cron: "*/5 * * * *"}, "2026-01-01T00:03:00Z", "2026-01-01T00:05:00Z"},
		{ScheduleTiming{Cron: "*/5 * * * *"}, "2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z"},
		{ScheduleTiming{Cron: "*/10 * * * * *"}, "2026-01-01T00:00:00.5Z", "2026-01-01T00:00:10Z"},
		{ScheduleTiming{Cron: "@daily"}, "2026-01-01T10:00:00Z", "2026-01-02T00:00:00Z"},
		{ScheduleTiming{Cron: "0 0 29 2 *"}, "2026-01-01T00:00:00Z", "2028-02-29T00:00:00Z"},
	}
	for _, c := range cases {
		tm := mustTiming(t, c.def)
		if got := tm.next(at(c.from)); got != at(c.want) {
			t.Errorf("%+v after %s: %s, want %s", c.def, c.from, time.UnixMilli(got).UTC().Format(time.RFC3339Nano), c.want)
		}
	}
}

func TestTimingInvalid(t *testing.T) {
	t.Parallel()
	cases := []struct {
		def  ScheduleTiming
		want string
	}{
		{ScheduleTiming{}, "needs Cron or Every"},
		{ScheduleTiming{Cron: "* * * * *", Every: time.Minute}, "both"},
		{ScheduleTiming{Cron: "@every 1m", Every: time.Minute}, "both"},
		{ScheduleTiming{Cron: "not a cron"}, "cron"},
		{ScheduleTiming{Cron: "61 * * * *"}, "cron"},
		{ScheduleTiming{Cron: "0 0 30 2 *"}, "never fires"},
		{ScheduleTiming{Cron: "* * * * *", TimeZone: "Mars/Olympus_Mons"}, "time zone"},
		{ScheduleTiming{Cron: "TZ=Europe/Berlin * * * * *"}, "set TimeZone"},
		{ScheduleTiming{Every: 999 * time.Millisecond}, "below the minimum"},
		{ScheduleTiming{Cron: "@every 500ms"}, "below the minimum"},
		{ScheduleTiming{Every: 1500 * time.Microsecond * 1000}, ""},
		{ScheduleTiming{Every: time.Second + time.Microsecond}, "milliseconds"},
		{ScheduleTiming{Every: time.Minute, TimeZone: "UTC"}, "TimeZone is for Cron"},
	}
	for _, c := range cases {
		_, err := parseTiming(&c.def)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.def, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: error %v, want one saying %q", c.def, err, c.want)
		}
	}
}

// TestTimingDue is the table of what one firing publishes: ticks due since first, up to now.
func TestTimingDue(t *testing.T) {
	t.Parallel()
	sec := time.Second.Milliseconds()
	base := int64(1_800_000_000_000) // a whole second
	every := mustTiming(t, ScheduleTiming{Every: time.Second})
	cronSec := mustTiming(t, ScheduleTiming{Cron: "* * * * * *"})
	daily := mustTiming(t, ScheduleTiming{Cron: "0 3 * * *"})
	day := (24 * time.Hour).Milliseconds()
	first3am := daily.next(base)
	cases := []struct {
		name     string
		tm       timing
		first    int64
		now      int64
		grace    int64
		catchUp  int
		fire     []int64
		missed   int64
		nextWant int64
	}{
		{"on time", every, base, base + 5, 60 * sec, 0, []int64{base}, 0, base + sec},
		{"late within grace", every, base, base + 900, 60 * sec, 0, []int64{base}, 0, base + sec},
		{"outage: skip", every, base, base + 10*sec + 300, 60 * sec, 0, []int64{base + 10*sec}, 10, base + 11*sec},
		{"outage: catch up 3", every, base, base + 10*sec + 300, 60 * sec, 3,
			[]int64{base + 7*sec, base + 8*sec, base + 9*sec, base + 10*sec}, 7, base + 11*sec},
		{"outage: catch up more than missed", every, base, base + 2*sec, 60 * sec, 10,
			[]int64{base, base + sec, base + 2*sec}, 0, base + 3*sec},
		{"cron outage: skip", cronSec, base, base + 10*sec + 300, 60 * sec, 0, []int64{base + 10*sec}, 10, base + 11*sec},
		{"cron outage: catch up 2", cronSec, base, base + 10*sec, 60 * sec, 2,
			[]int64{base + 8*sec, base + 9*sec, base + 10*sec}, 8, base + 11*sec},
		{"past grace: skip", daily, first3am, first3am + 2*60*sec, 60 * sec, 0, nil, 1, first3am + day},
		{"past grace: catch up", daily, first3am, first3am + 2*60*sec, 60 * sec, 1, []int64{first3am}, 0, first3am + day},
		{"days down: catch up 2", daily, first3am, first3am + 5*day + 30*sec, 60 * sec, 2,
			[]int64{first3am + 3*day, first3am + 4*day, first3am + 5*day}, 3, first3am + 6*day},
		{"long outage of a per-second cron", cronSec, base, base + (maxTickScan+5000)*sec, 60 * sec, 1,
			[]int64{base + (maxTickScan+4999)*sec, base + (maxTickScan+5000)*sec}, maxTickScan + 4999, base + (maxTickScan+5001)*sec},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.tm.due(c.first, c.now, c.grace, c.catchUp)
			if !slices.Equal(d.fire, c.fire) || d.next != c.nextWant {
				t.Errorf("fire %v next %d, want %v next %d", d.fire, d.next, c.fire, c.nextWant)
			}
			// Past maxTickScan ticks the count is a lower bound.
			if d.missed != c.missed && !(c.missed >= maxTickScan && d.missed >= maxTickScan && d.missed <= c.missed) {
				t.Errorf("missed %d, want %d", d.missed, c.missed)
			}
		})
	}
}

func TestJitterIsStableAndBounded(t *testing.T) {
	t.Parallel()
	seen := map[int64]bool{}
	for tick := int64(0); tick < 1000; tick++ {
		j := jitter("report", tick*1000, 10*time.Second)
		if j < 0 || j >= 10_000 {
			t.Fatalf("jitter %d outside [0, 10s)", j)
		}
		if j != jitter("report", tick*1000, 10*time.Second) {
			t.Fatal("jitter differs between calls")
		}
		seen[j] = true
	}
	if len(seen) < 500 {
		t.Errorf("jitter took %d values over 1000 ticks: not spread", len(seen))
	}
	if jitter("x", 5, 0) != 0 {
		t.Error("jitter without a maximum is not 0")
	}
}

func TestScheduleNames(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"daily-report", "Ünïcode name", strings.Repeat("x", MaxScheduleNameLen)} {
		if err := validScheduleName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/b", "tab\there", "\xff", strings.Repeat("x", MaxScheduleNameLen+1)} {
		if err := validScheduleName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if id := TickID("daily", time.UnixMilli(1234)); id != "sched/daily/1234" {
		t.Errorf("TickID = %q", id)
	}
	if !errors.Is(ErrScheduleNotFound, ErrNotFound) {
		t.Error("ErrScheduleNotFound does not match ErrNotFound")
	}
}

// TestScheduleKeysDistinct: the schedule keys differ from each other and from every other kind of
// key of the queue, whatever the name (docs/data-model.md, sections 7 and 14).
func TestScheduleKeysDistinct(t *testing.T) {
	t.Parallel()
	k, err := NewKeys("srq", "q")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"", "ons", "ondue", "x", ":", "cr:", "t:x", "due"}
	seen := map[string]string{k.Schedules(): "crons", k.SchedulesDue(): "crondue"}
	for _, s := range k.fixedKeys() {
		seen[s] = "fixed"
	}
	for _, n := range names {
		for kind, key := range map[string]string{"schedule": k.Schedule(n), "task": k.Task(n), "meta": k.Meta(partition.Key(n)),
			"outcome": k.Outcome(n), "levels": k.Levels(partition.Key(n)), "held": k.Held(partition.Key(n)), "ratelimit": k.RateLimit(n)} {
			if other, ok := seen[key]; ok {
				t.Errorf("%s key of %q is %q, as a %s key", kind, n, key, other)
			}
			seen[key] = kind + " " + n
		}
	}
}

// FuzzScheduleTiming: whatever the expression, zone and interval, parsing does not panic, and a
// timing that parses ticks strictly later each time; one firing publishes ticks in order, none
// after now, at most CatchUp + 1, and its next tick is after now.
func FuzzScheduleTiming(f *testing.F) {
	f.Add("*/5 * * * *", "", int64(0), int64(1_800_000_000_000), int64(3_600_000), 2)
	f.Add("", "", int64(1000), int64(1_800_000_000_500), int64(10_500), 0)
	f.Add("0 30 2 * * *", "America/New_York", int64(0), int64(1_772_900_000_000), int64(90_000_000), 3)
	f.Add("@daily", "Asia/Kolkata", int64(0), int64(0), int64(1), 1)
	f.Fuzz(func(t *testing.T, cronSpec, zone string, everyMs, from, span int64, catchUp int) {
		tm, err := parseTiming(&ScheduleTiming{Cron: cronSpec, TimeZone: zone, Every: time.Duration(everyMs) * time.Millisecond})
		if err != nil {
			return
		}
		from = max(min(from, 4_000_000_000_000), 0)
		first := tm.next(from)
		if first == 0 {
			return
		}
		if first <= from {
			t.Fatalf("next(%d) = %d, not later", from, first)
		}
		now := first + max(min(span, 10*24*3600*1000), 0)
		catchUp = max(min(catchUp, 20), 0)
		d := tm.due(first, now, DefaultScheduleGrace.Milliseconds(), catchUp)
		if len(d.fire) > catchUp+1 || !slices.IsSorted(d.fire) || (d.next != 0 && d.next <= now) {
			t.Fatalf("due(%d, %d, catch up %d) = %+v", first, now, catchUp, d)
		}
		for i, x := range d.fire {
			if x < first || x > now || (i > 0 && x == d.fire[i-1]) {
				t.Fatalf("due(%d, %d) fires %d", first, now, x)
			}
		}
	})
}
