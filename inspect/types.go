package inspect

import (
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// Config configures an Inspector. Zero values mean the documented defaults.
type Config struct {
	// Prefix starts every key of the queues inspected. Default "srq" (engine.DefaultPrefix).
	Prefix string
}

// Counters are a queue's monotonic counters since it was created, summed over its shards. Rates
// are the differences between two readings divided by the time between their ServerTimes.
type Counters struct {
	Published  int64 `json:"published"`  // tasks added
	Duplicates int64 `json:"duplicates"` // publishes refused as duplicates
	Acked      int64 `json:"acked"`      // tasks completed
	Rejected   int64 `json:"rejected"`   // rejects that sent a task back to pending
	TakenBack  int64 `json:"taken_back"` // later tasks of an ordered run returned with a rejected one
	// HandedBack counts the tasks workers returned unrun, or cut off by their shutdown, without
	// using an attempt (with the later tasks of an ordered run they took back); they are not
	// counted in Rejected or TakenBack.
	HandedBack   int64 `json:"handed_back"`
	Recovered    int64 `json:"recovered"`     // expired leases taken back
	DeadLettered int64 `json:"dead_lettered"` // tasks moved to the dead letters
	Requeued     int64 `json:"requeued"`      // dead letters moved back to pending
	Purged       int64 `json:"purged"`        // dead letters deleted on request
	Trimmed      int64 `json:"trimmed"`       // dead letters deleted by the caps
	Cancelled    int64 `json:"cancelled"`     // tasks cancelled (Cancel, or a flow step whose parent failed)
	// FlowsStarted, FlowsCompleted and FlowsFailed count the flows whose home is the queue (their
	// first step's) that were published, that completed, and that failed; a failed flow that a
	// requeue brings back and that then completes is counted in both.
	FlowsStarted   int64 `json:"flows_started"`
	FlowsCompleted int64 `json:"flows_completed"`
	FlowsFailed    int64 `json:"flows_failed"`
	// Replaced counts the debounced publishes that replaced the payload of their key's pending
	// task, and Dropped the throttled publishes that were dropped (srq.PublishOpts.Debounce);
	// neither added a task.
	Replaced int64 `json:"replaced"`
	Dropped  int64 `json:"dropped"`
}

// Consumer is a consumer that fetched or extended a lease recently.
type Consumer struct {
	ID       string    `json:"id"`
	Shard    int       `json:"shard"`     // the shard it was last seen on (a consumer may serve several)
	LastSeen time.Time `json:"last_seen"` // its last fetch or lease extension, server clock
	// Live says its heartbeat is fresh: it was seen within engine.ConsumerLive (30s) of the
	// server's clock. A running worker fetches at least every PollWait (1s by default) while it has
	// a free slot and extends its leases every Lease/3 while it has none, so one not seen for that
	// long has crashed, is stalled, or runs with a Lease above 90s and every slot busy. A worker
	// whose Run returned is not listed at all: it leaves the list (engine.Engine.Leave).
	Live bool `json:"live"`
}

// Stats is a queue's state at one moment, summed over its shards; every figure comes from
// counters and indexes the scripts keep, never from a scan.
type Stats struct {
	Queue  string `json:"queue"`
	Shards int    `json:"shards"`
	// Pending counts tasks waiting, due or delayed.
	Pending int64 `json:"pending"`
	// InFlight counts tasks under lease.
	InFlight int64 `json:"in_flight"`
	// Dead counts dead letters.
	Dead int64 `json:"dead"`
	// PendingPartitions counts partitions holding pending tasks.
	PendingPartitions int64 `json:"pending_partitions"`
	// ReadyPartitions counts partitions that can hand out work now.
	ReadyPartitions int64 `json:"ready_partitions"`
	// ScheduledPartitions counts partitions whose next work is delayed, or blocked by a delayed
	// reject (ordered partitions).
	ScheduledPartitions int64 `json:"scheduled_partitions"`
	// BlockedPartitions counts partitions with pending tasks that are neither ready nor scheduled:
	// held by a lease (ordered), at their concurrency limit, or paused.
	BlockedPartitions int64 `json:"blocked_partitions"`
	// PausedPartitions counts paused partitions, with or without pending tasks.
	PausedPartitions int64 `json:"paused_partitions"`
	// HeldPartitions counts ordered partitions held by a dead letter (srq.HoldPartition): they hand
	// out nothing until the dead letter is requeued or deleted, or the partition resumed.
	HeldPartitions int64 `json:"held_partitions"`
	// Waiting counts flow steps waiting for their parents and tasks parked for their children or a
	// signal without a timeout; they are not counted in Pending.
	Waiting int64 `json:"waiting"`
	// RunningFlows counts the flows whose home is the queue with steps still to run; EndedFlows
	// those whose steps all ended, kept for their retention (Flows lists both).
	RunningFlows int64 `json:"running_flows"`
	EndedFlows   int64 `json:"ended_flows"`
	// Paused says the whole queue is paused (PauseQueue): fetches hand out nothing.
	Paused bool `json:"paused"`
	// PausedShards counts the shards that are paused; a queue paused while a shard was unreachable
	// may be paused only in part.
	PausedShards int `json:"paused_shards"`
	Counters
	// Consumers are the most recently seen consumers, newest first, at most 100 per shard; ones not
	// seen for an hour are forgotten.
	Consumers []Consumer `json:"consumers"`
	// ConsumerCount counts the consumers seen within the last hour (up to 10,000 per shard). Over
	// several shards a consumer that served more than one counts once: the count is exact while
	// each shard has seen at most 100, and above that the largest of the shards' counts and the
	// number of distinct consumers listed, which is exact when every consumer serves every shard,
	// as workers do.
	ConsumerCount int64 `json:"consumer_count"`
	// LiveConsumers counts the listed consumers that are live (Consumer.Live): a queue with none
	// has no worker running, whether or not it is paused.
	LiveConsumers int64 `json:"live_consumers"`
	// ServerTime is the Redis server's clock when the stats were read (the latest over the shards).
	ServerTime time.Time `json:"server_time"`
}

// PartitionOrder says which partitions Partitions lists first.
type PartitionOrder int

// The orders of PartitionQuery.By.
const (
	// ByDepth lists the partitions with the most pending tasks first.
	ByDepth PartitionOrder = iota
	// ByAge lists the partitions whose earliest pending task has been available longest first
	// (oldest head available-at first; delayed heads come last).
	ByAge
	// ByPaused lists paused partitions, longest paused first.
	ByPaused
	// ByHeld lists ordered partitions held by a dead letter, longest held first.
	ByHeld
)

// String returns "depth", "age", "paused" or "held".
func (o PartitionOrder) String() string {
	switch o {
	case ByDepth:
		return "depth"
	case ByAge:
		return "age"
	case ByPaused:
		return "paused"
	case ByHeld:
		return "held"
	}
	return "PartitionOrder(" + itoa(int(o)) + ")"
}

// PartitionQuery selects the partitions Partitions returns.
type PartitionQuery struct {
	By PartitionOrder
	// Limit is the most partitions returned. Default 20; at most MaxLimit.
	Limit int
}

// MaxLimit is the largest page size of Partitions, InFlight and DeadLetters.
const MaxLimit = 500

// PartitionState is where a partition stands in the round-robin.
type PartitionState string

// The states of a partition.
const (
	PartitionReady     PartitionState = "ready"     // can hand out work now
	PartitionScheduled PartitionState = "scheduled" // its next work is delayed, or it is blocked until a time
	PartitionPaused    PartitionState = "paused"    // paused: hands out nothing until resumed
	PartitionHeld      PartitionState = "held"      // pending work, but held by a lease (ordered) or at its limit
	PartitionEmpty     PartitionState = "empty"     // nothing pending
	// PartitionHeldByDeadLetter is an ordered partition held by a dead letter (Partition.HeldBy):
	// it hands out nothing until the dead letter is requeued or deleted, or the partition resumed.
	PartitionHeldByDeadLetter PartitionState = "held_by_dead_letter"
)

// Partition is one partition as the Inspector shows it.
type Partition struct {
	Key   partition.Key `json:"key"`
	Shard int           `json:"shard"`
	// Pending counts its pending tasks (due or delayed).
	Pending int64 `json:"pending"`
	// HeadAvailableAt is when its earliest pending task became (or becomes) available; zero when
	// nothing is pending.
	HeadAvailableAt time.Time      `json:"head_available_at"`
	State           PartitionState `json:"state"`
	Paused          bool           `json:"paused"`
	// PausedAt is when it was paused; zero when not paused.
	PausedAt time.Time `json:"paused_at"`
	// Limit is its concurrency limit (unordered partitions); 0 means none.
	Limit int `json:"limit"`
	// Leased counts its leases that hold it (ordered) or count against its limit.
	Leased int64 `json:"leased"`
	// BlockedUntil is when a delayed reject of an ordered partition stops blocking it; zero when
	// not blocked.
	BlockedUntil time.Time `json:"blocked_until"`
	// NextDue is when a scheduled partition can next hand out work; zero unless scheduled.
	NextDue time.Time `json:"next_due"`
	// HeldBy is the id of the dead letter that holds this ordered partition, "" when none;
	// HeldError is that dead letter's last error. ResumePartition releases the partition;
	// RequeueDead or PurgeDead of the letter does too.
	HeldBy    string `json:"held_by"`
	HeldError string `json:"held_error"`
}

// Page selects a slice of a list.
type Page struct {
	Offset int
	// Limit is the most items returned. Default 50; at most MaxLimit. Offset+Limit is at most
	// MaxOffset.
	Limit int
}

// MaxOffset bounds Page.Offset+Page.Limit: deeper pages cost more on every shard.
const MaxOffset = 10_000

// InFlightTask is a leased task, as InFlight lists it.
type InFlightTask struct {
	ID          string        `json:"id"`
	Shard       int           `json:"shard"`
	Partition   partition.Key `json:"partition"`
	Priority    int           `json:"priority"`
	Attempt     int           `json:"attempt"`      // this delivery's attempt, from 1
	MaxAttempts int           `json:"max_attempts"` // 0: unlimited
	Crashes     int           `json:"crashes"`
	Consumer    string        `json:"consumer"`
	// LeaseDeadline is when the lease ends unless extended, on the server's clock; a deadline in
	// the past means the lease expired and recovery has not taken it back yet.
	LeaseDeadline time.Time `json:"lease_deadline"`
	EnqueuedAt    time.Time `json:"enqueued_at"`
}

// DeadQuery selects dead letters, newest first.
type DeadQuery struct {
	// Partition keeps only the letters of this partition when not empty. It is the partition's
	// key as stored, as DeadLetter.Partition shows it: an ordered partition's key starts with "!"
	// (user "42" published with PublishOpts.Ordered is partition "!42").
	Partition string
	// BasePartition keeps only the letters of the base partition (the empty key), which an empty
	// Partition cannot say. It may not be combined with a non-empty Partition.
	BasePartition bool
	// ErrorContains keeps only the letters whose last error contains it, ignoring ASCII case.
	ErrorContains string
	// Cursor continues a listing where DeadPage.Next left it; empty starts at the newest letter.
	// A cursor is opaque and belongs to the query and queue that returned it.
	Cursor string
	// Limit is the most letters returned. Default 50; at most MaxLimit.
	Limit int
	// Window is the most letters one call looks at per shard when filtering (default 1000, at most
	// MaxDeadWindow): a page may be short, or empty, with a Next to continue from.
	Window int
}

// DeadLetter is a task that failed for good.
type DeadLetter struct {
	ID          string            `json:"id"`
	Shard       int               `json:"shard"`
	Partition   partition.Key     `json:"partition"`
	Priority    int               `json:"priority"`
	Attempts    int               `json:"attempts"`
	MaxAttempts int               `json:"max_attempts"`
	Crashes     int               `json:"crashes"`
	Error       string            `json:"error"` // the last error
	DiedAt      time.Time         `json:"died_at"`
	EnqueuedAt  time.Time         `json:"enqueued_at"`
	Payload     []byte            `json:"payload"`
	Headers     map[string]string `json:"headers"`
}

// DeadPage is one page of dead letters, newest first.
type DeadPage struct {
	Letters []DeadLetter `json:"letters"`
	// Next continues the listing (DeadQuery.Cursor); empty when every letter was looked at.
	Next string `json:"next"`
	// Total counts the queue's dead letters, filtered or not.
	Total int64 `json:"total"`
}

// DeadSelector names the dead letters RequeueDead and PurgeDead act on: exactly one of IDs, Filter
// and All.
type DeadSelector struct {
	IDs []string
	// Filter selects by partition and error; its Cursor, Limit and Window are ignored: every
	// matching letter is acted on.
	Filter *DeadQuery
	All    bool
}

// Task is one task's record, with the shard that holds it and what a dynamic workflow keeps of
// it. Its State is engine.StateWaiting also for a task pending until the end of a sleep or of a
// signal wait's time (Wait says until when); its ParentQueue and FlowQueue name queues, as the
// Inspector's calls take them, not shards.
type Task struct {
	engine.TaskInfo
	Shard int `json:"shard"`
	// Wait is what the task waits for while it waits: its children, a signal, a time, or a flow
	// step's parents; nil when it does not wait.
	Wait *TaskWait `json:"wait"`
	// Children are the children the task spawned, sorted by name; nil for none.
	Children []TaskChild `json:"children"`
}
