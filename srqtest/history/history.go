// Package history records what a queue was asked to do and what its handlers did, and checks the
// record: acknowledged publishes and handler executions go in, and Check reports tasks that were
// lost, unexpected or completed twice, tasks of an ordered partition that ran out of publish order,
// executions of one ordered partition that overlapped, and executions that started without a valid
// lease (recorded by LeaseMiddleware, which asks Redis at each start).
//
// A Recorder is safe for concurrent use. It keeps its events in memory and can also write each one
// as a JSON line to a file, in one write per event, so several processes can record one run (a
// process killed with SIGKILL loses nothing it recorded) and ReadFile merges their files:
//
//	rec := history.NewRecorder("worker-1", file)
//	w, _ := srq.NewWorker(q, h, srq.WorkerConfig{Middleware: []srq.Middleware{rec.Middleware("worker-1")}})
//	…
//	events, _ := history.ReadFile(path) // for each process's file
//	if err := history.Check(append(published, events...)).Err(); err != nil { t.Fatal(err) }
//
// Times are the recording host's wall clock, so the processes of one history must share a host.
// The package is for tests; it is not part of srq's stable API.
package history

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/partition"
)

// Op says what an Event records.
type Op string

// The operations a history holds.
const (
	// OpPublish: a publish of task ID to Partition was acknowledged to Producer; Seq is its place
	// among Producer's acknowledged publishes to Partition, from 1.
	OpPublish Op = "publish"
	// OpStart: a handler began execution Exec of task ID.
	OpStart Op = "start"
	// OpEnd: execution Exec ended; OK says the handler succeeded, Late that its context had ended
	// (lease lost or shutdown) by the time it returned.
	OpEnd Op = "end"
	// OpCrash: Process died without a chance to record anything (killed). Executions of it that
	// have no end stopped at this time at the latest.
	OpCrash Op = "crash"
	// OpStep: a flow holding step ID, of Partition, was published (the publish was acknowledged to
	// Producer); After names the task ids of the steps it depends on. A step counts as published;
	// its place in an ordered partition is taken when it is released, so no publish order holds it.
	OpStep Op = "step"
)

// Event is one recorded step. Its JSON form is one line of a history file.
type Event struct {
	Op        Op       `json:"op"`
	Time      int64    `json:"t"` // Unix nanoseconds, wall clock of the recording host
	ID        string   `json:"id,omitempty"`
	Partition string   `json:"p,omitempty"`
	Producer  string   `json:"pr,omitempty"`   // OpPublish
	Seq       int64    `json:"seq,omitempty"`  // OpPublish
	Process   string   `json:"proc,omitempty"` // OpStart, OpEnd, OpCrash
	Worker    string   `json:"w,omitempty"`    // OpStart
	Exec      string   `json:"x,omitempty"`    // OpStart, OpEnd: names one execution
	Token     uint64   `json:"k,omitempty"`    // OpStart: the delivery's fencing token
	Attempt   int      `json:"a,omitempty"`    // OpStart
	OK        bool     `json:"ok,omitempty"`   // OpEnd: the handler returned nil
	Late      bool     `json:"late,omitempty"` // OpEnd: the handler's context had ended when it returned
	Err       string   `json:"err,omitempty"`  // OpEnd: the handler's error, or its context's cause; OpStart: why the lease check failed
	After     []string `json:"af,omitempty"`   // OpStep: the task ids of the steps it depends on
	// Lease is what the check of the delivery's lease in Redis found right before the handler
	// began (OpStart; LeaseMiddleware), LeaseLeft how long the lease had left by the server's
	// clock then, in nanoseconds (negative past its deadline; 0 when the lease was gone).
	Lease     LeaseState `json:"lease,omitempty"`
	LeaseLeft int64      `json:"ll,omitempty"`
}

// Recorder records events of one process. It is safe for concurrent use.
type Recorder struct {
	process string

	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	events []Event
	seqs   map[[2]string]int64
	execs  int64
	err    error
}

// NewRecorder returns a recorder for process, a name unique within the history (a process that
// is restarted needs a new name). When w is not nil each event is also written to it as one JSON
// line, in a single Write call; the first write error is kept and reported by Err.
func NewRecorder(process string, w io.Writer) *Recorder {
	return &Recorder{process: process, w: w, seqs: map[[2]string]int64{}}
}

