package pool

import (
	"slices"
	"testing"
)

// TestAckQueue seeds an ack queue with a few steps and checks who may send the queued acks: the
// acker (woken, and what its next batches are) or the riding fetchers (take).
func TestAckQueue(t *testing.T) {
	t.Parallel()
	a, b, c := &job{}, &job{}, &job{}
	for _, tc := range []struct {
		name  string
		seed  func(q *ackQueue)
		woken bool     // the acker has a wake-up pending
		taken []*job   // what a riding fetcher's take returns (checked after the acker's part)
		acker [][]*job // the acker's batches (next with max 2), when woken
		ended bool     // after its batches, the acker's next reports the queue closed and empty
	}{
		{name: "no rider: the acker sends", seed: func(q *ackQueue) { q.put(a); q.put(b) },
			woken: true, acker: [][]*job{{a, b}}},
		{name: "a rider takes the acks", seed: func(q *ackQueue) { q.ride(true); q.put(a); q.put(b) },
			taken: []*job{a, b}},
		{name: "the last rider off hands them to the acker",
			seed:  func(q *ackQueue) { q.ride(true); q.ride(true); q.put(a); q.ride(false); q.ride(false) },
			woken: true, acker: [][]*job{{a}}},
		{name: "one rider of two off keeps them", seed: func(q *ackQueue) { q.ride(true); q.ride(true); q.put(a); q.ride(false) },
			taken: []*job{a}},
		{name: "a rider off with nothing queued wakes nobody", seed: func(q *ackQueue) { q.ride(true); q.ride(false) }},
		{name: "the acker sends at most max a call",
			seed:  func(q *ackQueue) { q.put(a); q.put(b); q.put(c) },
			woken: true, acker: [][]*job{{a, b}, {c}}},
		{name: "closed: the acker sends everything, riders or not, then ends",
			seed:  func(q *ackQueue) { q.ride(true); q.put(a); q.put(b); q.put(c); q.close() },
			woken: true, acker: [][]*job{{a, b}, {c}}, ended: true},
		{name: "closed and empty: the acker ends", seed: func(q *ackQueue) { q.close() }, woken: true, ended: true},
		{name: "acks of a failed call go to the acker, riders or not",
			seed:  func(q *ackQueue) { q.ride(true); q.retry([]*job{a, b, c}) },
			woken: true, acker: [][]*job{{a, b}, {c}}},
		{name: "after the retried acks, a rider takes the acks again",
			seed:  func(q *ackQueue) { q.ride(true); q.retry([]*job{a}); q.next(2); q.put(b) },
			taken: []*job{b}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := newAckQueue()
			tc.seed(q)
			if got := len(q.signal) == 1; got != tc.woken {
				t.Fatalf("acker woken %v, want %v", got, tc.woken)
			}
			if tc.woken {
				for i, want := range tc.acker {
					got, ok := q.next(2)
					if !ok || !slices.Equal(got, want) {
						t.Fatalf("acker batch %d: %v (ok %v), want %v", i, got, ok, want)
					}
				}
				if tc.ended {
					if got, ok := q.next(2); ok || got != nil {
						t.Fatalf("acker after the queue drained: %v, %v; want nil, false", got, ok)
					}
				} else if len(q.signal) != 0 {
					t.Fatal("acker woken again with nothing left to send")
				}
			}
			if got := q.take(); !slices.Equal(got, tc.taken) {
				t.Fatalf("take: %v, want %v", got, tc.taken)
			}
			if len(q.jobs) != 0 {
				t.Fatalf("%d jobs left queued", len(q.jobs))
			}
		})
	}
}
