package history_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/srqtest"
	"github.com/srqueue/srq/srqtest/history"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// h builds a history by hand; times are in milliseconds.
type h []history.Event

func ms(t int64) int64 { return t * 1e6 }

func (x h) pub(producer, id, part string, seq int64) h {
	return append(x, history.Event{Op: history.OpPublish, Producer: producer, ID: id, Partition: part, Seq: seq})
}

// run is an execution that ended at end with ok (the handler's result); end < 0: no end.
func (x h) run(proc, exec, id, part string, start, end int64, ok bool) h {
	x = append(x, history.Event{Op: history.OpStart, Time: ms(start), Process: proc, Exec: exec, ID: id, Partition: part})
	if end >= 0 {
		e := history.Event{Op: history.OpEnd, Time: ms(end), Process: proc, Exec: exec, ID: id, Partition: part, OK: ok}
		if !ok {
			e.Err = "boom"
		}
		x = append(x, e)
	}
	return x
}

func (x h) late(proc, exec, id, part string, start, end int64, ok bool) h {
	x = x.run(proc, exec, id, part, start, end, ok)
	x[len(x)-1].Late = true
	return x
}

// lease sets what the lease check of the last execution's start found, left ms before the deadline.
func (x h) lease(state history.LeaseState, left int64) h {
	for i := len(x) - 1; i >= 0; i-- {
		if x[i].Op == history.OpStart {
			x[i].Lease, x[i].LeaseLeft = state, ms(left)
			break
		}
	}
	return x
}

// step is a flow step's publish: id depends on after.
func (x h) step(producer, id, part string, after ...string) h {
	return append(x, history.Event{Op: history.OpStep, Producer: producer, ID: id, Partition: part, After: after})
}

func (x h) crash(proc string, at int64) h {
	return append(x, history.Event{Op: history.OpCrash, Time: ms(at), Process: proc})
}

