-- flow_publish.lua: publishes a flow (includes/flow.lua has the model and the keys). A flow whose
-- steps all live in this slot, and few enough for one call, is published in one call (mode
-- 'all'). Any other is published in steps that only the last makes visible: 'claim' at the flow's
-- home reserves the flow id; 'part' writes the steps of one slot, held; 'commit' at the home makes
-- the flow run and releases the held first steps of every slot. A publish that fails before its
-- commit, or a publisher that dies, is undone by 'abort' in each slot (engine/flows.go), so a flow
-- either runs whole or not at all.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  mode: 'all', 'claim', 'part', 'commit' or 'abort'
-- ARGV[3]  flow id
-- all:    ARGV[4] retention ms, ARGV[5] the flow's definition (JSON), ARGV[6…] steps
-- claim:  ARGV[4] retention ms, ARGV[5] definition, ARGV[6] the publish's nonce, ARGV[7…] every
--         step's name
-- part:   ARGV[4] retention ms, ARGV[5] the home's key base, ARGV[6…] steps
-- commit: ARGV[4] the nonce, ARGV[5…] the key bases of the slots a part was written to
-- abort:  ARGV[4] the nonce at the home, '' elsewhere, ARGV[5…] the ids of the steps written to
--         this slot. At the home it goes first: a flow the nonce's publish committed is left
--         whole (FINISHED), and the others are then not to be undone; a claim of another
--         publish is left alone.
-- A step is 11 values: task id, partition, priority, delay ms, at ms (0: none), max attempts (0:
-- unlimited), headers (encoded; may be empty), payload, '1' when its death holds its ordered
-- partition ('' if not), its parents as a JSON array of the edge
-- policy character followed by the parent's ref (key base .. task id; '' for none), and its
-- children's refs as a JSON array ('' for none).
-- Returns: OK; DUPLICATE when the flow id exists (all, claim); {CONFLICT, task id} when a step's
--          task id exists (all, part), {CONFLICT, flow id} when a flow of this id has its home in
--          this slot and this publish's home is another (part); ABORTED when the flow is no longer being published by this
--          nonce's publish (commit); FINISHED when the flow committed (abort at the home).

-- @include common
-- @include outcome
-- @include flow

local now = now_ms()
local now_s = int(now)
local mode, fid = ARGV[2], ARGV[3]
local STEP = 11

-- conflict returns the first step id from ARGV[first] on that exists already, if any.
local function conflict(first)
  for i = first, #ARGV, STEP do
    if redis.call('EXISTS', k_task(ARGV[i])) == 1 then return ARGV[i] end
  end
  return nil
end

