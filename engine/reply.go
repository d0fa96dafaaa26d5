package engine

import (
	"fmt"
	"strconv"
)

// reply helpers turn go-redis's untyped script replies into values, failing rather than panicking
// on a shape the scripts do not produce.

func replySlice(v any) ([]any, error) {
	s, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("srq: unexpected script reply %T, want an array", v)
	}
	return s, nil
}

func replyInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("srq: unexpected script reply %q, want an integer", x)
		}
		return n, nil
	}
	return 0, fmt.Errorf("srq: unexpected script reply %T, want an integer", v)
}

func replyString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", fmt.Errorf("srq: unexpected script reply %T, want a string", v)
}

// codeRelay ends a reply of result codes when the call wrote to the queue's flow outbox.
const codeRelay = -1

// relayMarked strips the RELAY mark from a reply of want result codes, if it is there, and tells
// the engine's relay (RelayDue).
func (e *Engine) relayMarked(v any, want int) any {
	s, ok := v.([]any)
	if !ok || len(s) != want+1 {
		return v
	}
	if c, ok := s[want].(int64); ok && c == codeRelay {
		e.markRelay()
		return s[:want]
	}
	return v
}

// replyCodes turns a reply of result codes into one error per item.
func replyCodes(v any, want int) ([]int64, error) {
	s, err := replySlice(v)
	if err != nil {
		return nil, err
	}
	if len(s) != want {
		return nil, fmt.Errorf("srq: script replied %d results for %d items", len(s), want)
	}
	codes := make([]int64, len(s))
	for i, c := range s {
		if codes[i], err = replyInt(c); err != nil {
			return nil, err
		}
	}
	return codes, nil
}

func codesToErrors(codes []int64) []error {
	errs := make([]error, len(codes))
	for i, c := range codes {
		errs[i] = codeError(c)
	}
	return errs
}

// Token is a fencing token: every delivery of a task gets a new one, larger than any before it in
// the queue. Settling a task requires the token of its current delivery.
type Token uint64

// String formats t as the scripts store it: 20 digits, zero-padded. Every ack, reject and
// extend formats one per receipt, so it avoids fmt.
func (t Token) String() string {
	var b [20]byte
	n := uint64(t)
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[:])
}

func parseToken(s string) (Token, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("srq: bad fencing token %q", s)
	}
	return Token(n), nil
}
