-- extend.lua: moves the lease deadline of leased tasks to now+lease.
--
-- KEYS: the common nine (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  lease ms
-- ARGV[3…] 2 per task: id, fencing token
-- Returns: {new deadline ms, code per task…}; a code is OK, STALE or NOTFOUND.

-- @include common

local now = now_ms()
local deadline = now + tonumber(ARGV[2])
local res = {deadline}

for i = 3, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local current = redis.call('HGET', k_task(id), 'k')
  if not current then
    if redis.call('EXISTS', k_task(id)) == 1 then res[#res + 1] = STALE else res[#res + 1] = NOTFOUND end
  elseif current ~= token then
    res[#res + 1] = STALE
  else
    redis.call('ZADD', K_INFLIGHT, 'XX', deadline, id)
    res[#res + 1] = OK
  end
end
return res
