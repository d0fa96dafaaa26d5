-- extend.lua: moves the lease deadline of leased tasks to now+lease.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  lease ms
-- ARGV[3…] 2 per task: id, fencing token
-- Returns: {new deadline ms, code per task…}; a code is OK, STALE, NOTFOUND, or CANCELLED for a
--          task extended that was asked to be cancelled (cancel.lua): its holder cancels its handler.

-- @include common

local now = now_ms()
local deadline = now + tonumber(ARGV[2])
local deadline_s = int(deadline) -- formatted once, not per task (see int)
local res = {deadline}
local holders = {} -- consumers whose leases this call extended: they are alive
local moved = {} -- deadline, id pairs for one ZADD XX to inflight

local ids = {}
for i = 3, #ARGV, 2 do ids[#ids + 1] = ARGV[i] end
local leases = leases_of(ids)

for j = 1, #ids do
  local id, token, v = ids[j], ARGV[2 + 2 * j], leases[j]
  if not v then
    if redis.call('EXISTS', k_task(id)) == 1 then res[#res + 1] = STALE else res[#res + 1] = NOTFOUND end
  elseif lease_token(v) ~= token then
    res[#res + 1] = STALE
  else
    moved[#moved + 1] = deadline_s
    moved[#moved + 1] = id
    local holder = lease_consumer(v)
    if not holders[holder] then holders[holder] = true; seen_consumer(holder, now) end
    if lease_cancelled(v) then res[#res + 1] = CANCELLED else res[#res + 1] = OK end
  end
end
for i = 1, #moved, 1000 do redis.call('ZADD', K_INFLIGHT, 'XX', unpack(moved, i, math.min(i + 999, #moved))) end
return res