func TestCheck(t *testing.T) {
	t.Parallel()
	type want map[history.Kind]int
	tests := []struct {
		name        string
		h           h
		want        want
		redelivered int
		late        int
		checked     int
	}{
		{name: "clean ordered and unordered",
			h: h{}.pub("P", "a", "!p", 1).pub("P", "b", "!p", 2).pub("P", "u", "q", 1).
				run("A", "A/1", "a", "!p", 10, 20, true).run("B", "B/1", "b", "!p", 21, 30, true).
				run("A", "A/2", "u", "q", 5, 6, true)},
		{name: "lost: never executed", h: h{}.pub("P", "a", "", 1), want: want{history.Lost: 1}},
		{name: "flow: a step after its parents completed",
			h: h{}.step("P", "f/a", "").step("P", "f/b", "").step("P", "f/c", "!o", "f/a", "f/b").
				run("A", "A/1", "f/a", "", 1, 5, true).run("B", "B/1", "f/b", "", 2, 6, true).
				run("A", "A/2", "f/c", "!o", 7, 8, true)},
		{name: "flow: a step before a parent completed",
			h: h{}.step("P", "f/a", "").step("P", "f/c", "", "f/a").
				run("A", "A/1", "f/a", "", 1, 5, true).run("B", "B/1", "f/c", "", 4, 8, true),
			want: want{history.EarlyStep: 1}},
		{name: "flow: a step whose parent never completed; the parent is lost",
			h: h{}.step("P", "f/a", "").step("P", "f/c", "", "f/a").
				run("A", "A/1", "f/a", "", 1, 5, false).run("B", "B/1", "f/c", "", 6, 8, true),
			want: want{history.EarlyStep: 1, history.Lost: 1}},
		{name: "flow: a step's publish order in its ordered partition holds nothing",
			h: h{}.step("P", "f/a", "!o").step("P", "f/b", "!o").pub("P", "t", "!o", 1).
				run("A", "A/1", "f/b", "!o", 1, 2, true).run("A", "A/2", "t", "!o", 3, 4, true).
				run("A", "A/3", "f/a", "!o", 5, 6, true)},
		{name: "lost: executions all failed or crashed",
			h:    h{}.pub("P", "a", "", 1).run("A", "A/1", "a", "", 1, 2, false).run("A", "A/2", "a", "", 3, -1, false).crash("A", 4),
			want: want{history.Lost: 1}},
		{name: "unexpected: executed, never published",
			h: h{}.run("A", "A/1", "z", "", 1, 2, true), want: want{history.Unexpected: 1}},
		{name: "unexpected even when it never completed",
			h: h{}.run("A", "A/1", "z", "", 1, 2, false), want: want{history.Unexpected: 1}},
		{name: "duplicate: completed twice by live processes",
			h:    h{}.pub("P", "a", "", 1).run("A", "A/1", "a", "", 1, 2, true).run("B", "B/1", "a", "", 3, 4, true),
			want: want{history.Duplicate: 1}},
		{name: "duplicate explained by a crash: redelivered",
			h: h{}.pub("P", "a", "", 1).run("A", "A/1", "a", "", 1, 2, true).crash("A", 3).
				run("B", "B/1", "a", "", 10, 11, true),
			redelivered: 1},
		{name: "a crash after the second run started explains nothing",
			h: h{}.pub("P", "a", "", 1).run("A", "A/1", "a", "", 1, 2, true).run("B", "B/1", "a", "", 3, 4, true).
				crash("A", 5),
			want: want{history.Duplicate: 1}},
		{name: "a crash of another process explains nothing",
			h: h{}.pub("P", "a", "", 1).run("A", "A/1", "a", "", 1, 2, true).crash("C", 3).
				run("B", "B/1", "a", "", 10, 11, true),
			want: want{history.Duplicate: 1}},
		{name: "a late completion is a completion but no duplicate",
			h: h{}.pub("P", "a", "!p", 1).late("A", "A/1", "a", "!p", 1, 50, true).
				run("B", "B/1", "a", "!p", 10, 20, true),
			late: 1},
		{name: "a late completion alone keeps the task from being lost",
			h: h{}.pub("P", "a", "", 1).late("A", "A/1", "a", "", 1, 50, true), late: 1},
		{name: "out of order: completions reversed",
			h: h{}.pub("P", "a", "!p", 1).pub("P", "b", "!p", 2).
				run("B", "B/1", "b", "!p", 1, 2, true).run("A", "A/1", "a", "!p", 3, 4, true),
			want: want{history.OutOfOrder: 1}},
		{name: "out of order: started before the earlier task completed",
			h: h{}.pub("P", "a", "!p", 1).pub("P", "b", "!p", 2).
				run("A", "A/1", "a", "!p", 1, 10, true).run("B", "B/1", "b", "!p", 5, 6, false).
				run("B", "B/2", "b", "!p", 11, 12, true),
			want: want{history.OutOfOrder: 1, history.Overlap: 1}},
		{name: "out of order: an earlier task never completed",
			h: h{}.pub("P", "a", "!p", 1).pub("P", "b", "!p", 2).pub("P", "c", "!p", 3).
				run("B", "B/1", "b", "!p", 1, 2, true).run("B", "B/2", "c", "!p", 3, 4, true),
			want: want{history.Lost: 1, history.OutOfOrder: 2}},
		{name: "a retry of the earlier task after a crash is in order",
			h: h{}.pub("P", "a", "!p", 1).pub("P", "b", "!p", 2).
				run("A", "A/1", "a", "!p", 1, 2, true).run("A", "A/2", "b", "!p", 3, -1, false).crash("A", 4).
				run("B", "B/1", "a", "!p", 10, 11, true).run("B", "B/2", "b", "!p", 12, 13, true),
			redelivered: 1},
		{name: "order is per producer",
			h: h{}.pub("P", "a", "!p", 1).pub("Q", "b", "!p", 1).
				run("B", "B/1", "b", "!p", 1, 2, true).run("A", "A/1", "a", "!p", 3, 4, true)},
		{name: "unordered partitions have no order",
			h: h{}.pub("P", "a", "q", 1).pub("P", "b", "q", 2).
				run("B", "B/1", "b", "q", 1, 2, true).run("A", "A/1", "a", "q", 1, 4, true)},
		{name: "overlap of two completions",
			h: h{}.pub("P", "a", "!p", 1).pub("Q", "b", "!p", 1).
				run("A", "A/1", "a", "!p", 1, 10, true).run("B", "B/1", "b", "!p", 5, 15, true),
			want: want{history.Overlap: 1}},
		{name: "overlap with a failed execution",
			h: h{}.pub("P", "a", "!p", 1).pub("Q", "b", "!p", 1).
				run("A", "A/1", "a", "!p", 1, 10, false).run("A", "A/2", "a", "!p", 20, 21, true).
				run("B", "B/1", "b", "!p", 5, 6, true),
			want: want{history.Overlap: 1}},
		{name: "overlap with an execution cut off by a later crash",
			h: h{}.pub("P", "a", "!p", 1).run("A", "A/1", "a", "!p", 1, -1, false).
				run("B", "B/1", "a", "!p", 5, 6, true).crash("A", 30),
			want: want{history.Overlap: 1}},
		{name: "no overlap with an execution cut off by an earlier crash",
			h: h{}.pub("P", "a", "!p", 1).run("A", "A/1", "a", "!p", 1, -1, false).crash("A", 3).
				run("B", "B/1", "a", "!p", 5, 6, true)},
		{name: "an execution that never ended overlaps everything after it",
			h: h{}.pub("P", "a", "!p", 1).pub("P", "b", "!p", 2).run("A", "A/1", "a", "!p", 1, -1, false).
				run("B", "B/1", "a", "!p", 5, 6, true).run("B", "B/2", "b", "!p", 7, 8, true),
			want: want{history.Overlap: 2}},
		{name: "a late execution overlaps nothing",
			h: h{}.pub("P", "a", "!p", 1).late("A", "A/1", "a", "!p", 1, 50, false).
				run("B", "B/1", "a", "!p", 5, 6, true)},
		{name: "unordered partitions may overlap",
			h: h{}.pub("P", "a", "q", 1).pub("P", "b", "q", 2).
				run("A", "A/1", "a", "q", 1, 10, true).run("B", "B/1", "b", "q", 5, 15, true)},
		{name: "a late execution that starts while a valid one runs overlaps",
			h: h{}.pub("P", "a", "!p", 1).pub("P", "b", "!p", 2).
				run("B", "B/1", "a", "!p", 1, 10, true).late("A", "A/1", "a", "!p", 3, 4, false).
				run("B", "B/2", "b", "!p", 11, 12, true),
			want: want{history.Overlap: 1}},
		{name: "a late execution that starts as a valid one ends overlaps nothing",
			h: h{}.pub("P", "a", "!p", 1).
				run("B", "B/1", "a", "!p", 1, 10, true).late("A", "A/1", "a", "!p", 10, 14, false)},
		{name: "valid leases at every start",
			h: h{}.pub("P", "a", "!p", 1).pub("P", "b", "!p", 2).
				run("A", "A/1", "a", "!p", 1, 2, true).lease(history.LeaseValid, 900).
				run("A", "A/2", "b", "!p", 3, 4, true).lease(history.LeaseValid, 1),
			checked: 2},
		{name: "a start past the lease's deadline",
			h:    h{}.pub("P", "a", "q", 1).run("A", "A/1", "a", "q", 1, 2, true).lease(history.LeaseExpired, -1500),
			want: want{history.Expired: 1}, checked: 1},
		{name: "a start after the lease was taken back, late",
			h: h{}.pub("P", "a", "q", 1).run("B", "B/1", "a", "q", 1, 2, true).lease(history.LeaseValid, 900).
				late("A", "A/1", "a", "q", 3, 4, false).lease(history.LeaseGone, 0),
			want: want{history.Expired: 1}, checked: 2},
		{name: "a lapsed execution overlaps a valid one it started before",
			h: h{}.pub("P", "a", "!p", 1).pub("P", "b", "!p", 2).
				run("B", "B/1", "a", "!p", 1, 2, true).lease(history.LeaseValid, 900).
				late("A", "A/1", "a", "!p", 3, 20, false).lease(history.LeaseGone, 0).
				run("B", "B/2", "b", "!p", 5, 6, true).lease(history.LeaseValid, 900),
			want: want{history.Expired: 1, history.Overlap: 1}, checked: 3},
		{name: "a lapsed execution that completed in time is a duplicate",
			h: h{}.pub("P", "a", "!p", 1).
				run("B", "B/1", "a", "!p", 1, 2, true).
				run("A", "A/1", "a", "!p", 3, 4, true).lease(history.LeaseExpired, -10),
			want: want{history.Expired: 1, history.Duplicate: 1}, checked: 1},
		{name: "a failed lease check checks nothing",
			h: h{}.pub("P", "a", "q", 1).run("A", "A/1", "a", "q", 1, 2, true).lease(history.LeaseUnknown, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := history.Check(tc.h)
			for _, k := range []history.Kind{history.Lost, history.Unexpected, history.Duplicate, history.OutOfOrder,
				history.Overlap, history.Expired} {
				if got := r.Count(k); got != tc.want[k] {
					t.Errorf("%s: %d, want %d", k, got, tc.want[k])
				}
			}
			if r.Redelivered != tc.redelivered || r.Late != tc.late || r.LeaseChecked != tc.checked {
				t.Errorf("redelivered %d late %d lease checked %d, want %d %d %d", r.Redelivered, r.Late, r.LeaseChecked,
					tc.redelivered, tc.late, tc.checked)
			}
			if err := r.Err(); (err != nil) != (len(tc.want) > 0) {
				t.Errorf("Err() = %v", err)
			}
			if t.Failed() {
				t.Logf("report: %s\n%v", r, r.Err())
			}
		})
	}
}

