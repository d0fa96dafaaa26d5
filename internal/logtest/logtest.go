// Package logtest records what a component logs with log/slog, for tests that check its logs.
package logtest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Recorder is a slog.Handler that keeps every record, at every level. It is safe for concurrent
// use; use it as slog.New(&Recorder{}).
type Recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

// Enabled reports true: every level is kept.
func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps rec.
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}

// WithAttrs returns r: the attributes are not kept.
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler { return r }

// WithGroup returns r: groups are not kept.
func (r *Recorder) WithGroup(string) slog.Handler { return r }

// Len returns the number of records kept.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.recs)
}

// Find returns the records whose message contains msg.
func (r *Recorder) Find(msg string) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.recs {
		if strings.Contains(rec.Message, msg) {
			out = append(out, rec)
		}
	}
	return out
}

// Attr returns the value of rec's attribute key, or nil.
func Attr(rec slog.Record, key string) any {
	var v any
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.Any()
			return false
		}
		return true
	})
	return v
}
