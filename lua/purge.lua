-- purge.lua: deletes dead letters: the ids given, or (with no ids) the oldest up to a limit.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  limit when no ids are given
-- ARGV[3…] task ids (optional)
-- Returns: {number deleted, dead letters left}. A flow step deleted has failed for good: its flow
--          and its children are told (includes/flow.lua).

-- @include common
-- @include outcome
-- @include flow
-- @include settle

local ids = {}
if #ARGV > 2 then
  local seen = {}
  for i = 3, #ARGV do
    local id = ARGV[i]
    if not seen[id] and redis.call('ZSCORE', K_DEAD, id) then seen[id] = true; ids[#ids + 1] = id end
  end
else
  ids = redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[2]) - 1)
end
local now = now_ms()
for i = 1, #ids do drop(ids[i]) end
stat('purged', #ids)
if flow_queue then flow_run(now) end
finish()
return {#ids, redis.call('ZCARD', K_DEAD)}
