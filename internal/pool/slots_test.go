package pool

import (
	"context"
	"testing"
)

// TestWaitSlots: a fetch that begins while the shard's other fetch is under way, holding some
// slots, takes more until it holds half of all slots, or takes every free one once the other
// returns, or stops when its context ends.
func TestWaitSlots(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		held, free  int  // slots the fetch holds, and free slots in the pool of 8
		otherEnded  bool // the other fetch has returned
		ctxEnded    bool
		want, after int // slots held when it returns, and free slots left
	}{
		{name: "half of the slots free: takes them", held: 1, free: 5, want: 4, after: 2},
		{name: "holds half already", held: 4, free: 4, want: 4, after: 4},
		{name: "the other returned: takes every free slot", held: 1, free: 2, otherEnded: true, want: 3, after: 0},
		{name: "context ended: keeps what it holds", held: 1, ctxEnded: true, want: 1, after: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &runner{slots: make(chan struct{}, 8)}
			for range tc.free {
				p.slots <- struct{}{}
			}
			other := make(chan struct{})
			if tc.otherEnded {
				close(other)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.ctxEnded {
				cancel()
			}
			if got := p.waitSlots(ctx, other, tc.held); got != tc.want || len(p.slots) != tc.after {
				t.Fatalf("holds %d with %d free, want %d with %d free", got, len(p.slots), tc.want, tc.after)
			}
		})
	}
}