func TestErrAllows(t *testing.T) {
	t.Parallel()
	r := history.Check(h{}.pub("P", "a", "", 1).run("A", "A/1", "a", "", 1, 2, true).run("B", "B/1", "a", "", 3, 4, true))
	if err := r.Err(history.Duplicate); err != nil {
		t.Fatalf("Err(Duplicate) = %v", err)
	}
	err := r.Err()
	if err == nil || !strings.Contains(err.Error(), "1 duplicate") || !strings.Contains(err.Error(), `task "a"`) {
		t.Fatalf("Err() = %v", err)
	}
}

// TestRecorderFiles records from many goroutines of two "processes" into two files, as worker
// processes do, reads them back and checks the merged history.
func TestRecorderFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func(name string) *os.File {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return f
	}
	prod := history.NewRecorder("producer", open("producer.jsonl"))
	work := history.NewRecorder("worker", open("worker.jsonl"))
	const n = 200
	for i := 0; i < n; i++ {
		prod.Published("P", fmt.Sprint(i), "!p")
	}
	// Ordered tasks run one after another; the unordered ones concurrently.
	ctx := context.Background()
	for i := 0; i < n; i++ {
		work.Start("w", fmt.Sprint(i), "!p", uint64(i+1), 1).End(ctx, nil)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				id := fmt.Sprintf("u%d-%d", g, i)
				prod.Published(fmt.Sprint("Q", g), id, "q")
				work.Start("w", id, "q", 1, 1).End(ctx, nil)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(prod.Err(), work.Err()); err != nil {
		t.Fatal(err)
	}
	var all []history.Event
	for _, name := range []string{"producer.jsonl", "worker.jsonl"} {
		evs, err := history.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
	}
	if want := len(prod.Events()) + len(work.Events()); len(all) != want {
		t.Fatalf("read %d events, recorded %d", len(all), want)
	}
	r := history.Check(all)
	if err := r.Err(); err != nil || r.Published != n+400 || r.Completed != n+400 {
		t.Fatalf("%s: %v", r, err)
	}
	// Publishing order is numbered per producer and partition.
	for _, e := range prod.Events()[:n] {
		if fmt.Sprint(e.Seq-1) != e.ID {
			t.Fatalf("publish %s has seq %d", e.ID, e.Seq)
		}
	}
}

func TestReadTornLastLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	rec := history.NewRecorder("A", &buf)
	rec.Published("P", "a", "")
	rec.Published("P", "b", "")
	whole := buf.String()
	evs, err := history.Read(strings.NewReader(whole[:len(whole)-5]))
	if err != nil || len(evs) != 1 || evs[0].ID != "a" {
		t.Fatalf("torn last line: %v %+v", err, evs)
	}
	if _, err := history.Read(strings.NewReader("{not json}\n" + whole)); err == nil {
		t.Fatal("a malformed line in the middle was accepted")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrShortWrite }

func TestRecorderWriteError(t *testing.T) {
	t.Parallel()
	rec := history.NewRecorder("A", failWriter{})
	rec.Published("P", "a", "")
	if err := rec.Err(); !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("Err() = %v", err)
	}
	if len(rec.Events()) != 1 {
		t.Fatal("the event was not kept in memory")
	}
}

// TestMiddleware runs one task through a worker with the recording middleware: start and end are
// recorded with the delivery's token and attempt and the handler's result.
func TestMiddleware(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, fail := range []bool{false, true} {
		rec := history.NewRecorder("A", nil)
		hd := srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
			if fail {
				return srq.Permanent(errors.New("nope"))
			}
			return nil
		})
		srqtest.Process[int](t, hd, 1, &srq.PublishOpts{ID: "a", Partition: "p", Ordered: true}, srq.QueueConfig{},
			srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{rec.Middleware("w1")}})
		evs := rec.Events()
		if len(evs) != 2 {
			t.Fatalf("events %+v", evs)
		}
		s, e := evs[0], evs[1]
		if s.Op != history.OpStart || s.ID != "a" || s.Partition != "!p" || s.Worker != "w1" || s.Token == 0 ||
			s.Attempt != 1 || e.Op != history.OpEnd || e.Exec != s.Exec || e.OK == fail || e.Late {
			t.Fatalf("fail=%v: events %+v", fail, evs)
		}
		if fail && !strings.Contains(e.Err, "nope") {
			t.Fatalf("end %+v", e)
		}
	}
}

