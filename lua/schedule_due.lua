-- schedule_due.lua: the schedules of this slot that a scheduler should fire now (engine/schedule.go
-- fires each one under WATCH), read from the due index alone: no other schedule is looked at.
--
-- KEYS: the common keys (includes/common.lua); the schedule keys are built from the key base:
--   <base>crondue ZSET schedule name -> ms at which it is next due (its next tick, or when an
--                      unfinished flow publish of it may be taken over); absent while paused
-- ARGV[1]  key base
-- ARGV[2]  the most names to return
-- Returns: {now ms, ms at which the earliest schedule not due yet is due (-1: none), name, …}: the
--          names due at or before now, earliest first.

-- @include common

local now = now_ms()
local due = BASE .. 'crondue'
local out = {now, -1}
local later = redis.call('ZRANGEBYSCORE', due, '(' .. int(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if #later > 0 then out[2] = tonumber(later[2]) end
local names = redis.call('ZRANGEBYSCORE', due, '-inf', int(now), 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #names do out[#out + 1] = names[i] end
return out
