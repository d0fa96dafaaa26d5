package engine

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/srqueue/srq/partition"
)

// State is where a task is in its life.
type State string

// The states of a task. An acked task no longer exists.
const (
	StatePending State = "pending"
	StateLeased  State = "leased"
	StateDead    State = "dead"
)

var stateCodes = map[string]State{"p": StatePending, "i": StateLeased, "d": StateDead, "w": StateWaiting, "c": StateCancelled}

// TaskInfo is one task's record, as Task reads it.
type TaskInfo struct {
	ID          string
	State       State
	Partition   partition.Key
	Priority    int
	Attempts    int
	MaxAttempts int
	Crashes     int
	EnqueuedAt  time.Time
	AvailableAt time.Time
	Payload     []byte
	Headers     map[string]string
	LastError   string
	Consumer    string    // the lease holder, when leased
	Token       Token     // the current fencing token, when leased
	LeaseEnds   time.Time // the lease deadline on the server's clock, when leased
	Sequence    string    // the publish sequence number that orders the task in its partition
	// Errors are the errors of the task's last failed deliveries, oldest first, at most
	// MaxAttemptErrors: each reject with an error, each kill with a reason, each lease that expired
	// ("lease expired"). LastError is the newest of them, unless a later delivery failed without
	// an error.
	Errors []AttemptError
	// Debounce is the key and mode of a task a debounced publish added (Message.Debounce); nil
	// for any other task.
	Debounce *DebounceInfo

	// The fields of dynamic workflows (lua/includes/flow.lua); zero for a task that has none.

	// Waited is what the task waits for while a wait of it lasts: WaitSleep, WaitSignal
	// (WaitedSignal names the signal) or WaitChildren; 0 otherwise. The task is parked
	// (StateWaiting) or, for a sleep or a signal wait with a time, pending until that time; the
	// wait ends when what it waits for comes or a worker takes the task (WorkflowOf then reads it
	// as the task's last wait).
	Waited       WaitKind
	WaitedSignal string
	// HasWorkflow says the task keeps workflow keys: it spawned children (Children lists them), or
	// waited for a signal or was sent one.
	HasWorkflow bool
	// ChildrenNotEnded and FailedChildren count, for a task that spawned children, those that have
	// not ended and those that failed through a FailDependents edge (Workflow.Children and
	// FailedChildren).
	ChildrenNotEnded, FailedChildren int
	// Progress is the last progress the task reported (Progress), as its queue's codec encoded
	// it; nil for none.
	Progress []byte
	// KeptState is the state the task set before its last wait, as its queue's codec encoded it;
	// nil for none.
	KeptState []byte
	// Parent is the id of the task that spawned this one (ChildOf), "" for none; ParentQueue is
	// the engine queue (the shard, ShardQueue) that holds the parent.
	Parent, ParentQueue string
	// Flow is the id of the flow this task is a step of, "" for none; FlowQueue is the engine
	// queue (the shard) that keeps the flow: the queue of its first step.
	Flow, FlowQueue string
}

// taskRefs are the fields of a task's record whose meaning depends on others: R and B count a
// waiting flow step's parents before it runs and a parent's children after (lua/includes/flow.lua),
// F names a flow or, with K, a parent, in the queue H names or the task's own.
type taskRefs struct {
	unended, failed int
	ref, home       string
	child           bool
}

// MaxAttemptErrors is how many failed deliveries' errors a task's record keeps (TaskInfo.Errors).
const MaxAttemptErrors = 10

// AttemptError is the error of one failed delivery of a task.
type AttemptError struct {
	// Attempt is the delivery's attempt number, from 1 (a delivery that did not count as an
	// attempt, such as a rate limit's hand-back, has the number of the attempt it was).
	Attempt int
	// At is when the delivery ended, on the server's clock.
	At time.Time
	// Error is the reason it failed with, at most MaxReasonLen bytes.
	Error string
}

// parseAttemptErrors reads the E field of a task's record (lua/includes/settle.lua's note_error):
// entries of "<attempt> <ms> <bytes> " followed by that many bytes. It fails on malformed input
// and never panics.
func parseAttemptErrors(s string) ([]AttemptError, error) {
	var out []AttemptError
	for s != "" {
		var nums [3]int64
		for i := range nums {
			sp := strings.IndexByte(s, ' ')
			if sp < 1 {
				return nil, fmt.Errorf("malformed attempt error %q", s)
			}
			n, err := strconv.ParseInt(s[:sp], 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("malformed attempt error %q", s)
			}
			nums[i], s = n, s[sp+1:]
		}
		if nums[2] > int64(len(s)) || nums[0] > math.MaxInt32 {
			return nil, fmt.Errorf("malformed attempt error: %d bytes announced, %d left", nums[2], len(s))
		}
		out = append(out, AttemptError{Attempt: int(nums[0]), At: time.UnixMilli(nums[1]), Error: s[:nums[2]]})
		s = s[nums[2]:]
	}
	return out, nil
}

