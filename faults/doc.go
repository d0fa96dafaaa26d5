// Package faults holds srq's fault tests: they inject real faults into real processes and check
// the recorded history (package srqtest/history) for lost, unexpected, duplicated and out-of-order
// tasks and for overlapping executions of ordered partitions. The package has no code of its own;
// its tests are the product:
//
//   - TestWorkersKilled: worker processes (this test binary, re-executed) are killed with SIGKILL
//     at random points of a 20,000-task run over ordered and unordered partitions;
//   - TestWorkflowWorkersKilled: workflow parents spawn typed children to two queues, wait for
//     them and read their results while worker processes are killed with SIGKILL at each point
//     of a workflow: after a spawn, before its wait is recorded; between a child's registration
//     with its parent and its publish; while the parent waits; while children finish as their
//     parent is delivered again; before the parent's last ack. Every parent completes with its
//     children's results and no child is created twice;
//   - TestStalledWorkerIsFenced: a worker stopped with SIGSTOP past its lease, then resumed, has
//     its late ack refused while the new holder completes the task;
//   - TestStalledWorkerStartsNoExpiredLease: a worker stopped with SIGSTOP past its lease with
//     tasks fetched ahead, then resumed, starts none of them while another worker holds them;
//     every handler start is checked against its lease in Redis (history.LeaseMiddleware);
//   - TestRedisKilledAndRestarted: redis-server (appendonly yes, appendfsync always) is killed with
//     SIGKILL and restarted on its directory while producers and workers run;
//   - TestRedisPaused: Redis stops answering (SIGSTOP) for 5 s; workers log, back off and resume;
//   - TestGracefulShutdownUnderLoad: workers stopped under load leave nothing leased;
//   - TestBadInput*: invalid publishes, configurations and engine calls get clear errors (never a
//     panic, nothing written); a payload of another type is dead-lettered without blocking its
//     ordered partition; very large calls work.
//
// Every randomised test logs its seed ("seed N"); SRQ_FAULTS_SEED=N replays it. The tests start
// redis-servers of their own (never touching another) and skip when only the embedded Redis is
// available (never under CI, where redistest requires redis-server).
//
// How the history counts a crash (see history.Check): an execution cut off by SIGKILL is not a
// completion; a task whose handler completed in a process that was then killed before its ack
// landed runs again, and that second completion is a redelivery (at-least-once), not a duplicate.
// Executions whose context had ended (lease lost) when their handler returned are fenced by srq,
// not stopped, and so are not counted as overlaps when they began before the other execution did;
// their late acks must be refused. An execution that begins while another of its ordered partition
// runs with a valid lease, or that began without a valid lease (history.Expired, where the worker
// records with history.LeaseMiddleware), is an overlap all the same.
package faults
