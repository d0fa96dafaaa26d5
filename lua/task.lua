-- task.lua: one task's record by id, with its lease deadline when leased.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] task id
-- Returns: NOTFOUND, or {lease deadline ms (0: not leased), field, value, …}

-- @include common

local kt = k_task(ARGV[2])
local fields = redis.call('HGETALL', kt)
if #fields == 0 then return NOTFOUND end
local out = {tonumber(redis.call('ZSCORE', K_INFLIGHT, ARGV[2])) or 0}
for i = 1, #fields do out[#out + 1] = fields[i] end
return out
