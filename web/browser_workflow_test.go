package web

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/codec"
)

// TestBrowserWorkflowEvents: the events page's script shows the events of dynamic workflows that
// come after the page loaded with the details the page itself shows for them once reloaded: what
// a waiting task waits for, a signal's name, a progress's value, markup as text.
func TestBrowserWorkflowEvents(t *testing.T) {
	ctx := browser(t)
	b := setup(t, Config{RefreshInterval: 300 * time.Millisecond})
	q, err := srq.NewQueue[event](b.client, srq.QueueConfig{Name: "ev", Prefix: b.prefix, Events: 1000})
	if err != nil {
		t.Fatal(err)
	}
	b.publish(q, "", 1, "") // the page has an event to start after
	b.runAll(q)
	step(t, ctx, "open the events page", chromedp.Navigate(b.base+"events?q=ev"),
		chromedp.WaitVisible(chromedp.CSS(`#events tr[data-kind="acked"]`)))
	progress, err := codec.MsgPack{}.Marshal(map[string]any{"step": "<b>2</b>", "of": 3})
	if err != nil {
		t.Fatal(err)
	}
	b.seedWorkflow(q, b.queue("kids"), "", progress, "approve <i>now</i>")
	if taken, err := q.Engine().Signal(b.ctx, "waiter", "approve <i>now</i>", []byte("y")); err != nil || !taken {
		t.Fatalf("signal: %v %v", taken, err)
	}
	const details = `(() => {
		const out = {};
		document.querySelectorAll("#events tbody tr").forEach(tr => {
			const k = tr.getAttribute("data-kind") + " " + tr.getAttribute("data-id");
			if (!(k in out)) out[k] = tr.cells[4].textContent.trim();
		});
		return out;
	})()`
	step(t, ctx, "wait for the live rows", chromedp.Poll[chromedp.Void](
		`document.querySelector('#events tbody tr.new[data-kind="signal"]') !== null`, chromedp.WithPollingTimeout(10*time.Second)))
	live := read(t, ctx, "read the live rows", chromedp.Evaluate[map[string]string](details))
	step(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#events tr[data-kind="signal"]`)))
	served := read(t, ctx, "read the served rows", chromedp.Evaluate[map[string]string](details))
	want := map[string]string{
		"progress parent": `progress {"of":3,"step":"<b>2</b>"}`,
		"waiting parent":  "waits for its children",
		"waiting waiter":  "waits for signal approve <i>now</i>",
		"signal waiter":   "signal approve <i>now</i>",
	}
	for k, w := range want {
		if live[k] != w || served[k] != w {
			t.Errorf("%s: live %q, served %q; want %q", k, live[k], served[k], w)
		}
	}
	if n := read(t, ctx, "count markup", chromedp.Evaluate[int](`document.querySelectorAll("#events b, #events i").length`)); n != 0 {
		t.Errorf("%d elements made of the events' text", n)
	}
}
