-- flow_apply.lua: applies messages relayed from another slot's outbox (includes/flow.lua): signals
-- to this slot's steps, notes to the flows whose home is here, the rest of a fan-out or of a
-- flow's release. Each is applied once however often it comes (its version), so a relay that
-- sends a message again after a crash changes nothing.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2…] messages, as the outbox holds them (JSON)
-- Returns: OK.

-- @include common
-- @include outcome
-- @include flow

local now = now_ms()
for i = 2, #ARGV do flow_apply(cjson.decode(ARGV[i]), now) end
flow_run(now)
finish()
return OK
