package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/srqueue/srq/engine"
)

// What a waiting task waits for (TaskWait.For).
const (
	WaitForChildren = "children" // the children it spawned (srq.WaitChildren)
	WaitForSignal   = "signal"   // a signal (srq.WaitSignal), for at most until Until when it is set
	WaitForSleep    = "sleep"    // a time (srq.Sleep): Until
	WaitForParents  = "parents"  // a flow step's parents
)

// TaskWait is what a waiting task waits for (Task.Wait).
type TaskWait struct {
	// For is WaitForChildren, WaitForSignal, WaitForSleep or WaitForParents.
	For string `json:"for"`
	// Signal is the name of the signal it waits for.
	Signal string `json:"signal"`
	// Until is when the wait ends unless what it waits for comes first: a sleep's end, or the end
	// of a signal wait's time; zero for none. For an unordered task it is the task's available-at;
	// for an ordered one, the time until which its partition is blocked.
	Until time.Time `json:"until"`
	// ChildrenDone and ChildrenTotal count, for a wait for children, the children that ended
	// (succeeded, dead or cancelled) and all the task spawned.
	ChildrenDone  int `json:"children_done"`
	ChildrenTotal int `json:"children_total"`
}

// ChildNotEnded is the state of a child that has not ended (TaskChild.State): pending, waiting or
// running.
const ChildNotEnded = "not_ended"

// TaskChild is one child a task spawned (Task.Children).
type TaskChild struct {
	Name  string `json:"name"`
	ID    string `json:"id"`    // its task id: "<parent id>/<name>"
	Queue string `json:"queue"` // its queue
	Shard int    `json:"shard"` // the shard of that queue that holds it
	// State is what the parent last heard of it: ChildNotEnded, succeeded, dead or cancelled.
	State string `json:"state"`
	// Policy is what its failure does to a parent waiting for its children: fail (the wait ends
	// at once), continue or ignore (srq.FailDependents, ContinueDependents, IgnoreFailure).
	Policy string `json:"policy"`
}

// workflowOf fills in what a dynamic workflow keeps of task t, which engine e holds: the queue
// names of its parent and flow, its children (one round trip, for a task that keeps workflow
// keys), and what it waits for. A task pending until the end of a sleep or of a signal wait's time
// is waiting: one more round trip reads its partition, for the time an ordered partition is
// blocked until, and the server's clock. It fails with the context's or Redis's error.
func workflowOf(ctx context.Context, e *engine.Engine, t *Task) error {
	if t.Parent != "" {
		t.ParentQueue, _ = splitShardQueue(t.ParentQueue)
	}
	if t.Flow != "" {
		t.FlowQueue, _ = splitShardQueue(t.FlowQueue)
	}
	if t.HasWorkflow {
		cs, err := e.Children(ctx, t.ID)
		if err != nil {
			return err
		}
		t.Children = make([]TaskChild, len(cs))
		for i, c := range cs {
			q, shard := splitShardQueue(c.Queue)
			state := string(c.State)
			if c.State == engine.StatePending {
				state = ChildNotEnded
			}
			t.Children[i] = TaskChild{Name: c.Name, ID: c.ID, Queue: q, Shard: shard, State: state, Policy: c.Policy.String()}
		}
	}
	switch {
	case t.State == engine.StateWaiting && t.Waited == engine.WaitChildren:
		total := len(t.Children)
		t.Wait = &TaskWait{For: WaitForChildren, ChildrenTotal: total, ChildrenDone: min(total, max(0, total-t.ChildrenNotEnded))}
	case t.State == engine.StateWaiting && t.Waited == engine.WaitSignal:
		t.Wait = &TaskWait{For: WaitForSignal, Signal: t.WaitedSignal}
	case t.State == engine.StateWaiting && t.Waited == 0:
		t.Wait = &TaskWait{For: WaitForParents}
	case t.State == engine.StatePending && (t.Waited == engine.WaitSleep || t.Waited == engine.WaitSignal):
		ps, now, err := e.Partitions(ctx, t.Partition)
		if err != nil {
			return err
		}
		if len(ps) != 1 {
			return fmt.Errorf("partition %q: %d rows for one key", string(t.Partition), len(ps))
		}
		until := t.AvailableAt
		if t.Partition.IsOrdered() {
			until = ps[0].BlockedUntil
		}
		if !until.After(now) {
			return nil // its wait ended: it is pending, due
		}
		t.State = engine.StateWaiting
		t.Wait = &TaskWait{For: WaitForSleep, Until: until}
		if t.Waited == engine.WaitSignal {
			t.Wait.For, t.Wait.Signal = WaitForSignal, t.WaitedSignal
		}
	}
	return nil
}
