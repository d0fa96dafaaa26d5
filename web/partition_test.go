package web

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// rowIDs returns the data-id of every row of the table with id table, in order.
func rowIDs(t *testing.T, body, table string) []string {
	t.Helper()
	i := strings.Index(body, `<table id="`+table+`"`)
	if i < 0 {
		return nil
	}
	body = body[i:]
	body = body[:strings.Index(body, "</table>")]
	var ids []string
	for _, m := range regexp.MustCompile(`<tr data-id="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestPartitionPage: a partition's due tasks in the order a worker takes them and its delayed ones
// soonest first, paged, with the partition's state; the parameters are checked.
func TestPartitionPage(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	pub := func(id, p string, prio int, delay time.Duration) {
		t.Helper()
		if _, err := q.Publish(b.ctx, event{}, &srq.PublishOpts{ID: id, Partition: p, Priority: prio, Delay: delay}); err != nil {
			t.Fatal(err)
		}
	}
	pub("a1", "p", 0, 0)
	pub("a2", "p", 0, 0)
	pub("a3", "p", 0, 0)
	pub("hi", "p", 2, 0)
	pub("later", "p", 0, 2*time.Hour)
	pub("soon", "p", 7, time.Hour)
	pub("base1", "", 0, 0)
	name := url.QueryEscape(q.Name())

	page := b.mustGet("partition?q=" + name + "&p=p&limit=2")
	if got := strings.Join(rowIDs(t, page, "partition-tasks"), ","); got != "hi,a1" {
		t.Errorf("first page of due tasks: %s, want hi,a1", got)
	}
	for _, want := range []string{`id="view-due" href="./partition?q=` + name + `&amp;p=p&amp;view=due&amp;limit=2" class="current">Due <span class="muted">(4)`,
		`Delayed <span class="muted">(2)`, `id="next" href="./partition?q=` + name + `&amp;p=p&amp;view=due&amp;offset=2&amp;limit=2"`,
		`6 (4 due, 2 delayed)`, `id="pause-partition"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the partition page lacks %s:\n%s", want, page)
		}
	}
	page = b.mustGet("partition?q=" + name + "&p=p&view=due&offset=2&limit=2")
	if got := strings.Join(rowIDs(t, page, "partition-tasks"), ","); got != "a2,a3" || strings.Contains(page, `id="next"`) ||
		!strings.Contains(page, `id="prev"`) {
		t.Errorf("second page of due tasks: %s\n%s", got, page)
	}
	page = b.mustGet("partition?q=" + name + "&p=p&view=delayed")
	if got := strings.Join(rowIDs(t, page, "partition-tasks"), ","); got != "soon,later" || !strings.Contains(page, "in 59m") {
		t.Errorf("delayed tasks: %s\n%s", got, page)
	}
	page = b.mustGet("partition?q=" + name + "&p=")
	if got := strings.Join(rowIDs(t, page, "partition-tasks"), ","); got != "base1" || !strings.Contains(page, `<span class="muted">(base)</span>`) {
		t.Errorf("the base partition: %s\n%s", got, page)
	}
	page = b.mustGet("partition?q=" + name + "&p=empty")
	if !strings.Contains(page, `id="no-partition-tasks"`) {
		t.Errorf("an empty partition:\n%s", page)
	}
	// The partitions page links each partition to its page.
	if page := b.mustGet("partitions?q=" + name); !strings.Contains(page, `href="./partition?q=`+name+`&amp;p=p"`) {
		t.Errorf("the partitions page does not link to the partition:\n%s", page)
	}
	for path, status := range map[string]int{
		"partition?q=" + name:                                    http.StatusBadRequest, // no p
		"partition?q=" + name + "&p=p&view=all":                  http.StatusBadRequest,
		"partition?q=" + name + "&p=p&offset=-1":                 http.StatusBadRequest,
		"partition?q=" + name + "&p=p&offset=999999":             http.StatusBadRequest,
		"partition?q=" + name + "&p=p&limit=0":                   http.StatusBadRequest,
		"partition?q=" + name + "&p=" + strings.Repeat("x", 600): http.StatusBadRequest, // key too long
		"partition?q=nosuch&p=p":                                 http.StatusNotFound,
		"partition?p=p":                                          http.StatusBadRequest,
	} {
		if r := b.get(path); r.status != status {
			t.Errorf("GET %s: %d, want %d", path, r.status, status)
		}
	}
}

