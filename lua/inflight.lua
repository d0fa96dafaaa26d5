-- inflight.lua: one page of leased tasks, earliest lease deadline first. Read-only; no scan.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] offset
-- ARGV[3] count
-- Returns: {leased tasks, task…}; a task is {id, lease deadline ms, partition, priority, attempt,
--          max attempts, consumer, enqueued-at ms, crashes}.

-- @include common

local offset, count = tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {redis.call('ZCARD', K_INFLIGHT)}
local page = redis.call('ZRANGE', K_INFLIGHT, offset, offset + count - 1, 'WITHSCORES')
for i = 1, #page, 2 do
  local id = page[i]
  local f = redis.call('HMGET', k_task(id), 'p', 'r', 'a', 'm', 'c', 'n')
  local lease = redis.call('HGET', K_LEASES, id)
  -- The record's attempts count the deliveries that ended; the current one is the next.
  out[#out + 1] = {id, tonumber(page[i + 1]), f[1] or '', f[2] or '0', (tonumber(f[3]) or 0) + 1, tonumber(f[4]) or 0,
    lease and lease_consumer(lease) or '', tonumber(f[5]) or 0, tonumber(f[6]) or 0}
end
return out
