-- extend.lua: moves the lease deadline of leased tasks to now+lease.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  lease ms
-- ARGV[3…] 2 per task: id, fencing token
-- Returns: {new deadline ms, code per task…}; a code is OK, STALE or NOTFOUND.

-- @include common

local now = now_ms()
local deadline = now + tonumber(ARGV[2])
local deadline_s = int(deadline) -- formatted once, not per task (see int)
local res = {deadline}
local holders = {} -- consumers whose leases this call extended: they are alive

for i = 3, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local f = redis.call('HMGET', k_task(id), 'k', 'w')
  local current = f[1]
  if not current then
    if redis.call('EXISTS', k_task(id)) == 1 then res[#res + 1] = STALE else res[#res + 1] = NOTFOUND end
  elseif current ~= token then
    res[#res + 1] = STALE
  else
    redis.call('ZADD', K_INFLIGHT, 'XX', deadline_s, id)
    if f[2] and not holders[f[2]] then holders[f[2]] = true; seen_consumer(f[2], now) end
    res[#res + 1] = OK
  end
end
return res
