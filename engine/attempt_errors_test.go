package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// attemptsOf returns the errors task id's record keeps, as "attempt:error".
func (b *bundle) attemptsOf(id string) []string {
	b.t.Helper()
	info, err := b.eng.Task(b.ctx, id)
	if err != nil {
		b.t.Fatalf("task %s: %v", id, err)
	}
	var out []string
	for _, e := range info.Errors {
		if e.At.IsZero() {
			b.t.Errorf("attempt %d has no time", e.Attempt)
		}
		out = append(out, fmt.Sprintf("%d:%s", e.Attempt, e.Error))
	}
	return out
}

// TestAttemptErrors: every failed delivery of a task adds its error, attempt number and time to
// the record, whatever ended it (a reject, a rate limit's hand-back, a lease that expired, a
// kill), in order; a snooze without an error and a task taken back with a rejected one add
// nothing; the history survives a requeue, and holds the last MaxAttemptErrors.
func TestAttemptErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := b.publish(Message{Partition: "p", MaxAttempts: 100})[0]
	reject := func(r Rejection) {
		t.Helper()
		res, err := b.eng.Reject(b.ctx, []Rejection{r})
		if err != nil || res[0].Err != nil {
			t.Fatalf("reject: %v %+v", err, res)
		}
	}
	one := func() *Delivery {
		t.Helper()
		ds := b.fetch("w", 1)
		if len(ds) != 1 {
			t.Fatalf("fetched %d", len(ds))
		}
		return &ds[0]
	}
	reject(Rejection{Receipt: one().Receipt(), Reason: "db timeout\nat line 3"})
	reject(Rejection{Receipt: one().Receipt(), Reason: "rate limited", NotAttempt: true})
	reject(Rejection{Receipt: one().Receipt()}) // a snooze: no error
	// A lease that expires.
	ds, err := b.eng.Fetch(b.ctx, "w", 1, 30*time.Millisecond)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %v %d", err, len(ds))
	}
	b.waitLeasesExpired(ds[0])
	if _, err := b.eng.Recover(b.ctx); err != nil {
		t.Fatal(err)
	}
	// Recovered and pending again, its last error is the newest of its errors.
	if info, err := b.eng.Task(b.ctx, id); err != nil || info.LastError != "lease expired" || info.State != StatePending {
		t.Fatalf("after a recovery: last error %q, state %s, %v; want lease expired, pending", info.LastError, info.State, err)
	}
	if d := one(); d.LastError != "lease expired" {
		t.Fatalf("the delivery after a recovery: last error %q, want lease expired", d.LastError)
	} else {
		reject(Rejection{Receipt: d.Receipt(), NotAttempt: true}) // a snooze: it adds nothing
	}
	if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: one().Receipt(), Reason: "bad payload"}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"1:db timeout\nat line 3", "2:rate limited", "3:lease expired", "4:bad payload"}
	if got := b.attemptsOf(id); !slices.Equal(got, want) {
		t.Fatalf("errors %q, want %q", got, want)
	}
	// Requeued, the letter keeps its history; later failures add to it, the last 10 kept.
	if errs, err := b.eng.Requeue(b.ctx, []string{id}); err != nil || errs[0] != nil {
		t.Fatalf("requeue: %v %v", err, errs)
	}
	for i := range 9 {
		reject(Rejection{Receipt: one().Receipt(), Reason: fmt.Sprint("again ", i)})
	}
	got := b.attemptsOf(id)
	if len(got) != MaxAttemptErrors || got[0] != "4:bad payload" || got[1] != "1:again 0" || got[9] != "9:again 8" {
		t.Fatalf("after a requeue and 9 more failures: %q", got)
	}
	reject(Rejection{Receipt: one().Receipt(), Reason: strings.Repeat("x", MaxReasonLen+100)})
	got = b.attemptsOf(id)
	if len(got) != MaxAttemptErrors || got[0] != "1:again 0" || len(got[9]) != len("10:")+MaxReasonLen {
		t.Fatalf("a long reason: %d entries, first %q, last %d bytes", len(got), got[0], len(got[9]))
	}

	// An ordered run: the rejected task notes its error, the one taken back with it nothing.
	b = setup(t, Config{})
	o := b.publish(Message{Partition: "!o"}, Message{Partition: "!o"})
	run := b.fetch("w2", 2)
	if len(run) != 2 || run[0].ID != o[0] {
		t.Fatalf("run of %d, want %v", len(run), o)
	}
	if res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: run[0].Receipt(), Reason: "first failed"}}); err != nil || res[0].Err != nil {
		t.Fatalf("reject: %v %+v", err, res)
	}
	if got := b.attemptsOf(o[0]); !slices.Equal(got, []string{"1:first failed"}) {
		t.Errorf("rejected task: %q", got)
	}
	if got := b.attemptsOf(o[1]); len(got) != 0 {
		t.Errorf("task taken back with it: %q", got)
	}
}

// FuzzParseAttemptErrors: the parser of a record's error history never panics, and reads back
// what note_error writes.
func FuzzParseAttemptErrors(f *testing.F) {
	f.Add("1 1700000000000 3 abc2 1700000000001 0 ")
	f.Add("1 2 5 a\nb c")
	f.Add("9 9 99 short")
	f.Add("x y z ")
	f.Fuzz(func(t *testing.T, s string) {
		es, err := parseAttemptErrors(s)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, e := range es {
			fmt.Fprintf(&b, "%d %d %d %s", e.Attempt, e.At.UnixMilli(), len(e.Error), e.Error)
		}
		again, err := parseAttemptErrors(b.String())
		if err != nil || !slices.Equal(again, es) {
			t.Fatalf("%q: parsed %v, written back and parsed %v, %v", s, es, again, err)
		}
	})
}
