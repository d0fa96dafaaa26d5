-- ack_fetch.lua: acks leased tasks and then leases the next ones to one or more consumers, in one
-- call: what ack.lua and then fetch.lua for each consumer would do one after the other. It serves
-- a consumer that finished some tasks and has room for more, and the engine's merged calls, which
-- carry the acks and fetches of several concurrent callers (engine/merge.go). A partition the ack
-- releases (an ordered one whose last leased task this was) can be served by the fetches at once.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  dedup window ms (0: none), as for ack.lua
-- ARGV[3]  result retention ms, as for ack.lua
-- ARGV[4]  f, the number of fetches (at least 1)
-- ARGV[5…] 4 per fetch, in the order they are served: consumer id, n (the most tasks to lease),
--          lease ms, maxrun (the most consecutive tasks of one ordered partition)
-- ARGV[5+4f…] 3 per task to ack: id, fencing token, the handler's result ('' for none)
-- Returns: {ack codes, fetch reply…}: one code per acked task as ack.lua returns them (and RELAY
--          after them when the call wrote to the flow outbox), then each fetch's reply as
--          fetch.lua returns it, in the order of the fetches.

-- The helpers of outcomes and flows are made only when an acked task needs them (lua/cold.go).
-- @cold task_end outcome_put outcome_spec outcome_prune k_outcome k_waiter flow_end flow_note
-- @cold flow_send flow_fanout ref_split k_children k_parents flow_run flow_apply flow_signal
-- @cold flow_release flow_cancel flow_sat flow_blk flow_noted flow_bad flow_final flow_prune flow_open
-- @cold flow_state flow_forget
-- @cold k_flow k_flow_steps k_flow_def k_flow_gates pend k_outbox k_flows k_flows_end k_outs emit
-- @cold level_add head_lower

-- @include common
-- @include outcome
-- @include flow
-- @include ack_tasks
-- @include fetch_tasks

local now = now_ms()
local f = ARGV[4] + 0
local first_ack = 5 + 4 * f
local codes = ack_tasks(now, ARGV[2] + 0, ARGV[3] + 0, first_ack, #ARGV)
-- Flow steps the acks released are pending now, for the fetches below to take.
if flow_queue then flow_run(now) end
local ack_ready_wakes = ready_wakes -- sleepers to wake for the partitions the ack made ready

local total = 0
for i = 1, f do total = total + ARGV[4 * i + 2] end
fetch_begin(now, total)
local res, short = {codes}, false
for i = 1, f do
  local a = 4 * i + 1
  local n = ARGV[a + 1] + 0
  local out, taken = fetch_tasks(now, ARGV[a], n, ARGV[a + 2] + 0, ARGV[a + 3] + 0)
  if taken < n then short = true end
  res[i + 1] = out
end
fetch_end()
-- A fetch that took fewer tasks than it wanted left nothing ready: waking others for what the ack
-- made ready would only send them to find nothing. Every other wake-up stays: those for an
-- earlier due time (schedule, in either part) and those the fetches themselves counted.
if short then wakes = math.max(0, wakes - ack_ready_wakes) end
if flow_outboxed then codes[#codes + 1] = RELAY end -- the caller relays the outbox
finish()
return res
