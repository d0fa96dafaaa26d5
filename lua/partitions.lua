-- partitions.lua: the first partitions of one index, or the partitions named, each described.
-- Read-only; no scan.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  'depth' (most pending first), 'age' (earliest head first), 'paused' (longest paused
--          first), 'held' (held by a dead letter, longest held first) or 'keys' (the partitions in
--          ARGV[4…])
-- ARGV[3]  the most partitions to list
-- ARGV[4…] partitions, for 'keys'
-- Returns: {now ms, partition…}; a partition is {key, pending, head available-at ms (0: none),
--          paused at ms (0: not paused), limit (0: none), blocked-until ms (0: none), 1 if in ready,
--          due ms if in sched (0: not), leases held, the id of the dead letter that holds it ('': none),
--          that dead letter's error}.

-- @include common

local by, limit = ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local keys = {}
if by == 'keys' then
  for i = 4, math.min(#ARGV, 3 + limit) do keys[#keys + 1] = ARGV[i] end
else
  local rows
  if by == 'depth' then
    rows = redis.call('ZREVRANGE', K_DEPTH, 0, limit - 1)
  elseif by == 'age' then
    rows = redis.call('ZRANGE', K_HEADS, 0, limit - 1)
  elseif by == 'held' then
    rows = redis.call('ZRANGE', k_halted(), 0, limit - 1)
  else
    rows = redis.call('ZRANGE', K_PPAUSE, 0, limit - 1)
  end
  keys = rows
end

local out = {now}
for i = 1, #keys do
  local p = keys[i]
  local paused, lim, blocked = meta(p)
  local leased = 0
  if is_ordered(p) or lim then leased = redis.call('SCARD', k_held(p)) end
  local pausedAt, held, why = 0, '', ''
  if paused then
    held = redis.call('HGET', k_meta(p), 'h') or ''
    if held ~= '' then why = redis.call('HGET', k_task(held), 'x') or '' end
    if redis.call('HGET', k_meta(p), 'ps') then pausedAt = tonumber(redis.call('ZSCORE', K_PPAUSE, p)) or 1 end
  end
  out[#out + 1] = {p, tonumber(redis.call('ZSCORE', K_DEPTH, p)) or 0, tonumber(redis.call('ZSCORE', K_HEADS, p)) or 0,
    pausedAt, lim or 0, blocked or 0, redis.call('ZSCORE', K_READY, p) and 1 or 0,
    tonumber(redis.call('ZSCORE', K_SCHED, p)) or 0, leased, held, why}
end
return out
