-- cancel.lua: cancels tasks. A pending or delayed task leaves its partition (the order of the rest
-- is kept) and ends as cancelled; a flow step waiting for its parents ends so too, and its
-- dependents are told (includes/flow.lua). A leased task is marked (lease_cancelled): the next
-- extension of its lease tells its holder, which cancels its handler and then settles it here
-- ('lease'), or a recovery of its expired lease cancels it. A cancelled task is not retried.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  mode: 'id', the operator's, or 'lease', the holder's settling of a task it cancelled
-- ARGV[3]  the reason recorded
-- ARGV[4…] id: task ids; lease: 2 per task, id and fencing token
-- Returns: one code per task. id: OK (cancelled), CANCELLED (leased: its holder is told), FINISHED
--          (a dead letter, or ended and its outcome kept) or NOTFOUND; lease: OK, STALE or NOTFOUND.
--          Then RELAY (-1) when the call wrote to the flow outbox.

-- @include common
-- @include outcome
-- @include flow
-- @include settle

local now = now_ms()
local mode, reason = ARGV[2], ARGV[3]
local res, parts, seen = {}, {}, {}
local cancelled = 0

local function touched(p)
  if not seen[p] then seen[p] = true; parts[#parts + 1] = p end
end

if mode == 'id' then
  for i = 4, #ARGV do
    local code, p = task_cancel(ARGV[i], reason, now)
    if p then touched(p) end
    res[#res + 1] = code
  end
else
  for i = 4, #ARGV, 2 do
    local id, token = ARGV[i], ARGV[i + 1]
    local kt = k_task(id)
    local p = redis.call('HGET', kt, 'p')
    local v = redis.call('HGET', K_LEASES, id)
    if not p then
      res[#res + 1] = NOTFOUND
    elseif not v or lease_token(v) ~= token then
      res[#res + 1] = STALE
    else
      unlease(id, kt, p)
      task_end(id, kt, 'cancelled', nil, reason, 0, now)
      redis.call('DEL', kt)
      cancelled = cancelled + 1
      touched(p)
      res[#res + 1] = OK
    end
  end
end

for i = 1, #parts do place(parts[i], now) end
stat('cancelled', cancelled)
if flow_queue then flow_run(now) end
if flow_outboxed then res[#res + 1] = RELAY end
finish()
return res
