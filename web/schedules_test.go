package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// TestSchedulesPage: the schedules page lists a queue's schedules, pages by name, and pauses,
// resumes, triggers and deletes one; read-only mode shows no buttons and refuses the actions.
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{PageSize: 2})
	q := b.queue("")
	name := q.Name()
	for _, s := range []string{"alpha", "beta", "gamma"} {
		if _, err := q.Schedule(b.ctx, s, event{}, &srq.ScheduleOpts{Cron: "0 4 * * *", TimeZone: "America/Chicago",
			Publish: srq.PublishOpts{Partition: "acct", Ordered: true}}); err != nil {
			t.Fatal(err)
		}
	}
	page := b.mustGet("schedules?q=" + url.QueryEscape(name))
	for _, want := range []string{`data-schedule="alpha"`, `data-schedule="beta"`, "0 4 * * *", "America/Chicago", "!acct",
		`data-action="pause" data-schedule="alpha"`, `id="next-page"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, `data-schedule="gamma"`) {
		t.Error("the first page shows a third schedule with a page size of 2")
	}
	if page := b.mustGet("schedules?q=" + url.QueryEscape(name) + "&after=beta"); !strings.Contains(page, `data-schedule="gamma"`) {
		t.Errorf("second page:\n%s", page)
	}

	page = b.follow("pause-schedule", b.post("pause-schedule", url.Values{"q": {name}, "schedule": {"alpha"}}))
	if !strings.Contains(page, "Paused schedule alpha") || !strings.Contains(page, `data-action="resume" data-schedule="alpha"`) {
		t.Errorf("after pause:\n%s", page)
	}
	if in, err := q.GetSchedule(b.ctx, "alpha"); err != nil || !in.Paused {
		t.Errorf("alpha: %+v %v", in, err)
	}
	page = b.follow("resume-schedule", b.post("resume-schedule", url.Values{"q": {name}, "schedule": {"alpha"}}))
	if !strings.Contains(page, "Resumed schedule alpha") {
		t.Errorf("after resume:\n%s", page)
	}
	page = b.follow("trigger-schedule", b.post("trigger-schedule", url.Values{"q": {name}, "schedule": {"beta"}}))
	if !strings.Contains(page, "Triggered schedule beta: published sched/beta/now-") {
		t.Errorf("after trigger:\n%s", page)
	}
	if st := b.stats(name); st.Pending != 1 {
		t.Errorf("pending %d after a trigger, want 1", st.Pending)
	}
	b.follow("delete-schedule", b.post("delete-schedule", url.Values{"q": {name}, "schedule": {"beta"}}))
	if _, err := q.GetSchedule(b.ctx, "beta"); err == nil {
		t.Error("beta still exists after delete")
	}
	for _, form := range []url.Values{{"q": {name}}, {"q": {name}, "schedule": {"nope"}}} {
		if r := b.post("pause-schedule", form); r.status != http.StatusBadRequest && r.status != http.StatusNotFound {
			t.Errorf("pause %v: %d, want 400 or 404", form, r.status)
		}
	}
	if !strings.Contains(b.logs.String(), "schedule=beta") {
		t.Errorf("schedule mutations are not logged:\n%s", b.logs.String())
	}

	ro := setup(t, Config{ReadOnly: true})
	rq := ro.queue("")
	if _, err := rq.Schedule(ro.ctx, "s", event{}, &srq.ScheduleOpts{Every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	page = ro.mustGet("schedules?q=" + url.QueryEscape(rq.Name()))
	if !strings.Contains(page, `data-schedule="s"`) || strings.Contains(page, "pause-schedule") {
		t.Errorf("read-only page:\n%s", page)
	}
	if r := ro.post("trigger-schedule", url.Values{"q": {rq.Name()}, "schedule": {"s"}}); r.status != http.StatusForbidden {
		t.Errorf("read-only trigger: %d, want 403", r.status)
	}
}

// TestOverdueSchedulePage: a schedule whose next tick is more than its grace in the past (every
// worker stopped) is flagged overdue on the schedules page, with a note that says what it means,
// and counted by the srq_queue_schedules_overdue gauge; a schedule on time is not.
func TestOverdueSchedulePage(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	for _, s := range []string{"fine", "stopped"} {
		if _, err := q.Schedule(b.ctx, s, event{}, &srq.ScheduleOpts{Every: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	b.backdateSchedule(q, "stopped", 14*time.Minute+31*time.Second)
	page := b.mustGet("schedules?q=" + url.QueryEscape(q.Name()))
	row := func(name string) string {
		i := strings.Index(page, `<tr data-schedule="`+name+`">`)
		if i < 0 {
			t.Fatalf("no row for %s:\n%s", name, page)
		}
		j := strings.Index(page[i:], "</tr>")
		return page[i : i+j]
	}
	if r := row("stopped"); !strings.Contains(r, `data-overdue="1"`) || !strings.Contains(r, "14m3") {
		t.Errorf("the overdue schedule's row:\n%s", r)
	}
	if r := row("fine"); strings.Contains(r, "overdue") {
		t.Errorf("the schedule on time is flagged:\n%s", r)
	}
	if !strings.Contains(page, `id="overdue-note"`) {
		t.Errorf("no note explains overdue:\n%s", page)
	}
	_, samples := scrape(t, b.metrics())
	if v := value(samples["srq_queue_schedules_overdue"], q.Name()); v != 1 {
		t.Errorf("srq_queue_schedules_overdue = %v, want 1", v)
	}
}

// backdateSchedule makes schedule name of q look as if every process that fires it stopped ago
// before now, before its next tick: its record and the due index name that tick.
func (b *bundle) backdateSchedule(q *srq.Queue[event], name string, ago time.Duration) {
	b.t.Helper()
	now, err := b.client.Time(b.ctx).Result()
	if err != nil {
		b.t.Fatal(err)
	}
	keys, err := engine.NewKeys(b.prefix, q.Name())
	if err != nil {
		b.t.Fatal(err)
	}
	ms := now.Add(-ago).UnixMilli()
	pipe := b.client.TxPipeline()
	pipe.HSet(b.ctx, keys.Schedule(name), "n", ms)
	pipe.ZAdd(b.ctx, keys.SchedulesDue(), redis.Z{Score: float64(ms), Member: name})
	if _, err := pipe.Exec(b.ctx); err != nil {
		b.t.Fatal(err)
	}
}
