package web

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq"
)

// TestDebouncedTasksShown: a debounced task shows its mode and key next to the time left before it
// runs, in the delayed task list, its partition's list and its task page (key escaped); the queue
// page and the metrics count the replaced and dropped publishes.
func TestDebouncedTasksShown(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	q0 := q.Name()
	name := url.QueryEscape(q0)
	deb := &srq.PublishOpts{Partition: "doc", Debounce: &srq.Debounce{Key: "reindex<7>", Window: time.Hour}}
	res, err := q.Publish(b.ctx, event{}, deb)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := q.Publish(b.ctx, event{}, deb); err != nil || !again.Replaced {
		t.Fatalf("second publish: %+v, %v", again, err)
	}
	thr := &srq.PublishOpts{Partition: "acct", Debounce: &srq.Debounce{Key: "sync", Window: time.Hour, Mode: srq.Throttle}}
	for range 3 {
		if _, err := q.Publish(b.ctx, event{}, thr); err != nil {
			t.Fatal(err)
		}
	}
	// "in 59m59s" or "in 1h00m": an hour left, give or take the test's own time.
	runs := regexp.MustCompile(`<span class="badge debounced"[^>]*>debounce</span> <span class="debounce-key mono">reindex&lt;7&gt;</span>: runs in (59m|1h)`)
	if r := rowOf(t, b.mustGet("tasks?q="+name+"&state=delayed"), res.ID); !runs.MatchString(r) {
		t.Errorf("delayed list row:\n%s", r)
	}
	if r := rowOf(t, b.mustGet("partition?q="+name+"&p=doc&view=delayed"), res.ID); !runs.MatchString(r) {
		t.Errorf("partition list row:\n%s", r)
	}
	if page := b.mustGet("task?q=" + name + "&id=" + res.ID); !strings.Contains(page, `<dt>Debounce key</dt><dd class="mono" id="task-debounce">reindex&lt;7&gt;</dd>`) {
		t.Errorf("task page:\n%s", page)
	}
	// The scrape counts them as events of the queue.
	_, samples := scrape(t, b.metrics())
	for event, want := range map[string]float64{"replaced": 1, "dropped": 2} {
		got := -1.0
		for _, mt := range samples["srq_queue_events_total"].GetMetric() {
			var q, e string
			for _, l := range mt.GetLabel() {
				switch l.GetName() {
				case "messaging_destination_name":
					q = l.GetValue()
				case "srq_event":
					e = l.GetValue()
				}
			}
			if q == q0 && e == event {
				got = mt.GetCounter().GetValue()
			}
		}
		if got != want {
			t.Errorf("srq_queue_events_total{srq_event=%q}: %v, want %v", event, got, want)
		}
	}
	page := b.mustGet("queue?q=" + name)
	for _, want := range []string{`<tr><th>Debounced publishes that replaced a payload</th><td class="num">1</td></tr>`,
		`<tr><th>Throttled publishes dropped</th><td class="num">2</td></tr>`} {
		if !strings.Contains(page, want) {
			t.Errorf("queue page lacks %s", want)
		}
	}
}
