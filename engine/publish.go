package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/srqueue/srq/partition"
)

// Message is one task to publish.
type Message struct {
	// ID identifies the task; empty means a new id from NewID. At most MaxIDLen bytes of UTF-8.
	ID string
	// Partition is the partition the task belongs to; the zero value is the base partition.
	Partition partition.Key
	// Priority orders tasks inside a partition: higher first. Between MinPriority and MaxPriority.
	Priority int
	// Delay makes the task available this long after the server receives it. Not negative; not
	// together with At.
	Delay time.Duration
	// At makes the task available at this time (a time in the past means now, and orders the task
	// by that time). The zero value means: use Delay.
	At time.Time
	// MaxAttempts is how many deliveries the task gets before it is dead-lettered; 0 means no limit.
	MaxAttempts int
	// Headers travel with the task, for example trace context.
	Headers map[string]string
	// Payload is the task's body, at most Config.MaxPayloadBytes.
	Payload []byte
	// KeepOutcome keeps the task's outcome (how it ended, with its result or error) this long
	// after it ends, readable with Outcome. 0: only as Config.ResultRetention keeps results.
	KeepOutcome time.Duration
	// Wait lets callers wait for the task's end with WaitOutcome. Its outcome is then kept for
	// KeepOutcome, at least MinWaitKeep.
	Wait bool
	// HoldOnDead makes the task's death hold its partition, when ordered: the partition's other
	// tasks wait until the dead letter is requeued (it goes back to its place, the head) or
	// deleted, or the partition is resumed. Unordered partitions ignore it.
	HoldOnDead bool
	// Debounce, when set, makes the publish debounced or throttled by a key (see Debounce): the
	// result then says whether it added a task, replaced the payload of the key's pending task,
	// or was dropped. Not with ID, Delay, At or Wait.
	Debounce *Debounce

	// parent and policy, set by Spawn: the ref (key base and id) of the task that spawned this
	// one, and the policy of the edge between them.
	parent string
	policy EdgePolicy
}

// MinWaitKeep is the shortest time the outcome of a task published with Message.Wait is kept,
// so a caller that begins to wait after the task ended still finds it.
const MinWaitKeep = 10 * time.Minute

// PublishResult tells what Publish did with one message.
type PublishResult struct {
	// ID is the task's id, the generated one when the message had none.
	ID string
	// Duplicate is true when a task with this id existed already (pending, leased or dead), or was
	// acked within the dedup window; nothing was changed then.
	Duplicate bool
	// Replaced is true when a debounced message (Message.Debounce, DebounceReplace) found its
	// key's task pending: that task, whose id ID is then, got the message's payload and headers
	// and now runs a window after this publish. No task was added.
	Replaced bool
	// Dropped is true when a throttled message (Message.Debounce, Throttle) was dropped: its key's
	// task, whose id ID is then, was added within the window or has not ended. Nothing was changed.
	Dropped bool
}

// Publish adds msgs in one round trip and reports per message whether it was added or a duplicate.
// Concurrent Publish calls of the engine are merged into one script call (Config.MaxMerge), their
// messages in order of arrival. It fails with ErrInvalid, before writing anything, when any
// message is invalid; with an error wrapping ErrTooManyPriorities (which matches ErrInvalid),
// writing none of msgs, when they would give a partition pending tasks at more than
// MaxPriorityLevels priorities other than 0; with ctx's error when ctx ends before the call is
// sent, nothing written; and with Redis's or ctx's error during the call, after which the
// messages may or may not have been added (ErrReplyLost says the call was sent).
func (e *Engine) Publish(ctx context.Context, msgs []Message) ([]PublishResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	if len(msgs) > MaxBatch {
		return nil, invalidf("a publish of %d messages is over the limit of %d (MaxBatch)", len(msgs), MaxBatch)
	}
	if err := checkPriorities(msgs); err != nil {
		return nil, err
	}
	out := make([]PublishResult, len(msgs))
	args := make([]any, 0, publishArgs*len(msgs))
	bytes := 0
	made := true // every id made here
	for i := range msgs {
		m := &msgs[i]
		if err := e.validateMessage(m); err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", ErrInvalid, i, err)
		}
		id := m.ID
		if id == "" {
			id = NewID()
		} else {
			made = false
		}
		out[i].ID = id
		var n int
		args, n = messageArgs(args, id, m)
		bytes += n
	}
	if err := e.registerChildren(ctx, msgs); err != nil {
		return nil, err
	}
	o := &op{msgs: args, bytes: bytes, newIDs: made}
	if err := e.pubs.do(ctx, o); err != nil {
		return nil, err
	}
	if o.err != nil {
		return nil, o.err
	}
	for i, r := range o.pubs {
		out[i].Duplicate = r.code == codeDuplicate
		if r.replaced || r.dropped {
			out[i].ID, out[i].Replaced, out[i].Dropped = r.id, r.replaced, r.dropped
		}
	}
	return out, nil
}