func TestEndAfterContextEnded(t *testing.T) {
	t.Parallel()
	rec := history.NewRecorder("A", nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(srq.ErrLeaseLost)
	rec.Start("w", "a", "", 1, 1).End(ctx, nil)
	e := rec.Events()[1]
	if !e.OK || !e.Late || e.Err != srq.ErrLeaseLost.Error() {
		t.Fatalf("end %+v", e)
	}
}

// FuzzRead feeds arbitrary bytes to Read: it never panics, and the events it accepts survive
// being written by a Recorder's encoding and read again.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	rec := history.NewRecorder("A", &buf)
	rec.Published("P", "a", "!p")
	rec.Start("w", "a", "!p", 7, 1).End(context.Background(), errors.New("x"))
	rec.Crash("A")
	f.Add(buf.Bytes())
	f.Add([]byte("{}\n{\"op\":\"end\"}"))
	f.Add([]byte("\n\n{\"t\":1e400}\n"))
	f.Add([]byte(`{"op":"start","x":"A/1","k":-1}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := history.Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		history.Check(evs) // must not panic on whatever was read
		var out bytes.Buffer
		for _, e := range evs {
			line, err := json.Marshal(e)
			if err != nil {
				t.Fatalf("re-encode %+v: %v", e, err)
			}
			out.Write(append(line, '\n'))
		}
		again, err := history.Read(&out)
		if err != nil || len(again) != len(evs) {
			t.Fatalf("re-read %d events: %d, %v", len(evs), len(again), err)
		}
		for i := range evs {
			if !reflect.DeepEqual(evs[i], again[i]) {
				t.Fatalf("event %d: %+v became %+v", i, evs[i], again[i])
			}
		}
	})
}