func (r *Recorder) add(e Event) {
	e.Time = time.Now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Op == OpPublish {
		k := [2]string{e.Producer, e.Partition}
		r.seqs[k]++
		e.Seq = r.seqs[k]
	}
	r.events = append(r.events, e)
	if r.w == nil {
		return
	}
	b, err := json.Marshal(e)
	if err == nil {
		r.buf = append(append(r.buf[:0], b...), '\n')
		_, err = r.w.Write(r.buf)
	}
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("history: record %s of %s: %w", e.Op, e.ID, err)
	}
}

// Published records that the publish of task id to partition p was acknowledged to producer (the
// call returned without error, whether or not it was reported as a duplicate). Call it in the
// order the producer's publishes were acknowledged: that order is the publish order Check holds
// the tasks of an ordered partition to. It never fails: an error writing the event is kept for Err.
func (r *Recorder) Published(producer, id string, p partition.Key) {
	r.add(Event{Op: OpPublish, Producer: producer, ID: id, Partition: string(p)})
}

// PublishedStep records that a flow holding step id, of partition p, depending on the steps whose
// task ids are after, was published and the publish acknowledged to producer. Record every step
// of the flow once PublishFlow returned without error (or as a duplicate). It never fails: an
// error writing the event is kept for Err.
func (r *Recorder) PublishedStep(producer, id string, p partition.Key, after []string) {
	r.add(Event{Op: OpStep, Producer: producer, ID: id, Partition: string(p), After: after})
}

// Crash records that process died without recording anything more (it was killed). Record it
// after the process is known to be dead. An error writing the event is kept for Err.
func (r *Recorder) Crash(process string) {
	r.add(Event{Op: OpCrash, Process: process})
}

// Execution is one run of a handler on one delivery, from Start to End.
type Execution struct {
	r   *Recorder
	id  string
	p   string
	key string
}

// Start records that worker (a worker of this recorder's process) began to run task id of
// partition p, delivered with token as attempt attempt. End the execution with End. An error
// writing the event is kept for Err.
func (r *Recorder) Start(worker, id string, p partition.Key, token uint64, attempt int) *Execution {
	return r.start(Event{Worker: worker, ID: id, Partition: string(p), Token: token, Attempt: attempt})
}

// start records e, an OpStart event with its execution key still to name.
func (r *Recorder) start(e Event) *Execution {
	r.mu.Lock()
	r.execs++
	e.Exec = r.process + "/" + strconv.FormatInt(r.execs, 10)
	r.mu.Unlock()
	e.Op, e.Process = OpStart, r.process
	r.add(e)
	return &Execution{r: r, id: e.ID, p: e.Partition, key: e.Exec}
}

// End records that the execution's handler returned err with ctx, its context. A nil err is a
// completion; if ctx had ended by then (the lease was lost or the worker shut down), it is a late
// completion, which the worker's ack may or may not have settled (see Check). An error writing the
// event is kept for the recorder's Err.
func (x *Execution) End(ctx context.Context, err error) {
	e := Event{Op: OpEnd, Process: x.r.process, ID: x.id, Partition: x.p, Exec: x.key, OK: err == nil}
	if err != nil {
		e.Err = err.Error()
	}
	if cause := context.Cause(ctx); cause != nil {
		e.Late = true
		if err == nil {
			e.Err = cause.Error()
		}
	}
	x.r.add(e)
}

// Middleware returns worker middleware that records every execution of the handler it wraps as
// Start and End for worker. Put it first (outermost) so it sees what the worker will act on.
func (r *Recorder) Middleware(worker string) srq.Middleware { return r.middleware(worker, nil) }

// middleware records every execution, checking its lease with lease first when lease is not nil.
func (r *Recorder) middleware(worker string, lease LeaseFunc) srq.Middleware {
	return func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			e := Event{Worker: worker, ID: d.ID, Partition: string(d.Partition), Token: uint64(d.Token), Attempt: d.Attempt}
			if lease != nil {
				e.Lease, e.LeaseLeft, e.Err = checkLease(ctx, lease, d)
			}
			x := r.start(e)
			err := next(ctx, d)
			x.End(ctx, err)
			return err
		}
	}
}

// Events returns a copy of the events recorded so far, in the order they were recorded.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Err returns the first error writing an event, or nil.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Read reads events written by a Recorder, one JSON line each. A last line without its newline (a
// write cut off by a crash) is ignored; any other malformed line is an error.
func Read(rd io.Reader) ([]Event, error) {
	br := bufio.NewReader(rd)
	var out []Event
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil // line, if any, is a torn last line
		}
		if err != nil {
			return out, fmt.Errorf("history: read: %w", err)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			return out, fmt.Errorf("history: line %d: %w", n, err)
		}
		out = append(out, e)
	}
}

// ReadFile reads the events of one history file (see Read).
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	evs, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return evs, nil
}
