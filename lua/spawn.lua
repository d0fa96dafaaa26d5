-- spawn.lua: registers the children a running task spawns in other slots (other queues or
-- shards), before they are published there (publish.lua): a child that ends signals its parent,
-- which must know it by then. A child spawned in its parent's slot is registered by its publish.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  the parent's task id
-- ARGV[3…] 3 per child: its name, the policy of its edge ('f', 'c' or 'i'), its slot's key base
-- Returns: OK, or NOTFOUND when the parent does not exist (it ended, or was never published).

-- @include common
-- @include outcome
-- @include flow

local id = ARGV[2]
local kt = k_task(id)
if redis.call('EXISTS', kt) == 0 then return NOTFOUND end
workflow_mark(id, kt)
for i = 3, #ARGV, 3 do spawn_one(id, kt, ARGV[i], ARGV[i + 1], ARGV[i + 2]) end
return OK
