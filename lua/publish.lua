-- publish.lua: adds a batch of tasks; an id that still exists (pending, leased or dead), or that was
-- acked within the dedup window, is a duplicate and changes nothing.
--
-- The tasks come in batches, one per caller of a merged call (engine/merge.go), each added whole or
-- not at all: a batch that would give a partition more than MAX_LEVELS non-zero priorities pending
-- is refused, and the batches after it are looked at as if it had not been sent. A call of usual
-- tasks only (priority 0, available now, no headers, no option but one max attempts for all) is
-- publish_usual.lua's instead.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  dedup window ms (0: none)
-- ARGV[3]  b, the number of batches
-- ARGV[4…3+b] the number of tasks in each batch, in order
-- ARGV[4+b…] 5 per task: id, partition, payload, headers (encoded; may be empty), and its other
--          options, '' for the usual task (priority 0, available now, unlimited attempts, no
--          outcome kept, no hold), else "priority,delay ms,at ms (0: use delay),max attempts (0:
--          unlimited),outcome,hold": outcome is how its end is recorded ('' for not: else the
--          retention ms of its outcome, followed by 'w' when a caller may wait for it;
--          includes/outcome.lua), hold '1' when its death holds its ordered partition ('' if not),
--          and, for a child a running task spawns (includes/flow.lua), the policy of its edge ('f',
--          'c' or 'i'; '' for none) and its parent's ref (its key base and id; '' for none): a
--          child is a duplicate also when its outcome is kept (it ended), and is refused
--          (NOTFOUND) when its parent lives here and is gone; a parent living here registers it
--          in the same call (spawn_one), one elsewhere has done so first (spawn.lua); for a
--          debounced task (includes/debounce.lua) the policy is its mode ('d' debounce, 't'
--          throttle) and the ref "<window ms>,<key>"
-- Returns: one code per task: OK (added), DUPLICATE, or NOTFOUND (a child whose parent is gone);
--          for a debounced task not added, a string: 'r' and the id of the task it replaced, or
--          'd' and the id of the task that made it drop;
--          for a refused batch, LEVELS for the task that would pass the cap and REFUSED for its
--          other tasks. Then RELAY (-1) when the call wrote to the flow outbox (a duplicate child
--          telling its parent in another slot what became of it).
--
-- Helpers that only a publish with priorities, a delay to an empty partition, controls or a dedup
-- window calls are made at their first use (lua/cold.go): a single publish runs 4 % fewer
-- instructions without them.
-- @cold k_meta k_levels seq_split to_skiplist meta_del is_held levels_of level_add earliest
-- @cold schedule place prune_dedup emit place_new
-- A child's publish (a spawn) uses helpers of flow.lua and outcome.lua that no other publish
-- does: all of them are made at their first use.
-- @cold k_outbox k_flows k_flows_end k_flows_prep k_children k_parents k_flow k_flow_steps
-- @cold k_flow_def k_flow_gates k_signals k_kids ref_split flow_send flow_note flow_fanout flow_end
-- @cold children_end task_end flow_release flow_cancel workflow_mark spawn_one park unpark
-- @cold child_done child_failed child_signal flow_sat flow_blk flow_signal flow_prune flow_forget
-- @cold flow_bad flow_final flow_state flow_noted flow_open cancel_mark task_cancel flow_apply
-- @cold flow_run k_outs k_outcome k_waiter outcome_spec outcome_prune outcome_put outcome_of
-- A debounced publish's helpers (debounce.lua), and what only they call, are made at their first use.
-- @cold debounce_find head_is

-- @include common
-- @include enqueue
-- @include outcome
-- @include flow
-- @include debounce

