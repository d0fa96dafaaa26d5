-- outcome.lua: what became of tasks: the outcome of each that ended and whose outcome is kept
-- (includes/outcome.lua), else the state it is in while it has not ended.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  '1': return each result's length instead of the result
-- ARGV[3…] task ids
-- Returns: per id, NOTFOUND (no such task, or its outcome was not kept or is past its retention),
--          or {state, ended ms, result, error}: state is 'ok', 'dead' or 'cancelled' for a task
--          that ended, or, for one that has not, 'pending', 'leased', 'waiting' or 'cancelled' (a
--          flow step held by a failed parent), with ended 0 and, for the last, why as the error. A
--          dead letter is 'dead' with its last error whether or not its outcome is kept.

-- @include common
-- @include outcome

local now = now_ms()
local res = {}
for i = 3, #ARGV do
  local o = outcome_of(ARGV[i], now)
  if not o then
    o = NOTFOUND
  elseif ARGV[2] == '1' then
    o[3] = #o[3]
  end
  res[#res + 1] = o
end
return res
