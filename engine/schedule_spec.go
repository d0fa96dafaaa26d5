package engine

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/robfig/cron/v3"
)

// Limits of a schedule.
const (
	// MaxScheduleNameLen is the longest schedule name, in bytes.
	MaxScheduleNameLen = 128
	// MinScheduleEvery is the shortest interval of a schedule: a cron expression with a seconds
	// field ticks at most once a second too.
	MinScheduleEvery = time.Second
	// MaxCatchUp is the most missed ticks a schedule may catch up after an outage.
	MaxCatchUp = 1000
	// DefaultScheduleGrace is how late a tick may be published and still count as on time, when
	// a schedule sets no Grace.
	DefaultScheduleGrace = time.Minute
	// MinScheduleGrace is the shortest Grace: a tick is published a little after its time, by
	// as much as a scheduler's polling takes.
	MinScheduleGrace = time.Second
	// maxTickScan is the most ticks one firing steps through one by one; past it, only the last
	// ones are looked for (lastTicks), and the count of missed ticks becomes a lower bound.
	maxTickScan = 100_000
)

// cronParser reads five fields (minute to day of week), six with seconds first, or a descriptor
// such as @daily.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month |
	cron.Dow | cron.Descriptor)

// timing is a schedule's parsed spec: when it ticks.
type timing struct {
	every int64         // ms between ticks of an interval schedule; 0 for cron
	cron  cron.Schedule // the cron schedule; nil for an interval
	loc   *time.Location
}

// parseTiming checks the timing fields of def and parses them. A cron "@every d" is read as the
// interval d. Errors do not wrap ErrInvalid; callers do.
func parseTiming(def *ScheduleTiming) (timing, error) {
	spec := strings.TrimSpace(def.Cron)
	every := def.Every
	if d, ok := strings.CutPrefix(spec, "@every "); ok {
		if every != 0 {
			return timing{}, fmt.Errorf("both Cron and Every are set")
		}
		var err error
		if every, err = time.ParseDuration(strings.TrimSpace(d)); err != nil {
			return timing{}, fmt.Errorf("cron %q: %w", def.Cron, err)
		}
		spec = ""
	}
	switch {
	case spec == "" && every == 0:
		return timing{}, fmt.Errorf("a schedule needs Cron or Every")
	case spec != "" && every != 0:
		return timing{}, fmt.Errorf("both Cron and Every are set")
	case every != 0 && every < MinScheduleEvery:
		return timing{}, fmt.Errorf("interval %v is below the minimum of %v", every, MinScheduleEvery)
	case every > MaxDelay:
		return timing{}, fmt.Errorf("interval %v is over the limit of %v", every, MaxDelay)
	case every%time.Millisecond != 0:
		return timing{}, fmt.Errorf("interval %v is not a whole number of milliseconds", every)
	case every != 0 && def.TimeZone != "":
		return timing{}, fmt.Errorf("TimeZone is for Cron; an interval schedule ticks at multiples of Every since the Unix epoch")
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return timing{}, fmt.Errorf("cron %q names a time zone; set TimeZone instead", def.Cron)
	}
	if every != 0 {
		return timing{every: every.Milliseconds(), loc: time.UTC}, nil
	}
	loc := time.UTC
	if def.TimeZone != "" {
		var err error
		if loc, err = time.LoadLocation(def.TimeZone); err != nil {
			return timing{}, fmt.Errorf("time zone %q: %w", def.TimeZone, err)
		}
	}
	sched, err := cronParser.Parse(spec)
	if err != nil {
		return timing{}, fmt.Errorf("cron %q: %w", def.Cron, err)
	}
	t := timing{cron: sched, loc: loc}
	if t.next(time.Now().UnixMilli()) == 0 {
		return timing{}, fmt.Errorf("cron %q never fires", def.Cron)
	}
	return t, nil
}

