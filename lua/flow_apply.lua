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
-- The relay runs in any process, which need not know whether this queue keeps an event stream:
-- the queue's workers announced it (evcap), unless the caller said.
if not EVENTS_MAX then EVENTS_MAX = redis.call('GET', BASE .. 'evcap') or false end
for i = 2, #ARGV do flow_apply(cjson.decode(ARGV[i]), now) end
flow_run(now)
finish()
return OK
