-- ack_fetch.lua: acks leased tasks and then leases the next ones to one or more consumers, in one
-- call: what ack.lua and then fetch.lua for each consumer would do one after the other. It serves
-- a consumer that finished some tasks and has room for more, and the engine's merged calls, which
-- carry the acks and fetches of several concurrent callers (engine/merge.go). A partition the ack
-- releases (an ordered one whose last leased task this was) can be served by the fetches at once.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  dedup window ms (0: none), as for ack.lua
-- ARGV[3]  f, the number of fetches (at least 1)
-- ARGV[4…] 4 per fetch, in the order they are served: consumer id, n (the most tasks to lease),
--          lease ms, maxrun (the most consecutive tasks of one ordered partition)
-- ARGV[4+4f…] 2 per task to ack: id, fencing token
-- Returns: {ack codes, fetch reply…}: one code per acked task as ack.lua returns them, then each
--          fetch's reply as fetch.lua returns it, in the order of the fetches.

-- @include common
-- @include ack_tasks
-- @include fetch_tasks

local now = now_ms()
local f = tonumber(ARGV[3])
local first_ack = 4 + 4 * f
local codes = ack_tasks(now, tonumber(ARGV[2]), first_ack, #ARGV)
local ack_ready_wakes = ready_wakes -- sleepers to wake for the partitions the ack made ready

local total = 0
for i = 1, f do total = total + tonumber(ARGV[4 * i + 1]) end
fetch_begin(now, total)
local res, short = {codes}, false
for i = 1, f do
  local a = 4 * i
  local n = tonumber(ARGV[a + 1])
  local out, taken = fetch_tasks(now, ARGV[a], n, tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]))
  if taken < n then short = true end
  res[i + 1] = out
end
fetch_end()
-- A fetch that took fewer tasks than it wanted left nothing ready: waking others for what the ack
-- made ready would only send them to find nothing. Every other wake-up stays: those for an
-- earlier due time (schedule, in either part) and those the fetches themselves counted.
if short then wakes = math.max(0, wakes - ack_ready_wakes) end
finish()
return res
