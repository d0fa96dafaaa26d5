-- reject.lua: returns leased tasks to pending. An unordered task comes back at now+delay; an ordered
-- one keeps its exact position and its partition is blocked until now+delay. A task whose attempts
-- reach its max attempts goes to the dead letters instead, with the reason as its last error.
--
-- KEYS: the common eight (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  dead-letter cap by count (0: none)
-- ARGV[3]  dead-letter cap by age ms (0: none)
-- ARGV[4…] 5 per task: id, fencing token, delay ms, reason, counts (1: this delivery counts as an
--          attempt; 0: it does not, as for a rate limit)
-- Returns: one code per task: OK (pending again), DEAD (dead-lettered), STALE or NOTFOUND.

-- @include common

local now = now_ms()
local maxcount, maxage = tonumber(ARGV[2]), tonumber(ARGV[3])
local res, parts, seen = {}, {}, {}
local rejected = 0

for i = 4, #ARGV, 5 do
  local id, token, delay, reason, counts = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], ARGV[i + 4]
  local kt = k_task(id)
  local f = redis.call('HMGET', kt, 'k', 'p', 'a', 'm')
  if not f[2] then
    res[#res + 1] = NOTFOUND
  elseif f[1] ~= token then
    res[#res + 1] = STALE
  else
    local p = f[2]
    local attempts, max = tonumber(f[3]) or 0, tonumber(f[4]) or 0
    unlease(id, kt, p)
    if counts == '0' then
      attempts = attempts - 1
      redis.call('HSET', kt, 'a', attempts)
    end
    if reason ~= '' then redis.call('HSET', kt, 'x', reason) end
    if max > 0 and attempts >= max then
      bury(id, kt, reason, now, maxcount, maxage)
      res[#res + 1] = DEAD
    else
      back(id, kt, p, now, delay)
      rejected = rejected + 1
      res[#res + 1] = OK
    end
    if not seen[p] then seen[p] = true; parts[#parts + 1] = p end
  end
end

for i = 1, #parts do place(parts[i], now) end
stat('rejected', rejected)
finish()
return res
