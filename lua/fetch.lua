-- fetch.lua: leases up to n tasks to a consumer, serving ready partitions round-robin: each turn
-- takes one task and sends the partition behind all others. An ordered partition taken here leaves
-- the round-robin, held by this consumer until all of its leased tasks end. Only when no partition
-- is ready any more does the fetch take further tasks of the ordered partitions it holds, as
-- consecutive runs of up to maxrun tasks each. Due partitions are first moved from sched to ready,
-- a bounded chunk a call.
--
-- KEYS: the common eight (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] consumer id
-- ARGV[3] n, the most tasks to lease
-- ARGV[4] lease ms
-- ARGV[5] maxrun, the most consecutive tasks of one ordered partition
-- Returns: {now ms, lease deadline ms, ms until the next delayed work is due (-1: none; 0 when tasks
--          were leased), task…}; a task is {id, token, partition, priority, attempt, max attempts,
--          enqueued-at ms, available-at ms, payload, headers, crashes, last error}.

-- @include common

local consumer, n, lease, maxrun = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
local deadline = now + lease

local due = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', now, 'LIMIT', 0, math.max(64, 4 * n))
for i = 1, #due do
  redis.call('ZREM', K_SCHED, due[i])
  if not redis.call('ZSCORE', K_READY, due[i]) then ready_push(due[i]) end
end

local out = {now, deadline, 0}
local taken = 0

local function take(p, member, level, track)
  local kp = k_pending(p, level)
  redis.call('ZREM', kp, member)
  if redis.call('EXISTS', kp) == 0 then redis.call('ZREM', k_levels(p), level) end
  local id = string.sub(member, 21)
  local kt = k_task(id)
  local f = redis.call('HMGET', kt, 'a', 'm', 'c', 't', 'd', 'h', 'n', 'x')
  local attempt = (tonumber(f[1]) or 0) + 1
  local token = next_seq()
  redis.call('HSET', kt, 'a', attempt, 'k', token, 'w', consumer, 'S', 'i')
  redis.call('ZADD', K_INFLIGHT, deadline, id)
  if track then redis.call('SADD', k_held(p), id) end
  taken = taken + 1
  out[#out + 1] = {id, token, p, level, attempt, tonumber(f[2]) or 0, tonumber(f[3]) or 0,
    tonumber(f[4]) or 0, f[5] or '', f[6] or '', tonumber(f[7]) or 0, f[8] or ''}
end

-- Each turn either leases a task or moves a partition out of the head of ready, so the loop is
-- bounded by n plus the stale entries it meets; the cap only guards against a bug.
local held = {}
for _ = 1, 2 * n + 64 do
  if taken >= n then break end
  local head = redis.call('ZRANGE', K_READY, 0, 0)
  local p = head[1]
  if not p then break end
  local paused, limit, blocked = meta(p)
  if paused or (blocked and blocked > now) or is_held(p, limit) then
    place(p, now)
  else
    local member, level = pick(p, now)
    redis.call('ZREM', K_READY, p)
    if member then
      local ordered = is_ordered(p)
      take(p, member, level, ordered or limit)
      if ordered then held[#held + 1] = p end
    end
    if not (member and is_ordered(p)) then place(p, now) end
  end
end

-- Nothing else is ready: lengthen the runs of the ordered partitions this fetch holds.
for i = 1, #held do
  local p, run = held[i], 1
  while taken < n and run < maxrun do
    local member, level = pick(p, now)
    if not member then break end
    take(p, member, level, true)
    run = run + 1
  end
end

stat('pending', -taken)
-- Partitions this fetch sent to the back of ready were ready before it: nobody needs waking.
wakes = 0
if taken == 0 then
  -- Nothing is ready, so any wake-up token left is stale; drop them so sleepers sleep.
  redis.call('DEL', K_WAKE)
  local next_due = redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')
  if next_due[2] then out[3] = math.max(1, tonumber(next_due[2]) - now) else out[3] = -1 end
end
finish()
return out
