-- ratelimit.lua: asks several rate limits at once for one unit of work, with the generic cell rate
-- algorithm (GCRA): each limit allows `limit` units per `period` ms with bursts of up to `burst`.
-- The work is allowed only if every limit allows it; then every limit is charged, else none is.
-- State is one theoretical-arrival-time per limit; its key expires once the state no longer
-- matters, only to free memory: an expired key and a key whose time has passed mean the same.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  now ms for tests, or 0 for the server's clock
-- ARGV[3…] 4 per limit: name, limit, period ms, burst
-- Returns: {1 if allowed, ms to wait until it would be allowed (0 when allowed), now ms}

-- @include common

local now = tonumber(ARGV[2])
if now == 0 then now = now_ms() end
local wait = 0
local limits = {}
for i = 3, #ARGV, 4 do
  local key = BASE .. 'rl:' .. ARGV[i]
  local limit, period, burst = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local interval = period / limit
  local tolerance = interval * (burst - 1)
  local tat = tonumber(redis.call('GET', key)) or now
  if tat < now then tat = now end
  local w = tat - tolerance - now
  if w > wait then wait = w end
  limits[#limits + 1] = {key, tat + interval, tolerance}
end
if wait > 0 then return {0, math.ceil(wait), now} end
for i = 1, #limits do
  local l = limits[i]
  redis.call('SET', l[1], string.format('%.3f', l[2]), 'PXAT', math.ceil(l[2] + l[3]) + 1)
end
return {1, 0, now}