// publishArgs is the number of publish.lua arguments per message.
const publishArgs = 5

// messageArgs appends the publishArgs values of publish.lua for m, published with id, to args,
// and returns them with the bytes of m's payload and encoded headers: the id, the partition, the
// payload, the headers and the options (messageOpts).
func messageArgs(args []any, id string, m *Message) ([]any, int) {
	headers := encodeHeaders(m.Headers)
	return append(args, id, string(m.Partition), m.Payload, headers, messageOpts(m)), len(m.Payload) + len(headers)
}

// messageOpts packs the options of m that the usual message leaves at their zero values into one
// argument of publish.lua: "" when all are, else "priority,delay ms,at ms,max attempts,outcome
// spec,hold,policy,parent" (the at 0 for none, the outcome spec as outcomeSpec, the hold "1" or
// "", the policy and the parent's ref "" but for a spawned child). A debounced message has its
// mode as the policy and "<window ms>,<key>" as the ref (debounceOpts), and a debounce's window as
// its delay.
func messageOpts(m *Message) string {
	var at int64
	if !m.At.IsZero() {
		at = max(m.At.UnixMilli(), 1)
	}
	outcome := outcomeSpec(m.KeepOutcome, m.Wait)
	if m.Priority == 0 && m.Delay == 0 && at == 0 && m.MaxAttempts == 0 && outcome == "" && !m.HoldOnDead && m.parent == "" && m.Debounce == nil {
		return ""
	}
	b := make([]byte, 0, 48)
	b = strconv.AppendInt(b, int64(m.Priority), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, debounceDelay(m).Milliseconds(), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, at, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(m.MaxAttempts), 10)
	b = append(b, ',')
	b = append(b, outcome...)
	b = append(b, ',')
	b = append(b, flag(m.HoldOnDead)...)
	b = append(b, ',')
	if m.Debounce != nil {
		return string(debounceOpts(b, m.Debounce))
	}
	if m.parent != "" {
		b = append(b, byte(m.policy))
	}
	b = append(b, ',')
	b = append(b, m.parent...)
	return string(b)
}

// optsPriority is the priority messageOpts packed into opts, as a decimal string.
func optsPriority(opts string) string {
	if opts == "" {
		return "0"
	}
	prio, _, _ := strings.Cut(opts, ",")
	return prio
}

// flag is a script's boolean argument: "1" or "".
func flag(b bool) string {
	if b {
		return "1"
	}
	return ""
}

// outcomeSpec is how a task's record says that its end is recorded (lua/includes/outcome.lua):
// "" for not, else the retention in ms, followed by "w" when a caller may wait for it.
func outcomeSpec(keep time.Duration, wait bool) string {
	if wait {
		return strconv.FormatInt(max(keep, MinWaitKeep).Milliseconds(), 10) + "w"
	}
	if keep <= 0 {
		return ""
	}
	return strconv.FormatInt(max(keep.Milliseconds(), 1), 10)
}

