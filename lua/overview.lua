-- overview.lua: what an operator sees first: index sizes, counters, whether the queue is paused, and
-- the most recently seen consumers. Read-only; no scan.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] the most consumers to list, newest first
-- Returns: {ready partitions, scheduled partitions, leased tasks, dead letters, now ms, partitions
--          with pending tasks, paused partitions, ms the queue was paused (0: not paused), consumers
--          seen, {consumer, last seen ms, …}, counter name, value, …}

-- @include common

local now = now_ms()
local consumers = redis.call('ZREVRANGEBYSCORE', K_CONSUMERS, '+inf', now - CONSUMERS_KEEP_MS, 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[2]))
local out = {redis.call('ZCARD', K_READY), redis.call('ZCARD', K_SCHED), redis.call('ZCARD', K_INFLIGHT),
  redis.call('ZCARD', K_DEAD), now, redis.call('ZCARD', K_DEPTH), redis.call('ZCARD', K_PPAUSE),
  tonumber(redis.call('GET', K_QPAUSE)) or 0,
  redis.call('ZCOUNT', K_CONSUMERS, now - CONSUMERS_KEEP_MS, '+inf'), consumers}
local counters = redis.call('HGETALL', K_STATS)
for i = 1, #counters do out[#out + 1] = counters[i] end
return out