-- write_step writes the step whose values start at ARGV[i], waiting for its parents, and returns
-- how many it waits for. A held step (gated) with none waits for the commit instead.
local function write_step(i, keep, home, gated)
  local id, level = ARGV[i], ARGV[i + 2]
  local kt = k_task(id)
  local f = {'d', ARGV[i + 7], 'p', ARGV[i + 1], 'c', now_s, 't', ARGV[i + 4], 'o', keep, 'F', fid, 'S', 'w', 'B', '0'}
  if level ~= '0' then f[#f + 1] = 'r'; f[#f + 1] = level end
  if ARGV[i + 3] ~= '0' then f[#f + 1] = 'y'; f[#f + 1] = ARGV[i + 3] end
  if ARGV[i + 5] ~= '0' then f[#f + 1] = 'm'; f[#f + 1] = ARGV[i + 5] end
  if ARGV[i + 6] ~= '' then f[#f + 1] = 'h'; f[#f + 1] = ARGV[i + 6] end
  if home ~= BASE then f[#f + 1] = 'H'; f[#f + 1] = home end
  if ARGV[i + 8] ~= '' then f[#f + 1] = 'j'; f[#f + 1] = '1' end
  local edges = {}
  if ARGV[i + 9] ~= '' then
    local parents = cjson.decode(ARGV[i + 9])
    for j = 1, #parents do
      local b, pid = ref_split(string.sub(parents[j], 2))
      edges[#edges + 1] = string.sub(pid, #fid + 2)
      edges[#edges + 1] = string.sub(parents[j], 1, 1) .. 'w' .. NO_VERSION .. b
    end
  end
  local waits = #edges / 2
  if gated and waits == 0 then
    edges = {GATE, 'fw' .. NO_VERSION .. BASE}
    waits = 1
    redis.call('RPUSH', k_flow_gates(fid), id)
  end
  f[#f + 1] = 'R'; f[#f + 1] = int(waits)
  redis.call('HSET', kt, unpack(f))
  if #edges > 0 then bulk('HSET', k_parents(id), nil, edges) end
  if ARGV[i + 10] ~= '' then bulk('RPUSH', k_children(id), nil, cjson.decode(ARGV[i + 10])) end
  stat('waiting', 1)
  return waits
end

-- claim writes flow fid's record at its home, in state state, with its definition, its steps
-- (names) and the nonce of the publish that claims it, unless the id exists.
local function claim(keep, def, names, state, nonce)
  local kf = k_flow(fid)
  if redis.call('EXISTS', kf) == 1 then return false end
  redis.call('HSET', kf, 'n', int(#names), 'S', state, 'c', now_s, 'k', keep, 'N', nonce)
  redis.call('SET', k_flow_def(fid), def)
  local steps = {}
  for i = 1, #names do steps[#steps + 1] = names[i]; steps[#steps + 1] = 'w' .. NO_VERSION end
  bulk('HSET', k_flow_steps(fid), nil, steps)
  return true
end

-- started counts flow fid as running from now on.
local function started()
  redis.call('ZADD', k_flows(), now_s, fid)
  stat('flows_started', 1)
  emit('flow_started', fid)
end

-- A flow of this id whose retention has ended is gone, whether or not a recovery round forgot it
-- yet (flow_prune): it is forgotten now, and the id is free.
if mode == 'all' or mode == 'claim' then flow_prune(now, 1, fid) end

local res = OK
if mode == 'all' then
  local names = {}
  for i = 6, #ARGV, STEP do names[#names + 1] = string.sub(ARGV[i], #fid + 2) end
  -- A flow that exists is a duplicate, whose steps exist too: that is looked at first.
  local id = redis.call('EXISTS', k_flow(fid)) == 0 and conflict(6)
  if id then
    res = {CONFLICT, id}
  elseif not claim(ARGV[4], ARGV[5], names, '', '') then
    res = DUPLICATE
  else
    started()
    local roots = {}
    for i = 6, #ARGV, STEP do
      if write_step(i, ARGV[4], BASE, false) == 0 then roots[#roots + 1] = ARGV[i] end
    end
    for i = 1, #roots do flow_release(roots[i], k_task(roots[i]), now) end
  end
elseif mode == 'claim' then
  local names = {}
  for i = 7, #ARGV do names[#names + 1] = ARGV[i] end
  if not claim(ARGV[4], ARGV[5], names, 'p', ARGV[6]) then
    res = DUPLICATE
  else
    redis.call('ZADD', k_flows_prep(), now_s, fid)
  end
elseif mode == 'part' then
  -- A flow of this id whose home is this slot while this publish's home is another: the id is
  -- taken (a retry of one publish has one home, so it never comes here).
  local id = ARGV[5] ~= BASE and redis.call('EXISTS', k_flow(fid)) == 1 and fid or conflict(6)
  if id then
    res = {CONFLICT, id}
  else
    for i = 6, #ARGV, STEP do write_step(i, ARGV[4], ARGV[5], true) end
  end
elseif mode == 'commit' then
  local kf = k_flow(fid)
  local f = redis.call('HMGET', kf, 'S', 'N', 'n', 'ok', 'bad', 'k')
  if f[1] ~= 'p' or f[2] ~= ARGV[4] then
    res = ABORTED
  else
    redis.call('ZREM', k_flows_prep(), fid)
    started()
    -- Steps cancelled while it was being published count already (flow_noted).
    flow_state(fid, kf, tonumber(f[3]), tonumber(f[4]) or 0, tonumber(f[5]) or 0, tonumber(f[6]), '', false, '', now)
    for i = 5, #ARGV do flow_send({b = ARGV[i], k = 'g', f = fid, from = 0}) end
  end
elseif mode == 'abort' and ARGV[4] ~= '' and redis.call('HGET', k_flow(fid), 'N') == ARGV[4] and
    redis.call('HGET', k_flow(fid), 'S') ~= 'p' then
  res = FINISHED -- it committed: it runs whole
elseif mode == 'abort' and ARGV[4] ~= '' and redis.call('EXISTS', k_flow(fid)) == 1 and
    redis.call('HGET', k_flow(fid), 'N') ~= ARGV[4] then
  res = OK -- another publish's claim (this one never claimed it): nothing of this publish is here
elseif mode == 'abort' then
  local removed = 0
  for i = 5, #ARGV do
    local id = ARGV[i]
    local kt = k_task(id)
    local f = redis.call('HMGET', kt, 'F', 'S')
    if f[1] == fid and (f[2] == 'w' or f[2] == 'c') then
      redis.call('DEL', kt, k_parents(id), k_children(id))
      removed = removed + 1
    end
  end
  redis.call('DEL', k_flow_gates(fid))
  stat('waiting', -removed)
  if ARGV[4] ~= '' then
    redis.call('DEL', k_flow(fid), k_flow_steps(fid), k_flow_def(fid))
    redis.call('ZREM', k_flows_prep(), fid)
  end
end
flow_run(now)
finish()
return res
