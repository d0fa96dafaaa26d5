-- ack.lua: completes leased tasks: each record is deleted, and a partition whose last leased task
-- this was is released to the round-robin. A task whose end is recorded leaves its outcome (its
-- result, for a waiter or a reader), and a flow step releases the steps that waited for it.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  dedup window ms (0: none): acked ids are remembered this long so a re-publish is a duplicate
-- ARGV[3]  result retention ms (0: results of tasks that do not ask for theirs to be kept are dropped)
-- ARGV[4…] 3 per task: id, fencing token, the handler's result ('' for none)
-- Returns: one code per task: OK, STALE (the token is not the current lease's) or NOTFOUND; then
--          RELAY (-1) when the call wrote to the flow outbox.
--
-- The helpers of outcomes and flows are made only when an acked task needs them (lua/cold.go).
-- @cold task_end outcome_put outcome_spec outcome_prune k_outcome k_waiter flow_end flow_note
-- @cold flow_send flow_fanout ref_split k_children k_parents flow_run flow_apply flow_signal
-- @cold flow_release flow_cancel flow_sat flow_blk flow_noted flow_bad flow_final flow_prune flow_open
-- @cold flow_state flow_forget
-- @cold k_flow k_flow_steps k_flow_def k_flow_gates pend k_outbox k_flows k_flows_end k_outs emit
-- @cold next_seq seq_load seq_floor seq_norm seq_split level_add depth_add head_lower ix_touch
--          When the call wrote to the flow outbox, the list ends with RELAY (-1) after them.

-- @include common
-- @include outcome
-- @include flow
-- @include ack_tasks

local now = now_ms()
local res = ack_tasks(now, ARGV[2] + 0, ARGV[3] + 0, 4, #ARGV)
if flow_queue then flow_run(now) end
if flow_outboxed then res[#res + 1] = RELAY end -- the caller relays the outbox
finish()
return res
