-- kill.lua: moves leased tasks to the dead letters now (a permanent failure), with a reason. A task
-- asked to be cancelled while leased (cancel.lua) ends cancelled instead: no dead letter, no hold.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  dead-letter cap by count (0: none)
-- ARGV[3]  dead-letter cap by age ms (0: none)
-- ARGV[4…] 3 per task: id, fencing token, reason
-- Returns: one code per task: DEAD (also for one cancelled), STALE or NOTFOUND; then RELAY (-1) when the call wrote to the
--          flow outbox.

-- @include common
-- @include outcome
-- @include flow
-- @include settle

local now = now_ms()
local maxcount, maxage = tonumber(ARGV[2]), tonumber(ARGV[3])
local res, parts, seen = {}, {}, {}

for i = 4, #ARGV, 3 do
  local id, token, reason = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local kt = k_task(id)
  local p = redis.call('HGET', kt, 'p')
  local v = redis.call('HGET', K_LEASES, id)
  if not p then
    res[#res + 1] = NOTFOUND
  elseif not v or lease_token(v) ~= token then
    res[#res + 1] = STALE
  else
    unlease(id, kt, p)
    if lease_cancelled(v) then
      cancel_leased(id, kt, now) -- asked to be cancelled: it ends so, and holds no partition
    else
      note_error(kt, reason, redis.call('HINCRBY', kt, 'a', 1), now) -- the delivery that ends here counts
      bury(id, kt, reason, now, maxcount, maxage)
    end
    if not seen[p] then seen[p] = true; parts[#parts + 1] = p end
    res[#res + 1] = DEAD
  end
end

for i = 1, #parts do place(parts[i], now) end
if flow_queue then flow_run(now) end
if flow_outboxed then res[#res + 1] = RELAY end -- the caller relays the outbox
finish()
return res
