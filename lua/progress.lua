-- progress.lua: records a running task's progress: the value its handler reports, kept in its
-- record (P) and told on the event stream, for whoever watches it.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  the task id
-- ARGV[3]  the fencing token of its delivery
-- ARGV[4]  the progress value
-- Returns: OK, STALE (the delivery's lease is no longer held) or NOTFOUND.

-- @include common

local id, token, value = ARGV[2], ARGV[3], ARGV[4]
local kt = k_task(id)
if redis.call('EXISTS', kt) == 0 then return NOTFOUND end
local v = redis.call('HGET', K_LEASES, id)
if not v or lease_token(v) ~= token then return STALE end
redis.call('HSET', kt, 'P', value)
emit('progress', id, 'v', value)
return OK