// TestTaskPageRequeueAndPurge: a dead letter's page offers requeue and purge; requeue comes back
// to the task, pending again; purge goes to the dead letters. A read-only dashboard offers neither
// and refuses the POST.
func TestTaskPageRequeueAndPurge(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	dead := b.kill(q, "p", 2, "boom")
	name := url.QueryEscape(q.Name())
	page := b.mustGet("task?q=" + name + "&id=" + dead[0])
	if !strings.Contains(page, `id="task-requeue"`) || !strings.Contains(page, `data-confirm="Delete this dead letter?`) {
		t.Fatalf("the dead letter's page offers no actions:\n%s", page)
	}
	page = b.follow("requeue", b.post("requeue", url.Values{"q": {q.Name()}, "scope": {"selected"}, "id": {dead[0]}, "back": {"task"}}))
	if stat(t, page, "task-state") != "pending" || stat(t, page, "flash") != "Requeued 1 dead letter." ||
		strings.Contains(page, `id="task-actions"`) {
		t.Errorf("the task page after requeueing:\n%s", page)
	}
	page = b.follow("purge", b.post("purge", url.Values{"q": {q.Name()}, "scope": {"selected"}, "id": {dead[1]}, "back": {"task"}}))
	if stat(t, page, "flash") != "Purged 1 dead letter." || !strings.Contains(page, `id="no-dead"`) {
		t.Errorf("the page after purging from the task page:\n%s", page)
	}
	if st := b.stats(q.Name()); st.Dead != 0 || st.Pending != 1 {
		t.Fatalf("after requeue and purge: %+v", st)
	}

	ro := setup(t, Config{ReadOnly: true})
	rq := ro.queue("")
	rdead := ro.kill(rq, "p", 1, "boom")
	page = ro.mustGet("task?q=" + url.QueryEscape(rq.Name()) + "&id=" + rdead[0])
	if stat(t, page, "task-state") != "dead" || strings.Contains(page, `id="task-actions"`) {
		t.Errorf("a read-only dashboard offers actions:\n%s", page)
	}
	if r := ro.post("purge", url.Values{"q": {rq.Name()}, "scope": {"selected"}, "id": {rdead[0]}, "back": {"task"}}); r.status != http.StatusForbidden {
		t.Errorf("read-only purge: %d, want 403", r.status)
	}
}

// TestQueueStateNeedsLiveWorker: a queue is "running" only while a consumer's heartbeat is fresh;
// a consumer last seen longer ago than engine.ConsumerLive is listed as gone.
func TestQueueStateNeedsLiveWorker(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	b.publish(q, "p", 1, "")
	name := url.QueryEscape(q.Name())
	now, err := b.client.Time(b.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	stale := redis.Z{Score: float64(now.Add(-engine.ConsumerLive - time.Second).UnixMilli()), Member: "old-worker"}
	if err := b.client.ZAdd(b.ctx, q.Engine().Keys().Consumers(), stale).Err(); err != nil {
		t.Fatal(err)
	}
	page := b.mustGet("queue?q=" + name)
	if stat(t, page, "queue-state") != "no live worker" || stat(t, page, "stat-live") != "0" ||
		!strings.Contains(page, `<tr data-consumer="old-worker">`) || !strings.Contains(page, `<span class="badge stale">gone</span>`) {
		t.Errorf("a queue with only a stale consumer:\n%s", page)
	}
	if over := b.mustGet(""); !strings.Contains(over, `data-queue-state="idle"`) {
		t.Errorf("the overview shows the queue without a live worker as running:\n%s", over)
	}
	if _, err := q.Engine().Fetch(b.ctx, "w1", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	page = b.mustGet("queue?q=" + name)
	if stat(t, page, "queue-state") != "running" || stat(t, page, "stat-live") != "1" ||
		!strings.Contains(page, `<tr data-consumer="w1"><td class="id">w1</td>`) {
		t.Errorf("a queue with a live consumer:\n%s", page)
	}
	if over := b.mustGet(""); !strings.Contains(over, `data-queue-state="running"`) ||
		!strings.Contains(over, `data-stat="live_consumers">1<`) {
		t.Errorf("the overview does not show the live worker:\n%s", over)
	}
	if err := b.in.PauseQueue(b.ctx, q.Name()); err != nil {
		t.Fatal(err)
	}
	if page := b.mustGet("queue?q=" + name); stat(t, page, "queue-state") != "paused" {
		t.Errorf("a paused queue:\n%s", page)
	}
}