local now = now_ms()
local now_s = int(now)
local window = ARGV[2] + 0
local batches = ARGV[3] + 0
local TASK = 5 -- values per task
local first_task = 4 + batches
seq_reserve((#ARGV - first_task + 1) / TASK)

-- task_opts unpacks a task's options (ARGV, above): priority level (a string), delay ms, at ms,
-- max attempts (a string), outcome spec, hold.
local function task_opts(o)
  if o == '' then return '0', 0, 0, '0', '', '', '', '' end
  local level, delay, at, max, outcome, hold, pol, ref =
    string.match(o, '^(-?%d+),(%d+),(%d+),(%d+),([^,]*),(1?),([fcidt]?),(.*)$')
  return level, delay + 0, at + 0, max, outcome, hold, pol, ref
end

-- spawned makes task id (record kt) the child of the task ref names: K, F and H on its record, which
-- its end signals (task_end).
local function spawned(kt, ref)
  local pbase, pid = ref_split(ref)
  if pbase ~= BASE then
    redis.call('HSET', kt, 'K', '2', 'F', pid, 'H', pbase)
  else
    redis.call('HSET', kt, 'K', '2', 'F', pid)
  end
end

-- task_level is the priority level of a task whose options are o.
local function task_level(o)
  if o == '' then return '0' end
  return string.match(o, '^(-?%d+),')
end

-- task_record writes task id's record (kt) at partition p, sequence number s, available at t_s,
-- with payload d, headers h and the fields of its options that are not their defaults (as
-- record_usual, no available-at when it is the publish time).
local function task_record(kt, p, s, t_s, d, h, level, max, outcome, hold)
  if level == '0' and h == '' and outcome == '' and hold == '' then
    record_usual(kt, d, p, s, t_s, now_s, max) -- builds no table
    return
  end
  local extra = {}
  if t_s ~= now_s then extra[#extra + 1] = 't'; extra[#extra + 1] = t_s end
  if level ~= '0' then extra[#extra + 1] = 'r'; extra[#extra + 1] = level end
  if max ~= '0' then extra[#extra + 1] = 'm'; extra[#extra + 1] = max end
  if h ~= '' then extra[#extra + 1] = 'h'; extra[#extra + 1] = h end
  if outcome ~= '' then extra[#extra + 1] = 'o'; extra[#extra + 1] = outcome end
  if hold ~= '' then extra[#extra + 1] = 'j'; extra[#extra + 1] = '1' end
  redis.call('HSET', kt, 'd', d, 'p', p, 's', s, 'c', now_s, unpack(extra))
end

-- available_at is when a task with delay ms and at ms (0: none) is available, as a number and as
-- the string Redis is sent.
local function available_at(delay, at)
  if at > 0 then return at, int(at) end
  if delay == 0 then return now, now_s end
  return now + delay, int(now + delay)
end

-- child_refused says why child id (record kt) of the task ref names may not be written: NOTFOUND
-- when its parent lives here and is gone (else it registers the child with it: spawn_one; one
-- elsewhere registered it before this call), DUPLICATE when it was spawned before; nil for a new
-- child. A child spawned before tells its parent what became of it, as if it had just ended, unless
-- it has not ended (its end will): a parent that runs again, or is published again with its id,
-- counts it and reads it.
local parents_here = nil -- parent id -> true once child_refused found it and marked it
local function child_refused(id, kt, pol, ref)
  local pbase, pid = ref_split(ref)
  local name = string.sub(id, #pid + 2)
  if pbase == BASE then
    local pkt = k_task(pid)
    if not (parents_here and parents_here[pid]) then
      if redis.call('EXISTS', pkt) == 0 then return NOTFOUND end
      workflow_mark(pid, pkt)
      parents_here = parents_here or {}
      parents_here[pid] = true
    end
    spawn_one(pid, pkt, name, pol, BASE)
  end
  local st, e
  local rec = redis.call('HMGET', kt, 'p', 'S', 'x')
  if rec[1] then
    if rec[2] ~= 'd' then return DUPLICATE end
    st, e = 'x', rec[3]
  else
    local o = redis.call('HMGET', k_outcome(id), 's', 'e')
    if not o[1] then
      -- Its record does not exist (the HMGET above): only the dedup window may know it.
      if window > 0 then
        local acked = redis.call('ZSCORE', K_DEDUP, id)
        if acked and acked + 0 > now - window then return DUPLICATE end
      end
      return nil
    end
    st, e = 'C', o[2]
    if o[1] == 'ok' then st = 'o' elseif o[1] == 'dead' then st = 'x' end
  end
  flow_send({b = pbase, k = 's', c = pid, n = name, s = st, v = next_seq(), e = e or '', d = 1})
  return DUPLICATE
end

-- A single task at priority 0 runs here, straight through, with the commands
-- the general path below would send for it and none of its tables (each costs an allocation and
-- its share of the collector; together they were most of a single publish's time in Lua).
if batches == 1 and #ARGV == first_task + TASK - 1 and task_level(ARGV[first_task + 4]) == '0' then
  local i = first_task
  local id, p = ARGV[i], ARGV[i + 1]
  local kt = k_task(id)
  local level, delay, at, max, outcome, hold, pol, ref = task_opts(ARGV[i + 4])
  local no, moved
  if ref == '' then
    if is_duplicate(id, kt, window, now) then no = DUPLICATE end
  elseif pol == 'd' or pol == 't' then
    no, moved = debounce_find(pol, ref, ARGV[i + 2], ARGV[i + 3], now, id)
  else
    no = child_refused(id, kt, pol, ref)
  end
  if no then
    if no == DUPLICATE then stat('duplicates', 1) end
    if moved then place(moved, now) end
    if flow_queue then flow_run(now) end
    finish()
    if flow_outboxed then return {no, RELAY} end
    return {no}
  end
  local t, t_s = available_at(delay, at)
  local s = next_seq(true) -- the record's form; seq_member pads it
  task_record(kt, p, s, t_s, ARGV[i + 2], ARGV[i + 3], level, max, outcome, hold)
  if ref ~= '' and pol ~= 'd' and pol ~= 't' then spawned(kt, ref) end
  redis.call('ZADD', k_pending(p, '0'), t_s, seq_member(s, id))
  stat('pub', 1)
  enqueued(p, 1, t, t_s, now)
  if EVENTS_MAX then emit('published', id, 'p', p) end
  if window > 0 then prune_dedup(now, window, 100) end
  finish()
  return {OK}
end

-- refusals returns, by the ARGV index of their id, the codes of the tasks of the batches that would
-- give a partition more than MAX_LEVELS non-zero priorities pending. A task adds its priority to
-- its partition's levels unless it is 0, a duplicate (of a task that exists, or of a task of an
-- earlier batch not refused) or a level the partition has (in r:<p>, or from an earlier batch).
-- Cost: nothing unless a task has a priority; else for each such task 1–2 calls (is_duplicate), and per
-- (partition, level) of such tasks a ZSCORE r:<p>, per partition a ZCARD r:<p>.
local function refusals()
  local any = false
  for i = first_task + 4, #ARGV, TASK do
    if task_level(ARGV[i]) ~= '0' then any = true; break end
  end
  local out = {}
  if not any then return out end
  -- What the batches not refused add: ids; 'level:p' -> whether p has the level; p -> its count.
  local ids, has, count = {}, {}, {}
  local at = first_task
  for b = 1, batches do
    local last = at + TASK * (ARGV[3 + b] - 1)
    local new_ids, new_has, more, over = {}, {}, {}, nil
    for i = at, last, TASK do
      local id, p, level = ARGV[i], ARGV[i + 1], task_level(ARGV[i + 4])
      if not ids[id] and not new_ids[id] then
        new_ids[id] = true
        if level ~= '0' and not is_duplicate(id, k_task(id), window, now) then
          local pl = level .. ':' .. p
          if has[pl] == nil then has[pl] = redis.call('ZSCORE', k_levels(p), level) ~= false end
          if not has[pl] and not new_has[pl] then
            new_has[pl] = true
            count[p] = count[p] or redis.call('ZCARD', k_levels(p))
            more[p] = (more[p] or 0) + 1
            if count[p] + more[p] > MAX_LEVELS then over = i; break end
          end
        end
      end
    end
    if over then
      for i = at, last, TASK do out[i] = REFUSED end
      out[over] = LEVELS
    else
      for id in pairs(new_ids) do ids[id] = true end
      for pl in pairs(new_has) do has[pl] = true end
      for p, n in pairs(more) do count[p] = count[p] + n end
    end
    at = last + TASK
  end
  return out
end
local refused = refusals()
local res, levels_seen = {}, {}
local added, dups = 0, 0
-- Per partition, in order of first appearance (parts): {tasks added, the earliest available-at
-- of them and its string, how many are available now, the additions to its level-0 pending set}.
-- Other levels' additions go by pending key (pend_adds, pend_keys). Everything is written after
-- the loop, one variadic ZADD per (partition, level): nothing in the loop reads them, and a batch
-- often sends several tasks to one partition.
local parts, byp = {}, {}
local pend_adds, pend_keys = {}, {}
-- The partitions of tasks a debounced publish replaced (moved later), placed after the others.
local moved

for i = first_task, #ARGV, TASK do
  local id, p = ARGV[i], ARGV[i + 1]
  local kt = k_task(id)
  local level, delay, at, max, outcome, hold, pol, ref = task_opts(ARGV[i + 4])
  local no = refused[i]
  if not no and ref ~= '' then
    if pol == 'd' or pol == 't' then
      local m
      no, m = debounce_find(pol, ref, ARGV[i + 2], ARGV[i + 3], now, id)
      if m then moved = moved or {}; moved[#moved + 1] = m end
    else
      no = child_refused(id, kt, pol, ref)
    end
  elseif not no and is_duplicate(id, kt, window, now) then
    no = DUPLICATE
  end
  if no then
    res[#res + 1] = no
    if no == DUPLICATE then dups = dups + 1 end
  else
    local t, t_s = available_at(delay, at)
    local s = next_seq(true) -- the record's form; seq_member pads it
    task_record(kt, p, s, t_s, ARGV[i + 2], ARGV[i + 3], level, max, outcome, hold)
    local e = byp[p]
    if not e then
      e = {0, t, t_s, 0, false}
      byp[p] = e
      parts[#parts + 1] = p
    elseif t < e[2] then
      e[2], e[3] = t, t_s
    end
    e[1] = e[1] + 1
    if t <= now then e[4] = e[4] + 1 end
    local q
    if level == '0' then
      q = e[5]
      if not q then q = {}; e[5] = q end
    else
      local kp = k_pending(p, level)
      q = pend_adds[kp]
      if not q then q = {}; pend_adds[kp] = q; pend_keys[#pend_keys + 1] = kp end
      -- A non-zero level is recorded once per (partition, level) a batch uses; level 0 never is.
      local pl = level .. ':' .. p
      if not levels_seen[pl] then levels_seen[pl] = true; level_add(p, level) end
    end
    if ref == '' then
      q[#q + 1] = t_s
      q[#q + 1] = seq_member(s, id)
    elseif pol == 'd' or pol == 't' then
      -- Written now, not with the others: a later publish of its key in this call may replace it.
      redis.call('ZADD', k_pending(p, level), t_s, seq_member(s, id))
    else
      q[#q + 1] = t_s
      q[#q + 1] = seq_member(s, id)
      spawned(kt, ref)
    end
    added = added + 1
    if EVENTS_MAX then emit('published', id, 'p', p) end
    res[#res + 1] = OK
  end
end

for i = 1, #pend_keys do bulk('ZADD', pend_keys[i], nil, pend_adds[pend_keys[i]]) end
for i = 1, #parts do
  local p = parts[i]
  local e = byp[p]
  if e[5] then bulk('ZADD', k_pending(p, '0'), nil, e[5]) end
  depth_add(p, e[1])
  head_lower(p, e[2], e[3])
end

-- Wake sleepers for the work that is available now in ready partitions (also in partitions that
-- were ready already: their new tasks may want more workers). Paused or held ones wake no one.
local ready_now = 0
-- Which partitions are in ready, all in one ZMSCORE; place_new changes only its own partition.
local scores = {}
for i = 1, #parts, 1000 do
  local part = redis.call('ZMSCORE', K_READY, unpack(parts, i, math.min(i + 999, #parts)))
  for j = 1, #part do scores[#scores + 1] = part[j] end
end
for i = 1, #parts do
  local p = parts[i]
  local e = byp[p]
  -- A partition already in ready keeps its turn: new work changes nothing about it. Its earliest
  -- task is available, so its head is at most now (a partition is in ready only while it is).
  if scores[i] ~= false then head_at_most(p, now) end
  local in_ready = scores[i] ~= false or place_new(p, e[2], now)
  if in_ready then ready_now = ready_now + e[4] end
end
wakes = math.max(wakes, ready_now)
if moved then for j = 1, #moved do place(moved[j], now) end end
if window > 0 then prune_dedup(now, window, 100) end
stat('pub', added)
stat('duplicates', dups)
if flow_queue then flow_run(now) end
finish()
if flow_outboxed then res[#res + 1] = RELAY end -- the caller relays the outbox
return res
