-- stats.lua: the queue's counters and index sizes, without scanning anything.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- Returns: {ready partitions, scheduled partitions, leased tasks, dead letters, now ms, counter
--          name, value, …}

-- @include common

local out = {redis.call('ZCARD', K_READY), redis.call('ZCARD', K_SCHED), redis.call('ZCARD', K_INFLIGHT),
  redis.call('ZCARD', K_DEAD), now_ms()}
local counters = redis.call('HGETALL', K_STATS)
for i = 1, #counters do out[#out + 1] = counters[i] end
return out
