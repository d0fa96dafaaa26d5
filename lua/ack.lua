-- ack.lua: completes leased tasks: each record is deleted, and a partition whose last leased task
-- this was is released to the round-robin.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  dedup window ms (0: none): acked ids are remembered this long so a re-publish is a duplicate
-- ARGV[3…] 2 per task: id, fencing token
-- Returns: one code per task: OK, STALE (the token is not the current lease's) or NOTFOUND.

-- @include common
-- @include ack_tasks

local res = ack_tasks(now_ms(), tonumber(ARGV[2]), 3, #ARGV)
finish()
return res
