-- set_queue_paused.lua: pauses or resumes the whole queue. While it is paused every fetch hands out
-- nothing (one EXISTS per fetch); publishes, acks, rejects, extensions and recovery go on.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] 1: pause; 0: resume
-- Returns: OK

-- @include common

local now = now_ms()
if ARGV[2] == '1' then
  redis.call('SET', K_QPAUSE, now, 'NX')
elseif redis.call('DEL', K_QPAUSE) == 1 then
  -- Wake sleepers for the partitions that are ready.
  wakes = redis.call('ZCARD', K_READY)
end
finish()
return OK
