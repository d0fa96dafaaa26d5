-- set_paused.lua: pauses or resumes one partition. A paused partition hands out no work; its pending
-- and leased tasks stay as they are. A resume also releases an ordered partition held by a dead
-- letter (its tasks published to hold it).
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] partition
-- ARGV[3] 1: pause; 0: resume
-- Returns: OK

-- @include common

local p = ARGV[2]
local now = now_ms()
if ARGV[3] == '1' then
  meta_set(p, 'ps', '1')
  redis.call('ZADD', K_PPAUSE, 'NX', now, p)
else
  meta_del(p, 'ps')
  redis.call('ZREM', K_PPAUSE, p)
  -- A resume also releases a partition held by dead letters, which stay dead letters.
  meta_del(p, 'h', 'hq')
  redis.call('ZREM', k_halted(), p)
end
place(p, now)
finish()
return OK
