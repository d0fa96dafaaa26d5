-- schedule_list.lua: one page of the schedules of this slot, by name, with their records.
--
-- KEYS: the common keys (includes/common.lua); the schedule keys are built from the key base:
--   <base>crons    ZSET every schedule's name, score 0 (read in name order)
--   <base>cr:<name> HASH the schedule's record (engine/schedule.go names its fields)
-- ARGV[1]  key base
-- ARGV[2]  list the names after this one ('' from the first)
-- ARGV[3]  the most schedules to return
-- Returns: {now ms, {name, field, value, …}, …}

-- @include common

local from = '-'
if ARGV[2] ~= '' then from = '(' .. ARGV[2] end
local out = {now_ms()}
local names = redis.call('ZRANGEBYLEX', BASE .. 'crons', from, '+', 'LIMIT', 0, tonumber(ARGV[3]))
for i = 1, #names do
  local row = {names[i]}
  local rec = redis.call('HGETALL', BASE .. 'cr:' .. names[i])
  for j = 1, #rec do row[#row + 1] = rec[j] end
  out[#out + 1] = row
end
return out