// next returns the first tick after ms (Unix ms), or 0 when there is none (a cron expression such
// as "0 0 30 2 *", which robfig/cron gives up on after five years).
func (t timing) next(ms int64) int64 {
	if t.every > 0 {
		return (floorDiv(ms, t.every) + 1) * t.every
	}
	n := t.cron.Next(time.UnixMilli(ms).In(t.loc))
	if n.IsZero() {
		return 0
	}
	return n.UnixMilli()
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// dueTicks is what one firing of a schedule does: the ticks to publish, oldest first, how many
// ticks it skips, and the next tick.
type dueTicks struct {
	fire   []int64
	missed int64
	next   int64
}

// due works out which of the ticks from first (a tick, not after now) up to now to publish: the
// last of them when it is at most grace old, and before it up to catchUp of the others, the latest
// ones; every other tick up to now is missed. next is the first tick after now (0: none). Its work
// is bounded: at most maxTickScan steps, then a search for the last ticks only.
func (t timing) due(first, now, grace int64, catchUp int) dueTicks {
	keep := catchUp + 1
	ring := make([]int64, 0, keep)
	push := func(x int64) {
		if len(ring) == keep {
			copy(ring, ring[1:])
			ring = ring[:keep-1]
		}
		ring = append(ring, x)
	}
	var count int64
	if t.every > 0 {
		// Arithmetic: the ticks are first + k·every.
		count = (now-first)/t.every + 1
		last := first + (count-1)*t.every
		for i := min(count, int64(keep)) - 1; i >= 0; i-- {
			push(last - i*t.every)
		}
	} else {
		x := first
		for x != 0 && x <= now && count < maxTickScan {
			push(x)
			count++
			x = t.next(x)
		}
		if x != 0 && x <= now {
			// Too many to step through: find the last ticks up to now by looking back from now
			// over a window that doubles until it holds keep ticks (or reaches x).
			tail, n := t.lastTicks(x, now, keep)
			for _, y := range tail {
				push(y)
			}
			count += n
		}
	}
	d := dueTicks{next: t.next(now)}
	if len(ring) == 0 {
		return d
	}
	last := ring[len(ring)-1]
	onTime := now-last <= grace
	missed := ring
	if onTime {
		missed = ring[:len(ring)-1]
		count--
	}
	d.missed = count
	if catchUp > 0 {
		from := max(len(missed)-catchUp, 0)
		d.fire = append(d.fire, missed[from:]...)
		d.missed -= int64(len(missed) - from)
	}
	if onTime {
		d.fire = append(d.fire, last)
	}
	return d
}

// lastTicks returns up to keep of the latest ticks in [from, now], oldest first, and how many
// ticks it saw (a lower bound of the ticks in [from, now] when it stopped before from).
func (t timing) lastTicks(from, now int64, keep int) ([]int64, int64) {
	for w := int64(time.Minute / time.Millisecond); ; w *= 2 {
		start := max(now-w, from-1)
		var got []int64
		var n int64
		for x := t.next(start); x != 0 && x <= now; x = t.next(x) {
			got = append(got, x)
			n++
			if len(got) > keep {
				got = got[1:]
			}
		}
		if len(got) >= keep || start < from {
			return got, n
		}
	}
}

// jitter returns the delay of tick of schedule name, in [0, max) ms: a hash of both, so every
// scheduler that publishes the tick gives it the same time.
func jitter(name string, tick int64, max time.Duration) int64 {
	ms := max.Milliseconds()
	if ms <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	_, _ = h.Write([]byte(strconv.FormatInt(tick, 10)))
	return int64(h.Sum64() % uint64(ms))
}

// TickID returns the id of the task (or flow) that schedule name publishes for its tick at time
// tick: "sched/<name>/<Unix ms>". Every scheduler derives the same id for a tick.
func TickID(name string, tick time.Time) string { return tickID(name, tick.UnixMilli()) }

func tickID(name string, ms int64) string {
	return "sched/" + name + "/" + strconv.FormatInt(ms, 10)
}

// validScheduleName checks a schedule name; the error does not wrap ErrInvalid.
func validScheduleName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty schedule name")
	case len(name) > MaxScheduleNameLen:
		return fmt.Errorf("schedule name is %d bytes, the limit is %d", len(name), MaxScheduleNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("schedule name %q is not valid UTF-8", name)
	case strings.ContainsRune(name, '/'):
		return fmt.Errorf("schedule name %q holds '/', which separates the parts of a tick's id", name)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("schedule name %q holds a control character", name)
	}
	return nil
}
