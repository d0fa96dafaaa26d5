package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Worker is the STRING holding the record a running worker keeps of itself as consumer
// (WorkerRecord): the marker wk: and the consumer id, which ends the key.
func (k Keys) Worker(consumer string) string { return k.base + "wk:" + consumer }

// WorkerRecordTTL is how long a worker's record outlives its last write: the hour for which the
// consumers set keeps a consumer it no longer sees, so the record of a worker that died goes about
// when its consumer does.
const WorkerRecordTTL = time.Hour

// WorkerRecord is what a running worker (srq.Worker) tells operators about itself, in each shard
// of each queue it serves: written when its Run starts, written again when its count of running
// handlers changes (at most once per lease extension period) or every few minutes, and deleted
// when Run returns; one that is not written again expires after WorkerRecordTTL.
type WorkerRecord struct {
	Host        string
	PID         int
	Queues      []string // the queues the worker serves
	Concurrency int
	Started     time.Time // when its Run started, on the worker's clock
	// Running counts its handlers running when the record was written (a batch handler counts
	// once).
	Running int
	// Batches counts its batch handlers running (srq.BatchHandler) when the record was written, and
	// BatchTasks the tasks in them; 0 for a worker without batch queues.
	Batches, BatchTasks int
	Updated             time.Time // when the record was written, on the worker's clock
}

// workerWire is a WorkerRecord as the wk: key holds it, JSON with short names and ms times.
type workerWire struct {
	Host        string   `json:"h"`
	PID         int      `json:"i"`
	Queues      []string `json:"q"`
	Concurrency int      `json:"n"`
	Running     int      `json:"r"`
	Batches     int      `json:"b,omitempty"`
	BatchTasks  int      `json:"bt,omitempty"`
	Started     int64    `json:"s"`
	Updated     int64    `json:"u"`
}

// PutWorker writes consumer's record, which expires after WorkerRecordTTL unless written again:
// one SET. It fails with ErrInvalid for an empty consumer id, and with the context's or Redis's
// error.
func (e *Engine) PutWorker(ctx context.Context, consumer string, rec WorkerRecord) error {
	if consumer == "" {
		return invalidf("empty consumer id")
	}
	b, err := json.Marshal(workerWire{Host: rec.Host, PID: rec.PID, Queues: rec.Queues, Concurrency: rec.Concurrency,
		Running: rec.Running, Batches: rec.Batches, BatchTasks: rec.BatchTasks, Started: rec.Started.UnixMilli(), Updated: rec.Updated.UnixMilli()})
	if err != nil {
		return fmt.Errorf("srq: worker record: %w", err)
	}
	if err := e.client.Set(ctx, e.keys.Worker(consumer), b, WorkerRecordTTL).Err(); err != nil {
		return fmt.Errorf("srq: write the record of worker %q: %w", consumer, err)
	}
	return nil
}

// DeleteWorker deletes consumer's record: one DEL. Deleting a record that does not exist is no
// error. It fails with the context's or Redis's error.
func (e *Engine) DeleteWorker(ctx context.Context, consumer string) error {
	if err := e.client.Del(ctx, e.keys.Worker(consumer)).Err(); err != nil {
		return fmt.Errorf("srq: delete the record of worker %q: %w", consumer, err)
	}
	return nil
}

// Workers reads the records of consumers, in one MGET: nil where a consumer has none (a consumer
// that is not an srq.Worker, or one of a version that kept none) or one that does not parse. It
// fails with ErrInvalid for more than MaxInspectPage consumers, and with the context's or Redis's
// error.
func (e *Engine) Workers(ctx context.Context, consumers []string) ([]*WorkerRecord, error) {
	if len(consumers) > MaxInspectPage {
		return nil, invalidf("%d consumers; at most %d per call", len(consumers), MaxInspectPage)
	}
	out := make([]*WorkerRecord, len(consumers))
	if len(consumers) == 0 {
		return out, nil
	}
	keys := make([]string, len(consumers))
	for i, c := range consumers {
		keys[i] = e.keys.Worker(c)
	}
	vals, err := e.client.MGet(ctx, keys...).Result()
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("srq: worker records: %w", err)
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		var w workerWire
		if json.Unmarshal([]byte(s), &w) != nil {
			continue
		}
		out[i] = &WorkerRecord{Host: w.Host, PID: w.PID, Queues: w.Queues, Concurrency: w.Concurrency, Running: w.Running,
			Batches: w.Batches, BatchTasks: w.BatchTasks, Started: msTime(w.Started), Updated: msTime(w.Updated)}
	}
	return out, nil
}
