package web

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/partition"
)

// TestEscaping puts markup, quotes, a right-to-left override and other unicode into a queue name,
// a partition key, an error and a header, and checks that no page carries them as markup, and that
// a key round-trips through a form unchanged.
func TestEscaping(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	const evil = `<img src=x onerror="alert('x')">&amp;` + "\u202e" + "ключ 🔑"
	q := b.queue(`q"` + evil)
	key := partition.Ordered(`<script>alert("p")</script>` + evil)
	dead := b.kill(q, key, 1, `<script>alert("err")</script>`+evil)
	b.publish(q, key, 2, "")
	if _, err := q.Engine().Fetch(b.ctx, `consumer<script>`, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	// A kept outcome with a hostile error, a delayed task, a schedule and a worker's record, all
	// with the hostile text.
	if _, err := q.Engine().Publish(b.ctx, []engine.Message{{ID: "kept" + evil, Partition: "kept", KeepOutcome: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	kept, err := q.Engine().Fetch(b.ctx, "w", 1, time.Minute) // the ordered partition is held: only kept is ready
	if err != nil || len(kept) != 1 {
		t.Fatalf("fetch: %v %d", err, len(kept))
	}
	if _, err := q.Engine().Kill(b.ctx, []engine.Failure{{Receipt: kept[0].Receipt(), Reason: `<script>alert("k")</script>` + evil}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(b.ctx, event{}, &srq.PublishOpts{Partition: string(key) + "-later", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Schedule(b.ctx, "s"+evil, event{}, &srq.ScheduleOpts{Every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := q.Engine().PutWorker(b.ctx, `consumer<script>`, engine.WorkerRecord{Host: `<script>host` + evil,
		Queues: []string{q.Name(), `<img src=x onerror="q">`}, Started: time.Now(), Updated: time.Now()}); err != nil {
		t.Fatal(err)
	}
	name := url.QueryEscape(q.Name())
	pages := []string{"", "queue?q=" + name, "partitions?q=" + name, "partitions?by=age&q=" + name,
		"inflight?q=" + name, "dead?q=" + name + "&partition=" + url.QueryEscape(string(key)),
		"task?q=" + name + "&id=" + dead[0], "partition?q=" + name + "&p=" + url.QueryEscape(string(key)), "api/stats",
		"tasks?q=" + name, "tasks?state=delayed&q=" + name, "tasks?state=completed&q=" + name, "workers?q=" + name,
		"schedules?q=" + name}
	for _, p := range pages {
		body := b.mustGet(p)
		for _, raw := range []string{"<script>", "<img", `onerror="`} {
			if strings.Contains(body, raw) {
				t.Errorf("%s carries %q unescaped", p, raw)
			}
		}
		if p != "api/stats" && !strings.Contains(body, "ключ 🔑") {
			t.Errorf("%s does not show the unicode text", p)
		}
	}
	for p, want := range map[string]string{"tasks?state=completed&q=" + name: "&lt;script&gt;alert(&#34;k&#34;)&lt;/script&gt;",
		"workers?q=" + name: "&lt;script&gt;host", "tasks?state=delayed&q=" + name: "-later",
		"schedules?q=" + name: `data-schedule="s&lt;img`} {
		if body := b.mustGet(p); !strings.Contains(body, want) {
			t.Errorf("%s does not show %q escaped", p, want)
		}
	}
	body := b.mustGet("partitions?q=" + name)
	if !strings.Contains(body, "&lt;script&gt;alert(&#34;p&#34;)&lt;/script&gt;") {
		t.Errorf("the partition key is not shown escaped")
	}
	// The key goes back through the pause form exactly, from the partitions page and from the
	// partition's own.
	page := b.follow("pause-partition", b.post("pause-partition", url.Values{"q": {q.Name()}, "partition": {string(key)}, "back": {"partition"}}))
	if !strings.Contains(page, "Paused partition !&lt;script&gt;") || !strings.Contains(page, `id="resume-partition"`) {
		t.Errorf("the partition page after pausing the key:\n%s", page)
	}
	if err := b.in.ResumePartition(b.ctx, q.Name(), key); err != nil {
		t.Fatal(err)
	}
	page = b.follow("pause-partition", b.post("pause-partition", url.Values{"q": {q.Name()}, "partition": {string(key)}, "back": {"partitions"}}))
	if !strings.Contains(page, "Paused partition !&lt;script&gt;") || strings.Contains(page, "<script>") {
		t.Errorf("flash after pausing the key is missing or unescaped")
	}
	ps, err := b.in.Partitions(b.ctx, q.Name(), inspect.PartitionQuery{By: inspect.ByPaused})
	if err != nil || len(ps) != 1 || ps[0].Key != key {
		t.Fatalf("paused partitions: %+v %v, want %q", ps, err, key)
	}
}