// Task reads the record of task id. It fails with ErrNotFound when there is none (never published,
// or acked), with ErrInvalid for an invalid id, and with the context's or Redis's error.
func (e *Engine) Task(ctx context.Context, id string) (TaskInfo, error) {
	if err := validID(id, false); err != nil {
		return TaskInfo{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	res, err := e.run(ctx, scriptTask, id)
	if err != nil {
		return TaskInfo{}, err
	}
	if code, ok := res.(int64); ok {
		return TaskInfo{}, codeError(code)
	}
	rows, err := replySlice(res)
	if err != nil || len(rows)%2 != 1 {
		return TaskInfo{}, fmt.Errorf("srq: task: malformed reply %v", res)
	}
	lease, err := replyInt(rows[0])
	if err != nil {
		return TaskInfo{}, err
	}
	t := TaskInfo{ID: id}
	var refs taskRefs
	unreleased := false
	if lease > 0 {
		t.LeaseEnds = time.UnixMilli(lease)
	}
	for i := 1; i+1 < len(rows); i += 2 {
		k, err1 := replyString(rows[i])
		v, err2 := replyString(rows[i+1])
		if err1 != nil || err2 != nil {
			return TaskInfo{}, fmt.Errorf("srq: task: malformed reply %v", res)
		}
		if err := t.set(k, v, &refs); err != nil {
			return TaskInfo{}, fmt.Errorf("srq: task %s: field %s: %w", id, k, err)
		}
		// A flow step that has not been released has the available-at 0: none yet (its parents
		// decide it), which AvailableAt's zero time says.
		unreleased = unreleased || (k == "t" && v == "0")
	}
	if t.State == "" {
		t.State = StatePending // a pending task's record has no state field
	}
	if t.AvailableAt.IsZero() && !unreleased {
		t.AvailableAt = t.EnqueuedAt // a task available when it was published has no available-at field
	}
	t.finish(refs, e.cfg.Queue)
	return t, nil
}

// finish sets the fields that refs decide, for a task of engine queue queue: the parent or flow F
// names, in the queue H names or this one; the children R and B count when the task keeps workflow
// keys (a flow step waiting for its parents has no workflow keys: it has not run).
func (t *TaskInfo) finish(refs taskRefs, queue string) {
	if refs.ref != "" {
		q := queue
		if refs.home != "" {
			q = queueOfBase(refs.home)
		}
		if refs.child {
			t.Parent, t.ParentQueue = refs.ref, q
		} else {
			t.Flow, t.FlowQueue = refs.ref, q
		}
	}
	if t.HasWorkflow {
		t.ChildrenNotEnded, t.FailedChildren = refs.unended, refs.failed
	}
}

// padSequence gives a record's sequence number, which a record may keep without its leading zeros
// (lua/includes/common.lua, seq_short), the seqDigits digits of the pending members.
func padSequence(s string) string {
	if len(s) >= seqDigits {
		return s
	}
	return strings.Repeat("0", seqDigits-len(s)) + s
}

// set stores one field of the task hash (see lua/publish.lua and docs/data-model.md), those whose
// meaning depends on others in refs; it ignores the fields it does not know.
func (t *TaskInfo) set(k, v string, refs *taskRefs) error {
	var err error
	atoi := func(s string) int {
		n, e := strconv.Atoi(s)
		if e != nil {
			err = e
		}
		return n
	}
	switch k {
	case "d":
		t.Payload = []byte(v)
	case "p":
		t.Partition = partition.Key(v)
	case "r":
		t.Priority = atoi(v)
	case "s":
		t.Sequence = padSequence(v)
	case "t":
		if v != "0" {
			t.AvailableAt = time.UnixMilli(int64(atoi(v)))
		}
	case "c":
		t.EnqueuedAt = time.UnixMilli(int64(atoi(v)))
	case "a":
		t.Attempts = atoi(v)
	case "m":
		t.MaxAttempts = atoi(v)
	case "n":
		t.Crashes = atoi(v)
	case "h":
		t.Headers, err = decodeHeaders([]byte(v))
	case "x":
		t.LastError = v
	case "E":
		t.Errors, err = parseAttemptErrors(v)
	case "w":
		t.Consumer = v
	case "k":
		t.Token, err = parseToken(v)
	case "S":
		t.State = stateCodes[v]
	case "W":
		if v != "" {
			t.Waited = WaitKind(v[0])
			if t.Waited == WaitSignal {
				t.WaitedSignal = v[1:]
			}
		}
	case "D":
		t.HasWorkflow = true
	case "R":
		refs.unended = atoi(v)
	case "B":
		refs.failed = atoi(v)
	case "P":
		t.Progress = []byte(v)
	case "Z":
		t.KeptState = []byte(v)
	case "F":
		refs.ref = v
	case "H":
		refs.home = v
	case "K":
		refs.child = true
	case "b":
		t.Debounce = parseDebounceField(v)
	}
	return err
}
