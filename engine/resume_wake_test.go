package engine

import (
	"testing"
	"time"
)

// TestResumeQueueWakesForScheduledWork: a fetch of a paused queue tells its caller of no due time
// (-1), so a fetcher blocked during the pause does not know when the delayed work scheduled then
// falls due. ResumeQueue must wake it for that work, whether it fell due during the pause or is
// still ahead, or the work waits for the end of the fetcher's blocking wait (MaxBlock, or a
// worker's PollWait) instead of being picked up at its due time.
func TestResumeQueueWakesForScheduledWork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		delay time.Duration
		dueAt bool // resume only once the task is due
	}{
		{"due during the pause", 50 * time.Millisecond, true},
		{"due after the resume", 300 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, e, c := wakeEngine(t)
			if err := e.PauseQueue(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Publish(ctx, []Message{{ID: "later", Delay: tc.delay}}); err != nil {
				t.Fatal(err)
			}
			got := fetchWaitBlocked(ctx, t, e, c)
			if tc.dueAt {
				now, err := c.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				for due := now.Add(tc.delay); ; time.Sleep(5 * time.Millisecond) {
					if now, err = c.Time(ctx).Result(); err != nil || now.After(due) {
						break
					}
				}
			}
			if err := e.ResumeQueue(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-got:
				if r.err != nil || len(r.ds) != 1 || r.ds[0].ID != "later" {
					t.Fatalf("%+v %v", r.ds, r.err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the blocked fetcher was not woken for the work scheduled during the pause")
			}
		})
	}
}
