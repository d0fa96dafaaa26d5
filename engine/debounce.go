package engine

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Debounce makes a publish debounced or throttled by a key (Message.Debounce): publishes of one
// key within a window make one task. See DebounceMode for what each mode does, and
// docs/lifecycle.md.
type Debounce struct {
	// Key names what is debounced, such as "reindex:user-42": at most MaxDebounceKeyLen bytes of
	// UTF-8, not empty. Publishes share a key within one queue shard: on a sharded queue, publish
	// a key always to the same partition.
	Key string
	// Window is how long a publish holds the key, in whole milliseconds: at least 1 ms, at most
	// MaxDebounceWindow.
	Window time.Duration
	// Mode is DebounceReplace (the zero value) or Throttle.
	Mode DebounceMode
}

// DebounceMode says what a later publish of a key does while an earlier one holds it.
type DebounceMode int

// The debounce modes.
const (
	// DebounceReplace (debounce): the first publish of a key adds a task available a window later;
	// a later publish, while that task is still pending and no worker has taken it yet, replaces
	// the task's payload and headers and moves its start to a window after itself, and reports
	// Replaced with the task's id. Once the task was leased (also when it is pending again for a
	// retry) or has ended, a publish adds a new task, again a window later. The task runs once, with the last payload, a window after the last
	// publish of a burst.
	DebounceReplace DebounceMode = iota
	// Throttle: the first publish of a key adds a task available now; a later publish is dropped
	// (reported Dropped, with the id of the key's task) within a window of that publish, and
	// also after it while that task has not ended (pending, delayed, leased or waiting; a dead
	// letter has ended). At most one task of the key is added per window, and none while the last
	// has not ended.
	Throttle
)

// MaxDebounceKeyLen is the longest debounce key, in bytes.
const MaxDebounceKeyLen = 512

// MaxDebounceWindow is the longest debounce window.
const MaxDebounceWindow = 7 * 24 * time.Hour

// DebounceKeep is how long a debounce key's Redis key outlives its window: it expires then, and
// no other clean-up is needed. A debounced task still pending that long after its window, with no
// publish of its key in between, is forgotten by the key: the next publish adds another task.
const DebounceKeep = 10 * time.Minute

// validDebounce checks a debounced message m; the error does not wrap ErrInvalid, callers do.
func validDebounce(m *Message) error {
	d := m.Debounce
	switch {
	case d.Key == "":
		return fmt.Errorf("empty debounce key")
	case len(d.Key) > MaxDebounceKeyLen:
		return fmt.Errorf("debounce key is %d bytes, the limit is %d", len(d.Key), MaxDebounceKeyLen)
	case !utf8.ValidString(d.Key):
		return fmt.Errorf("debounce key %q is not valid UTF-8", d.Key)
	case d.Window < time.Millisecond || d.Window > MaxDebounceWindow:
		return fmt.Errorf("debounce window %v is outside [1ms, %v]", d.Window, MaxDebounceWindow)
	case d.Window%time.Millisecond != 0:
		return fmt.Errorf("debounce window %v is not a whole number of milliseconds", d.Window)
	case d.Mode != DebounceReplace && d.Mode != Throttle:
		return fmt.Errorf("unknown debounce mode %d", d.Mode)
	case m.ID != "":
		return fmt.Errorf("a debounced publish takes no ID: its key names it, and its result the task's id")
	case m.Delay != 0 || !m.At.IsZero():
		return fmt.Errorf("a debounced publish takes no Delay or At: its window says when it runs")
	case m.Wait:
		return fmt.Errorf("a debounced publish cannot be waited for (Wait): a replaced or dropped one has no task of its own")
	case m.parent != "":
		return fmt.Errorf("a spawned child cannot be debounced")
	}
	return nil
}

// debounceOpts appends to b, messageOpts's options so far up to the policy, the policy and ref
// fields of debounced message m: its mode ('d' or 't') and "<window ms>,<key>".
func debounceOpts(b []byte, d *Debounce) []byte {
	if d.Mode == Throttle {
		b = append(b, 't', ',')
	} else {
		b = append(b, 'd', ',')
	}
	b = strconv.AppendInt(b, d.Window.Milliseconds(), 10)
	b = append(b, ',')
	return append(b, d.Key...)
}

// debounceDelay is the delay messageOpts sends for m: a debounced task waits out its window.
func debounceDelay(m *Message) time.Duration {
	if m.Debounce != nil && m.Debounce.Mode == DebounceReplace {
		return m.Debounce.Window
	}
	return m.Delay
}

// publishReply is what publish.lua answered for one message: a result code, or for a debounced
// message that added no task, whether it replaced a task or was dropped, and that task's id.
type publishReply struct {
	code              int64
	replaced, dropped bool
	id                string
}

// publishReplies parses publish.lua's reply of want messages (the relay mark taken off).
func publishReplies(v any, want int) ([]publishReply, error) {
	s, err := replySlice(v)
	if err != nil {
		return nil, err
	}
	if len(s) != want {
		return nil, fmt.Errorf("srq: publish replied %d results for %d messages", len(s), want)
	}
	out := make([]publishReply, len(s))
	for i, r := range s {
		if x, ok := r.(string); ok && len(x) > 0 && (x[0] == 'r' || x[0] == 'd') {
			out[i] = publishReply{replaced: x[0] == 'r', dropped: x[0] == 'd', id: x[1:]}
			continue
		}
		if out[i].code, err = replyInt(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DebounceInfo is what a debounced task's record says of its key (TaskInfo.Debounce,
// PendingTask.Debounce): the key and its mode.
type DebounceInfo struct {
	Key  string       `json:"key"`
	Mode DebounceMode `json:"mode"`
}

// parseDebounceField reads a record's 'b' field: the mode ('d' or 't') followed by the key.
func parseDebounceField(v string) *DebounceInfo {
	if v == "" {
		return nil
	}
	mode := DebounceReplace
	if v[0] == 't' {
		mode = Throttle
	}
	return &DebounceInfo{Key: v[1:], Mode: mode}
}

// String names the mode: "debounce" or "throttle".
func (m DebounceMode) String() string {
	if m == Throttle {
		return "throttle"
	}
	return "debounce"
}

// MarshalText writes the mode as String names it.
func (m DebounceMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads a mode as String names it; it fails for another text.
func (m *DebounceMode) UnmarshalText(b []byte) error {
	switch string(b) {
	case "debounce":
		*m = DebounceReplace
	case "throttle":
		*m = Throttle
	default:
		return fmt.Errorf("srq: unknown debounce mode %q", b)
	}
	return nil
}
