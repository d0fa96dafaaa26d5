-- signal.lua: sends a signal to a task (includes/flow.lua). A task that waits for a signal of
-- that name (W), parked or pending until its wait's time (which has not come), resumes now with
-- it; any other keeps it (sg:<id>) until it waits for it, which then ends at once, or until it
-- ends. One signal of a name is kept at a time.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  the task id
-- ARGV[3]  the signal's name
-- ARGV[4]  its value
-- Returns: OK (the task resumed, or keeps the signal), DUPLICATE (it keeps a signal of that name
--          already: this one changed nothing) or NOTFOUND (no such task: it never was, or ended).
--          Then RELAY (-1) when the call wrote to the flow outbox.

-- @include common
-- @include outcome
-- @include flow

local now = now_ms()
local id, name, value = ARGV[2], ARGV[3], ARGV[4]
local kt = k_task(id)
local f = redis.call('HMGET', kt, 'p', 'S', 'W', 'r', 's', 't')
local res
-- Whether the task waits for this signal: parked for it, or pending until its wait's time, which
-- has not come (once it has, the wait ran out: its next run reads ErrSignalTimeout, and the signal
-- is kept for a later wait, as for a task that runs). An ordered task's wait time is its
-- partition's block (reject.lua's back), an unordered one's its available-at.
local waits = f[1] and f[3] == 's' .. name and f[2] ~= 'd' and redis.call('HEXISTS', K_LEASES, id) == 0
if waits and f[2] ~= 'w' then
  if is_ordered(f[1]) then
    local _, _, blocked = meta(f[1])
    waits = blocked and blocked > now
  else
    waits = f[6] and tonumber(f[6]) > now
  end
end
if not f[1] then
  res = NOTFOUND
elseif waits then
  -- It waits for this signal: it resumes now, with it, and waits no more (W becomes L, the last
  -- wait): a signal of the name sent from now on is kept for its next wait.
  redis.call('HSET', kt, 'G', name .. '\0' .. value, 'L', f[3])
  redis.call('HDEL', kt, 'W')
  local p = f[1]
  if f[2] == 'w' then
    unpark(id, kt, now)
  else
    -- Pending until its wait's time: due now. An ordered one is at its place, its partition
    -- blocked until then (reject.lua's back); an unordered one at that time.
    if is_ordered(p) then
      meta_del(p, 'b')
    else
      -- Its member: the record's sequence number padded (common.lua, next_seq), and its id.
      redis.call('ZADD', k_pending(p, f[4] or '0'), 'XX', int(now), string.rep('0', 20 - #f[5]) .. f[5] .. id)
      redis.call('HSET', kt, 't', int(now))
      head_lower(p, now)
    end
    place(p, now)
  end
  emit('signal', id, 'v', name)
  res = OK
else
  workflow_mark(id, kt)
  if redis.call('HSETNX', k_signals(id), name, value) == 1 then
    emit('signal', id, 'v', name)
    res = OK
  else
    res = DUPLICATE
  end
end
if flow_queue then flow_run(now) end
finish()
if flow_outboxed then return {res, RELAY} end
return {res}
