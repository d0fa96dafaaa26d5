package web

import (
	"net/url"
	"strings"
	"testing"
	"time"

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
	name := url.QueryEscape(q.Name())
	pages := []string{"", "queue?q=" + name, "partitions?q=" + name, "partitions?by=age&q=" + name,
		"inflight?q=" + name, "dead?q=" + name + "&partition=" + url.QueryEscape(string(key)),
		"task?q=" + name + "&id=" + dead[0], "partition?q=" + name + "&p=" + url.QueryEscape(string(key)), "api/stats"}
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
