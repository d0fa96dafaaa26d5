// Package engine is srq's byte-level core: it runs the Lua scripts in ../lua against Redis and
// knows nothing of payload types. The root package srq builds typed queues and the worker pool on
// top of it.
//
// Every call takes a context first and honours it down to the Redis call. Every time decision
// (what is due, when a lease ends) uses the Redis server's clock. Every operation that settles a
// leased task (Ack, Reject, Extend, Kill) checks the task's fencing token and refuses a stale one
// with ErrStaleToken, changing nothing.
//
// Concurrent calls of one Engine are merged into one script call when they meet (Config.MaxMerge;
// docs/data-model.md, "Merged calls"): Ack, Fetch, FetchNext, FetchWait's fetches and AckFetch
// into one, Publish calls into another. At most two calls of each kind are in flight, and the
// calls that arrive meanwhile go out together, in order of arrival (every caller's acks before
// every caller's fetch), each caller getting what its own call would have got at that point. A
// caller whose context ends before its call is sent returns its context's error, nothing of its
// call sent; once sent, a caller waits for the call's result.
//
// The scripts run as a Redis Functions library loaded once per server (FUNCTION LOAD, called with
// FCALL and FCALL_RO) or with EVALSHA (Config.Scripts, or the SRQ_SCRIPTS environment variable for
// engines that leave it unset); both come from the same files of package lua. A server that lacks
// the library or a script gets it again at the first call that misses it; a server without
// functions (Redis before 7.0, the embedded miniredis) or that refuses them runs the scripts with
// EVALSHA.
//
// This package is importable so tools can reach the queue directly, but it is not a stable API:
// prefer the root package.
package engine
