-- outcome.lua: what became of a task: its outcome when it ended and the outcome is kept
-- (includes/outcome.lua), else its state while it has not ended.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] task id
-- Returns: NOTFOUND (no such task, or its outcome was not kept or is past its retention), or
--          {state, ended ms, result, error}: state is 'ok', 'dead' or 'cancelled' for a task that
--          ended, or, for one that has not, 'pending', 'leased', 'waiting' or 'cancelled' (a flow
--          step held by a failed parent) with ended 0 and, for the last, why as the error. A dead
--          letter is 'dead' with its last error whether or not its outcome is kept.

-- @include common
-- @include outcome

local id = ARGV[2]
local rec = redis.call('HMGET', k_task(id), 'S', 'p', 'x')
if rec[2] and rec[1] ~= 'd' then
  if rec[1] == 'w' then return {'waiting', 0, '', ''} end
  if rec[1] == 'c' then return {'cancelled', 0, '', rec[3] or ''} end
  if redis.call('HEXISTS', K_LEASES, id) == 1 then return {'leased', 0, '', ''} end
  return {'pending', 0, '', ''}
end
local o = redis.call('HMGET', k_outcome(id), 's', 'f', 'v', 'e')
if o[1] then return {o[1], tonumber(o[2]), o[3] or '', o[4] or ''} end
if rec[2] then return {'dead', 0, '', rec[3] or ''} end
return NOTFOUND
