package web

import (
	"strings"
	"testing"

	"github.com/srqueue/srq"
)

// A chain of three steps behind a dead letter: the flow page draws each cancelled, and counts
// four failed or cancelled of four.
func TestFlowPageCancelledChain(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("chain")
	p := q.Step("p", event{Fail: "declined"}, nil)
	f := &srq.Flow{ID: "c3", Steps: srq.Chain(p, q.Step("a", event{}, nil), q.Step("b", event{}, nil), q.Step("c", event{}, nil))}
	if _, err := srq.PublishFlow(b.ctx, f); err != nil {
		t.Fatal(err)
	}
	b.runAll(q)
	page := b.mustGet("flow?q=chain&id=c3")
	states := map[string]string{}
	for _, m := range nodeRE.FindAllStringSubmatch(page, -1) {
		states[m[2]] = m[1]
	}
	want := map[string]string{"p": "dead", "a": "cancelled", "b": "cancelled", "c": "cancelled"}
	for step, state := range want {
		if states[step] != state {
			t.Errorf("node %s is %q, want %q", step, states[step], state)
		}
	}
	if !strings.Contains(page, "4: 0 succeeded, 4 failed or cancelled") {
		t.Errorf("the flow page does not count 4 failed or cancelled of 4:\n%s", page)
	}
}
