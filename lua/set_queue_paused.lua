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
  -- Wake sleepers for the partitions that are ready, and for those whose delayed work fell due
  -- during the pause: a fetch of a paused queue reports no due time (-1), so no sleeper waits for
  -- it. When scheduled work is still ahead, wake one, whose fetch learns when it is due.
  wakes = redis.call('ZCARD', K_READY) + redis.call('ZCOUNT', K_SCHED, '-inf', int(now))
  if wakes == 0 and redis.call('EXISTS', K_SCHED) == 1 then wakes = 1 end
end
finish()
return OK