// Validate checks msgs as Publish would before sending them, without writing anything, so a
// caller that splits a batch over several engines (shards) can refuse it whole. It fails with
// ErrInvalid, or with an error wrapping ErrTooManyPriorities when msgs alone give a partition more
// than MaxPriorityLevels priorities other than 0 (whether the partition's pending tasks leave room
// for theirs, only Publish finds out).
func (e *Engine) Validate(msgs []Message) error {
	for i := range msgs {
		if err := e.validateMessage(&msgs[i]); err != nil {
			return fmt.Errorf("%w: message %d: %w", ErrInvalid, i, err)
		}
	}
	return checkPriorities(msgs)
}

// checkPriorities refuses msgs when they alone give one partition more than MaxPriorityLevels
// priorities other than 0: publish.lua would refuse them, after a round trip.
func checkPriorities(msgs []Message) error {
	type level struct {
		p    partition.Key
		prio int
	}
	var levels map[level]bool
	var count map[partition.Key]int
	for i := range msgs {
		m := &msgs[i]
		if m.Priority == 0 {
			continue
		}
		if levels == nil {
			levels, count = map[level]bool{}, map[partition.Key]int{}
		}
		if l := (level{m.Partition, m.Priority}); !levels[l] {
			levels[l] = true
			if count[m.Partition]++; count[m.Partition] > MaxPriorityLevels {
				return priorityError(i, m.Partition, strconv.Itoa(m.Priority))
			}
		}
	}
	return nil
}

// priorityError is the error for message i, whose priority would take partition p past
// MaxPriorityLevels.
func priorityError(i int, p partition.Key, priority string) error {
	return fmt.Errorf("%w: message %d: its priority %s would give partition %q pending tasks at more than %d priorities other than 0; nothing of the batch was written",
		ErrTooManyPriorities, i, priority, string(p), MaxPriorityLevels)
}

// validateMessage checks m and returns a plain error; Publish wraps it with ErrInvalid.
func (e *Engine) validateMessage(m *Message) error {
	if err := validID(m.ID, true); err != nil {
		return err
	}
	if err := m.Partition.Validate(); err != nil {
		return err
	}
	switch {
	case m.Priority < MinPriority || m.Priority > MaxPriority:
		return fmt.Errorf("priority %d is outside [%d, %d]", m.Priority, MinPriority, MaxPriority)
	case m.Delay < 0:
		return fmt.Errorf("negative delay %v", m.Delay)
	case m.Delay > MaxDelay:
		return fmt.Errorf("delay %v is over the limit of %v", m.Delay, MaxDelay)
	case m.At.After(MaxAt):
		return fmt.Errorf("time %v (At) is after %v", m.At, MaxAt)
	case m.Delay > 0 && !m.At.IsZero():
		return fmt.Errorf("both Delay and At are set")
	case !m.At.IsZero() && m.At.UnixMilli() < 0:
		return fmt.Errorf("time %v (At) is before 1970", m.At)
	case m.MaxAttempts < 0:
		return fmt.Errorf("negative MaxAttempts %d", m.MaxAttempts)
	case m.KeepOutcome < 0 || m.KeepOutcome > MaxDelay:
		return fmt.Errorf("KeepOutcome %v is outside [0, %v]", m.KeepOutcome, MaxDelay)
	case len(m.Payload) > e.cfg.MaxPayloadBytes:
		return fmt.Errorf("payload is %d bytes, the limit is %d", len(m.Payload), e.cfg.MaxPayloadBytes)
	}
	if n := len(encodeHeaders(m.Headers)); n > MaxHeaderBytes {
		return fmt.Errorf("headers are %d bytes encoded, the limit is %d", n, MaxHeaderBytes)
	}
	if m.Debounce != nil {
		return validDebounce(m)
	}
	return nil
}

// validID checks a task id, empty allowed where one will be generated; the error does not wrap
// ErrInvalid, callers do.
func validID(id string, emptyOK bool) error {
	switch {
	case id == "" && !emptyOK:
		return fmt.Errorf("empty task id")
	case len(id) > MaxIDLen:
		return fmt.Errorf("task id is %d bytes, the limit is %d", len(id), MaxIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("task id %q is not valid UTF-8", id)
	}
	return nil
}
