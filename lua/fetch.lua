-- fetch.lua: leases up to n tasks to a consumer, serving ready partitions round-robin: each turn
-- takes one task and sends the partition behind all others. An ordered partition taken here leaves
-- the round-robin, held by this consumer until all of its leased tasks end. Only when no partition
-- is ready any more does the fetch take further tasks of the ordered partitions it holds, as
-- consecutive runs of up to maxrun tasks each. Due partitions are first moved from sched to ready,
-- a bounded chunk a call.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] consumer id
-- ARGV[3] n, the most tasks to lease
-- ARGV[4] lease ms
-- ARGV[5] maxrun, the most consecutive tasks of one ordered partition
-- Returns: one flat list: now ms, lease deadline ms, ms until the next delayed work is due (-1:
--          none; 0 when tasks were leased), then 12 values per task: id, token, partition, priority,
--          attempt, max attempts, enqueued-at ms, available-at ms, payload, headers, crashes, last
--          error.

-- @include common
-- @include fetch_tasks

local now, n = now_ms(), ARGV[3] + 0
fetch_begin(now, n)
local out = fetch_tasks(now, ARGV[2], n, ARGV[4] + 0, ARGV[5] + 0)
fetch_end()
finish()
return out
