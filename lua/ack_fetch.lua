-- ack_fetch.lua: acks leased tasks and then leases the next ones, in one call: what ack.lua and
-- fetch.lua do one after the other, for a consumer that finished some tasks and has room for more.
-- A partition the ack releases (an ordered one whose last leased task this was) can be served by
-- the fetch at once.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  dedup window ms (0: none), as for ack.lua
-- ARGV[3]  consumer id
-- ARGV[4]  n, the most tasks to lease
-- ARGV[5]  lease ms
-- ARGV[6]  maxrun, the most consecutive tasks of one ordered partition
-- ARGV[7…] 2 per task to ack: id, fencing token
-- Returns: {ack codes, fetch reply}: one code per acked task as ack.lua returns them, and the
--          fetch's reply as fetch.lua returns it.

-- @include common
-- @include ack_tasks
-- @include fetch_tasks

local now = now_ms()
local n = tonumber(ARGV[4])
local codes = ack_tasks(now, tonumber(ARGV[2]), 7, #ARGV)
local ack_ready_wakes = ready_wakes -- sleepers to wake for the partitions the ack made ready
local out = fetch_tasks(now, ARGV[3], n, tonumber(ARGV[5]), tonumber(ARGV[6]))
-- A fetch that took fewer tasks than it wanted left nothing ready: waking others for what the ack
-- made ready would only send them to find nothing. Every other wake-up stays: those for an
-- earlier due time (schedule, in either part) and those the fetch itself counted.
if #out - 3 < n then wakes = math.max(0, wakes - ack_ready_wakes) end
finish()
return {codes, out}
