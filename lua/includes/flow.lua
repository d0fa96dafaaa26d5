-- flow.lua: flows, DAGs of tasks (steps) across queues, and the end of a task (task_end), which
-- writes its outcome and moves its flow on. Included after common.lua and outcome.lua, before
-- settle.lua. docs/flows.md describes the model, docs/data-model.md the keys.
--
-- A step is a task whose record has F, its flow's id; its task id is "<flow id>/<step name>", and
-- H names its flow's home (the key base of the queue that keeps the flow's record) when that is
-- not its own. A step that waits for its parents has the state S 'w' (waiting), or 'c' (cancelled,
-- as long as a parent it must not run without is dead-lettered: a requeue of that parent reopens
-- it), R (parents not yet done), B (parents dead-lettered through a fail edge), y (its delay ms,
-- applied when it is released) and t (its At ms, 0 for none). Per step:
--   fp:<id>  HASH  its parents: step name -> edge policy ('f' fail, 'c' continue, 'i' ignore), the
--                  parent's last known state (a signal below, 'w' before any), that state's
--                  version (20 digits) and the parent's key base
--   fc:<id>  LIST  its children's refs
-- At the flow's home:
--   f:<fid>  HASH  n (steps), ok, bad, fin (steps succeeded, failed or cancelled, and of those
--                  for good), S (state: '' running, 'o' completed, 'x' failed, 'p' being
--                  published, 'a' aborted), c (ms created), e (ms ended), k (retention ms)
--   fs:<fid> HASH  step name -> its last known state and version
--   fd:<fid> STRING the flow's definition (JSON, written by the publisher; read by inspect)
--   flows    ZSET  running flows, score = ms created; flowsx: ended flows, score = ms their
--                  retention ends; flowsp: flows being published, score = ms the publish began
-- Per slot:
--   fg:<fid> LIST  the ids of the flow's first steps in this slot, held until the publish commits
--   fo       ZSET  the outbox: messages for other slots (JSON), score = ms written
--
-- Dynamic workflows use the same signals the other way round: a running task (the parent) spawns
-- children, tasks of any queue whose id is "<parent id>/<name>", whose record has K (a spawned
-- child: '2'; '1' for one spawned by an earlier version, whose fc:<id> names the parent too), F
-- (its parent's id) and H (its parent's key base, when not its own); their signals carry d. The parent's record has D (it has workflow keys), R
-- (children not ended) and B (children failed
-- through a fail edge), kept whatever the parent is doing; the parent's fk:<id> (not fp:, which
-- a flow step keeps for its parents) holds one entry per child, in fp:'s form. A parent that returns a wait is parked
-- (S 'w', W what it waits for: 'c' its children, 's<name>' a signal) or, for a sleep or a wait with
-- a timeout, pending at the time it ends (W 't' or 's<name>'). When the wait ends (a signal, its
-- children, its time: the next fetch) W becomes L, the last wait, which its next run reads; Z
-- holds the state it set, G the signal that ended its last wait (name, NUL, value). A parked task of an ordered partition holds
-- the partition (m:<p> w, its id) and comes back to its own place. sg:<id> keeps the signals sent
-- before the task waited for them.
--
-- A step's end is a signal: 'o' succeeded, 'x' failed (dead-lettered: a requeue may bring it
-- back), 'r' reopened (requeued, or no longer cancelled), 'c' cancelled (for now), 'X' failed for
-- good (its dead letter was deleted), 'C' cancelled for good. Each carries a version, a sequence
-- number of the step's own queue, so a receiver applies a signal once and only when it is newer
-- than the last it applied: signals can be repeated and reordered without harm. That makes the
-- outbox safe: a signal for another slot (another queue, another shard) is written there in the
-- same call as the end, and any consumer relays it (engine/flows.go); a relay that dies before it
-- removes what it delivered only delivers it again. Signals for this slot are applied in the same
-- call, up to FLOW_BUDGET a call; the rest go through the outbox, so no call's work grows with the
-- size of a flow.

local function k_outbox() return BASE .. 'fo' end
local function k_flows() return BASE .. 'flows' end
local function k_flows_end() return BASE .. 'flowsx' end
local function k_flows_prep() return BASE .. 'flowsp' end
local function k_children(id) return BASE .. 'fc:' .. id end
local function k_parents(id) return BASE .. 'fp:' .. id end
local function k_flow(fid) return BASE .. 'f:' .. fid end
local function k_flow_steps(fid) return BASE .. 'fs:' .. fid end
local function k_flow_def(fid) return BASE .. 'fd:' .. fid end
local function k_flow_gates(fid) return BASE .. 'fg:' .. fid end
local function k_signals(id) return BASE .. 'sg:' .. id end
local function k_kids(id) return BASE .. 'fk:' .. id end

-- FLOW_BUDGET is the most messages one call sends (applies itself, to this slot's steps, or writes
-- to the outbox) before it leaves the rest of its fan-outs to later calls; FANOUT_CHUNK the most
-- children of one step it reads at a time. FLOW_PRUNE is how many ended flows past their
-- retention a call that ends one forgets.
local FLOW_BUDGET, FANOUT_CHUNK, FLOW_PRUNE = 1000, 500, 2
local NO_VERSION = '00000000000000000000'
-- GATE is the name of the parent that holds a flow's first steps until the publish commits: no
-- step can have it.
local GATE, GATE_OPEN = '', '00000000000000000001'

-- The signals of this call still to apply here, in order, and how many the budget has used;
-- whether it wrote to the outbox (a script then ends its reply with RELAY, so the caller relays).
local flow_queue, flow_head, flow_spent, flow_outboxed = nil, 1, 0, false
local RELAY = -1

-- ref_split splits a step's ref into its key base and task id: the base ends at the first "}:"
-- (neither a prefix nor a queue name holds '}').
local function ref_split(ref)
  local i = string.find(ref, '}:', 1, true)
  return string.sub(ref, 1, i + 1), string.sub(ref, i + 2)
end

-- flow_send delivers message m, for the slot whose key base is m.b: here, in this call, while the
-- budget lasts; anywhere else through the outbox.
local function flow_send(m)
  flow_spent = flow_spent + 1
  if m.b == BASE and flow_spent <= FLOW_BUDGET then
    flow_queue = flow_queue or {}
    flow_queue[#flow_queue + 1] = m
  else
    redis.call('ZADD', k_outbox(), int(clock_ms or now_ms()), cjson.encode(m))
    flow_outboxed = true
  end
end

-- flow_note tells flow fid's home that step name is in state s now (version v).
local function flow_note(home, fid, name, s, v)
  flow_send({b = home, k = 'n', f = fid, t = name, s = s, v = v})
end

-- flow_fanout tells the children of step id, from the from-th (0-based) on, that it is in state s
-- (version v, error e), a chunk at a time. After a final state the list is no longer needed.
local function flow_fanout(id, name, s, v, e, from, d)
  if flow_spent >= FLOW_BUDGET then
    -- The call's budget is spent: the fan-out goes on in a later call (the relay's).
    flow_send({b = BASE, k = 'f', i = id, n = name, s = s, v = v, e = e, from = from, d = d})
    return
  end
  local kc = k_children(id)
  local kids = redis.call('LRANGE', kc, from, from + FANOUT_CHUNK - 1)
  for i = 1, #kids do
    local b, cid = ref_split(kids[i])
    flow_send({b = b, k = 's', c = cid, n = name, s = s, v = v, e = e, d = d})
  end
  if #kids == FANOUT_CHUNK then
    flow_send({b = BASE, k = 'f', i = id, n = name, s = s, v = v, e = e, from = from + FANOUT_CHUNK, d = d})
  elseif s == 'o' or s == 'X' or s == 'C' then
    redis.call('DEL', kc)
  end
end

-- flow_end signals that step id of flow fid (home its flow's home) is in state s, with error e:
-- to its flow and to its children. A spawned child (child set, its record's K: fid is its parent's
-- id, home its parent's key base) has no flow to tell: it tells its parent. One spawned before K
-- was '2' names its parent in its fc: list as well, which goes with the list's fan-out.
local function flow_end(id, fid, home, s, e, child)
  local v = next_seq()
  local name = string.sub(id, #fid + 2)
  if child == '1' then
    flow_fanout(id, name, s, v, e or '', 0, 1)
  elseif child then
    flow_send({b = home, k = 's', c = fid, n = name, s = s, v = v, e = e or '', d = 1})
  else
    flow_note(home, fid, name, s, v)
    flow_fanout(id, name, s, v, e or '', 0)
  end
end

-- children_end forgets the workflow keys of task id, which ended in state s ('ok', 'cancelled' or
-- 'purged'): its children's entries and the signals kept for it. A parent cancelled cancels the
-- children that have not ended (a message to each, 'k'), with e in the reason. O(children) once.
local function children_end(id, s, e)
  local kp = k_kids(id)
  if s == 'cancelled' then
    local kids = redis.call('HGETALL', kp)
    for i = 1, #kids, 2 do
      local st = string.sub(kids[i + 1], 2, 2)
      if st == 'w' or st == 'r' then
        flow_send({b = string.sub(kids[i + 1], 23), k = 'k', i = id .. '/' .. kids[i],
          e = 'its parent was cancelled: ' .. (e or '')})
      end
    end
  end
  redis.call('DEL', kp, k_signals(id))
end

-- task_end records that task id (record kt, not yet deleted) ended in state s ('ok', 'dead' or
-- 'cancelled') with result v or error e: its outcome, when the task or the queue (qkeep ms) wants
-- it kept or a caller waits, and its flow's next steps. A step that ended for good forgets its
-- parents.
local function task_end(id, kt, s, v, e, qkeep, now)
  if s == 'cancelled' then emit('cancelled', id, 'e', e or '') end
  local f = redis.call('HMGET', kt, 'o', 'F', 'H', 'K', 'D')
  local keep, waiter = outcome_spec(f[1])
  if qkeep > keep then keep = qkeep end
  if f[2] and not f[4] then
    outcome_put(id, s, v, e, nil, waiter, now) -- a step's is kept until its flow is forgotten
  elseif keep > 0 or waiter then
    outcome_put(id, s, v, e, keep, waiter, now) -- a spawned child's for its retention
  end
  if f[2] then
    local sig = 'C'
    if s == 'ok' then sig = 'o' elseif s == 'dead' then sig = 'x' end
    flow_end(id, f[2], f[3] or BASE, sig, e, f[4])
    if s ~= 'dead' and not f[4] then redis.call('DEL', k_parents(id)) end
  end
  if f[5] and s ~= 'dead' then children_end(id, s, e) end
end

-- flow_release makes waiting step id (record kt) a pending task of its partition, as if published
-- now: a new sequence number, available after its delay or at its At, at its priority unless its
-- partition is at the cap of priorities (MAX_LEVELS).
local function flow_release(id, kt, now)
  local f = redis.call('HMGET', kt, 'p', 'r', 'y', 't')
  local p, level = f[1], f[2] or '0'
  if level ~= '0' and not redis.call('ZSCORE', k_levels(p), level) and redis.call('ZCARD', k_levels(p)) >= MAX_LEVELS then
    -- The partition has the most priorities it may (no publish can add one): the step joins the
    -- nearest one below its own, or 0.
    level = redis.call('ZREVRANGEBYSCORE', k_levels(p), level, '-inf', 'LIMIT', '0', '1')[1] or '0'
    if level == '0' then redis.call('HDEL', kt, 'r') else redis.call('HSET', kt, 'r', level) end
  end
  local t = now + (tonumber(f[3]) or 0)
  local at = tonumber(f[4]) or 0 -- no t: available when it was published, which is past
  if at > t then t = at end
  local s = next_seq()
  redis.call('HDEL', kt, 'S', 'R', 'B', 'y')
  redis.call('HSET', kt, 's', s, 't', int(t))
  pend(id, kt, p, level, s, t)
  emit('released', id, 'p', p)
  stat('waiting', -1)
  stat('pub', 1) -- a step is published, and pending, when it is released (common.lua's stat)
  place(p, now)
end

-- flow_cancel cancels waiting step id (record kt), or a parked task, for good with reason: its
-- outcome is recorded and its children and flow are told; an ordered partition a parked task held
-- goes on.
local function flow_cancel(id, kt, reason, now)
  local f = redis.call('HMGET', kt, 'W', 'p')
  task_end(id, kt, 'cancelled', nil, reason, 0, now)
  redis.call('DEL', kt)
  stat('waiting', -1)
  stat('cancelled', 1)
  if f[1] and is_ordered(f[2]) and redis.call('HGET', k_meta(f[2]), 'w') == id then
    meta_del(f[2], 'w')
    place(f[2], now)
  end
end

-- workflow_mark notes that task id (record kt, which exists) has workflow keys (D: children,
-- kept signals), so that its end, whatever ends it, runs task_end, which forgets them: its record
-- gets 'o' when it has none, and its current lease's mark becomes upper case (lease_outcome), as a
-- fetch would have made it.
local function workflow_mark(id, kt)
  if redis.call('HSETNX', kt, 'D', '1') == 0 then return end
  redis.call('HSETNX', kt, 'o', '0')
  local v = redis.call('HGET', K_LEASES, id)
  if v and not lease_outcome(v) then
    redis.call('HSET', K_LEASES, id, string.sub(v, 1, 20) .. string.upper(string.sub(v, 21, 21)) .. string.sub(v, 22))
  end
end

-- spawn_one registers child name of task id (record kt, which exists and has been through
-- workflow_mark in this call), spawned in the slot whose key base is cbase through an edge of
-- policy pol: one entry in its fk:<id> (a name already there is left as it was: a parent that runs
-- again spawns nothing twice) and, for a new one, one more child not ended (R). Returns whether it
-- was new.
local function spawn_one(id, kt, name, pol, cbase)
  if redis.call('HSETNX', k_kids(id), name, pol .. 'w' .. NO_VERSION .. cbase) == 0 then return false end
  redis.call('HINCRBY', kt, 'R', '1')
  return true
end

-- park takes task id (record kt, partition p, unleased) out of the way until what it waits for
-- ('c' its children, 's<name>' a signal) comes: out of pending, holding its partition when that is
-- ordered (meta w, read as a pause), so the tasks behind it wait; unpark brings it back.
local function park(id, kt, p, what)
  redis.call('HSET', kt, 'S', 'w', 'W', what)
  if is_ordered(p) then meta_set(p, 'w', id) end
  emit('waiting', id, 'v', what)
  stat('waiting', 1)
end

-- unpark returns parked task id (record kt) to pending: an ordered one to its own place, releasing
-- its partition; an unordered one as if published now.
local function unpark(id, kt, now)
  local f = redis.call('HMGET', kt, 'p', 'r', 's', 't', 'c')
  -- The record's sequence number padded (common.lua, next_seq); no t: available at c.
  local p, level, s, t = f[1], f[2] or '0', f[3] and string.rep('0', 20 - #f[3]) .. f[3], tonumber(f[4] or f[5])
  if is_ordered(p) then
    if redis.call('HGET', k_meta(p), 'w') == id then meta_del(p, 'w') end
  else
    s, t = next_seq(), now
  end
  local w = redis.call('HGET', kt, 'W')
  redis.call('HSET', kt, 'S', 'p', 's', s, 't', int(t))
  if w then -- the wait is over: it becomes the last wait (a signal's resume did that already)
    redis.call('HSET', kt, 'L', w)
    redis.call('HDEL', kt, 'W')
  end
  pend(id, kt, p, level, s, t)
  emit('resumed', id, 'p', p)
  stat('waiting', -1)
  stat('pending', 1)
  place(p, now)
end

-- child_done and child_failed are 1 for the states of a spawned child that end it (for now: a dead
-- letter may be requeued), and that fail it; else 0.
local function child_done(s)
  if s == 'o' or s == 'x' or s == 'X' or s == 'C' then return 1 end
  return 0
end
local function child_failed(s)
  if s == 'x' or s == 'X' or s == 'C' then return 1 end
  return 0
end

-- child_signal applies, to parent pid (record kt, fields f: S, R, B, W), that its child, through an
-- edge of policy pol, went from state old to s: its counts change, and a parent parked on its
-- children comes back when none is left running, or at once when one failed through a fail edge.
local function child_signal(pid, kt, pol, old, s, f, now)
  local d_r = child_done(s) - child_done(old)
  local d_b = 0
  if pol == 'f' then d_b = child_failed(s) - child_failed(old) end
  if d_r == 0 and d_b == 0 then return end
  local r, b = (tonumber(f[2]) or 0) - d_r, (tonumber(f[3]) or 0) + d_b
  redis.call('HSET', kt, 'R', int(r), 'B', int(b))
  if f[1] == 'w' and f[4] == 'c' and (r <= 0 or b > 0) then unpark(pid, kt, now) end
end

-- flow_sat and flow_blk say what a parent in state s means to a child through an edge of policy
-- pol: 1 when the child no longer waits for it (it succeeded, or failed or was cancelled and the
-- edge lets the child go on), and 1 when it stops the child for now (dead-lettered or cancelled
-- for now, through a fail edge).
local function flow_sat(pol, s)
  if s == 'o' or (pol ~= 'f' and (s == 'x' or s == 'c' or s == 'X' or s == 'C')) then return 1 end
  return 0
end
local function flow_blk(pol, s)
  if pol == 'f' and (s == 'x' or s == 'c') then return 1 end
  return 0
end

-- flow_signal applies to waiting step cid that its parent pname is in state s, version v, error e: the step is released when no parent holds it back any more, cancelled for
-- now while a fail-edge parent is dead-lettered (and reopened when none is), and cancelled for good
-- when such a parent failed or was cancelled for good. A step already released or gone ignores
-- it, as does every step a signal older than the last from that parent.
local function flow_signal(cid, pname, s, v, e, now, d)
  local kp = d and k_kids(cid) or k_parents(cid)
  local cur = redis.call('HGET', kp, pname)
  if not cur or string.sub(cur, 3, 22) >= v then return end
  local pol, old = string.sub(cur, 1, 1), string.sub(cur, 2, 2)
  redis.call('HSET', kp, pname, pol .. s .. v .. string.sub(cur, 23))
  local kt = k_task(cid)
  if d then
    -- A parent told of its spawned child pname (d: the signal came from a child).
    local f = redis.call('HMGET', kt, 'S', 'R', 'B', 'W', 'p')
    if f[5] then child_signal(cid, kt, pol, old, s, f, now) end -- a parent gone has nothing to count
    return
  end
  local f = redis.call('HMGET', kt, 'S', 'R', 'B', 'F', 'H')
  local st = f[1]
  if st ~= 'w' and st ~= 'c' then return end
  local why = 'parent ' .. pname .. ' failed'
  if e and e ~= '' then why = why .. ': ' .. e end
  if pol == 'f' and (s == 'X' or s == 'C') then
    flow_cancel(cid, kt, why, now)
    return
  end
  local r = tonumber(f[2]) - (flow_sat(pol, s) - flow_sat(pol, old))
  local b = tonumber(f[3]) + (flow_blk(pol, s) - flow_blk(pol, old))
  local name = string.sub(cid, #f[4] + 2)
  if b > 0 and st == 'w' then
    -- Cancelled for now: its flow counts it failed, and its children treat it as they treat a
    -- dead-lettered parent (a fail edge cancels them for now too, the others go on).
    redis.call('HSET', kt, 'R', r, 'B', b, 'S', 'c', 'x', why)
    local cv = next_seq()
    flow_note(f[5] or BASE, f[4], name, 'c', cv)
    flow_fanout(cid, name, 'c', cv, why, 0)
  elseif b == 0 and st == 'c' then
    redis.call('HSET', kt, 'R', r, 'B', b, 'S', 'w')
    redis.call('HDEL', kt, 'x') -- the reason it was cancelled for is gone
    local rv = next_seq()
    flow_note(f[5] or BASE, f[4], name, 'r', rv)
    flow_fanout(cid, name, 'r', rv, '', 0)
    st = 'w'
  else
    redis.call('HSET', kt, 'R', r, 'B', b)
  end
  if st == 'w' and b == 0 and r == 0 then flow_release(cid, kt, now) end
end

-- flow_prune forgets up to n ended flows whose home is here and whose retention has ended, or,
-- given fid, that flow when its retention has ended, with their steps' outcomes, which their
-- slots keep until then (task_end): a message ('x') to each slot names its steps, 500 at a time.
local function flow_prune(now, n, fid)
  local old
  if fid then
    local until_ms = redis.call('ZSCORE', k_flows_end(), fid)
    old = until_ms and tonumber(until_ms) <= now and {fid} or {}
  else
    old = redis.call('ZRANGEBYSCORE', k_flows_end(), '-inf', int(now), 'LIMIT', '0', n)
  end
  if #old == 0 then return end
  local keys = {}
  for i = 1, #old do
    local fid = old[i]
    local def = redis.call('GET', k_flow_def(fid))
    if def then
      local by, order = {}, {}
      for _, st in ipairs(cjson.decode(def).steps) do
        local ids = by[st.b]
        if not ids then ids = {}; by[st.b] = ids; order[#order + 1] = st.b end
        ids[#ids + 1] = fid .. '/' .. st.n
        if #ids == FANOUT_CHUNK then
          flow_send({b = st.b, k = 'x', ids = ids})
          ids = {}
          by[st.b] = ids
        end
      end
      for _, b in ipairs(order) do
        if #by[b] > 0 then flow_send({b = b, k = 'x', ids = by[b]}) end
      end
    end
    keys[#keys + 1] = k_flow(fid)
    keys[#keys + 1] = k_flow_steps(fid)
    keys[#keys + 1] = k_flow_def(fid)
  end
  redis.call('DEL', unpack(keys))
  redis.call('ZREM', k_flows_end(), unpack(old))
end

-- flow_forget deletes the outcomes of steps ids, kept for their flow (score +inf in outs), now
-- that their flow is forgotten.
local function flow_forget(ids)
  local kept = redis.call('ZMSCORE', k_outs(), unpack(ids))
  local gone, keys = {}, {}
  for i = 1, #ids do
    if kept[i] and tonumber(kept[i]) == math.huge then
      gone[#gone + 1] = ids[i]
      keys[#keys + 1] = k_outcome(ids[i])
      keys[#keys + 1] = k_waiter(ids[i])
    end
  end
  if #gone > 0 then
    redis.call('DEL', unpack(keys))
    redis.call('ZREM', k_outs(), unpack(gone))
  end
end

-- flow_bad and flow_final are 1 for the step states a flow counts as failed, and as failed for
-- good; else 0.
local function flow_bad(s)
  if s == 'x' or s == 'c' or s == 'X' or s == 'C' then return 1 end
  return 0
end
local function flow_final(s)
  if s == 'X' or s == 'C' then return 1 end
  return 0
end

-- flow_noted applies, at flow fid's home, that its step name is in state s, version v: it keeps
-- the flow's counts, and its state: completed when every step succeeded, failed while any failed
-- or is cancelled, running otherwise (again, when a failed step is requeued). A flow whose steps
-- all ended is kept for its retention from then on.
-- flow_state sets flow fid's state (record kf) from its counts, ok and bad of n steps, as it was
-- (was, and ended: whether it had ended), counts and reports the change (name is the step that made
-- it; requeued, when set, the step whose requeue made a failed flow run again), and starts its
-- retention (keep ms) when every step has ended, or stops it when one runs again.
local function flow_state(fid, kf, n, ok, bad, keep, was, ended, name, now, requeued)
  local state = ''
  if ok == n then state = 'o' elseif bad > 0 then state = 'x' end
  redis.call('HSET', kf, 'S', state)
  if state ~= was then
    if state == 'o' then
      stat('flows_completed', 1)
      emit('flow_completed', fid)
    elseif state == 'x' then
      stat('flows_failed', 1)
      emit('flow_failed', fid, 's', name)
    elseif was ~= '' then
      emit('flow_running', fid, 's', requeued or name)
    end
  end
  if ok + bad == n then
    if not ended then
      redis.call('HSET', kf, 'e', int(now))
      redis.call('ZREM', k_flows(), fid)
      redis.call('ZADD', k_flows_end(), int(now + keep), fid)
      flow_prune(now, FLOW_PRUNE)
    end
  elseif ended then
    redis.call('HDEL', kf, 'e')
    redis.call('ZREM', k_flows_end(), fid)
    redis.call('ZADD', k_flows(), redis.call('HGET', kf, 'c'), fid)
  end
end

local function flow_noted(fid, name, s, v, now)
  local ks = k_flow_steps(fid)
  local cur = redis.call('HGET', ks, name)
  if not cur or string.sub(cur, 2) >= v then return end
  redis.call('HSET', ks, name, s .. v)
  local old = string.sub(cur, 1, 1)
  local d_ok = (s == 'o' and 1 or 0) - (old == 'o' and 1 or 0)
  local d_bad = flow_bad(s) - flow_bad(old)
  local d_fin = flow_final(s) - flow_final(old)
  if d_ok == 0 and d_bad == 0 and d_fin == 0 then return end
  local kf = k_flow(fid)
  local f = redis.call('HMGET', kf, 'n', 'ok', 'bad', 'fin', 'S', 'k', 'e', 'q')
  if f[7] then
    -- An ended flow past its retention is gone (Engine.Flow says so), though not yet pruned: a
    -- step of it that runs again (its dead letter requeued) does not bring it back.
    local until_ms = redis.call('ZSCORE', k_flows_end(), fid)
    if until_ms and tonumber(until_ms) <= now then flow_prune(now, 1, fid) return end
  end
  local n = tonumber(f[1])
  local ok, bad, fin = (tonumber(f[2]) or 0) + d_ok, (tonumber(f[3]) or 0) + d_bad, (tonumber(f[4]) or 0) + d_fin
  -- A failed step that runs again was requeued: the flow remembers it ('q'), as the step its
  -- running again is told for, whichever note (its own, or a dependent it reopened) ends the
  -- failure.
  local requeued = f[8]
  if (old == 'x' or old == 'X') and flow_bad(s) == 0 then
    requeued = name
    redis.call('HSET', kf, 'ok', ok, 'bad', bad, 'fin', fin, 'q', name)
  else
    redis.call('HSET', kf, 'ok', ok, 'bad', bad, 'fin', fin)
  end
  if f[5] == 'p' then return end -- being published: the commit sets its state from the counts
  flow_state(fid, kf, n, ok, bad, tonumber(f[6]), f[5] or '', f[7], name, now, requeued)
end

-- flow_open releases the first steps of flow fid in this slot, held since the publish wrote them
-- (fg:<fid>), from the from-th (0-based) on, a chunk at a time.
local function flow_open(fid, from)
  local kg = k_flow_gates(fid)
  local ids = redis.call('LRANGE', kg, from, from + FANOUT_CHUNK - 1)
  for i = 1, #ids do
    flow_send({b = BASE, k = 's', c = ids[i], n = GATE, s = 'o', v = GATE_OPEN, e = ''})
  end
  if #ids == FANOUT_CHUNK then
    flow_send({b = BASE, k = 'g', f = fid, from = from + FANOUT_CHUNK})
  else
    redis.call('DEL', kg)
  end
end

-- cancel_mark is a lease's mark c (common.lua, the lease) once its task was asked to be cancelled.
local function cancel_mark(c)
  if c == 't' then return 'c' elseif c == 'u' then return 'd' elseif c == 'T' then return 'C' end
  return 'D'
end

-- task_cancel cancels task id with reason: a pending or delayed task leaves its partition (the
-- order of the rest is kept) and ends as cancelled; a waiting flow step or a parked task ends so
-- too (flow_cancel); a leased task is marked, so its holder cancels its handler. Returns OK,
-- CANCELLED (leased: marked), FINISHED (a dead letter, or ended with its outcome kept) or NOTFOUND,
-- and the partition the caller must place (a task that left pending), if any.
local function task_cancel(id, reason, now)
  local kt = k_task(id)
  local f = redis.call('HMGET', kt, 'S', 'p', 'r', 's', 'W')
  if not f[2] then
    if redis.call('EXISTS', k_outcome(id)) == 1 then return FINISHED end
    return NOTFOUND
  elseif f[1] == 'd' then
    return FINISHED
  elseif f[1] == 'w' or f[1] == 'c' then
    flow_cancel(id, kt, reason, now)
    return OK
  end
  local v = redis.call('HGET', K_LEASES, id)
  if v then
    if not lease_cancelled(v) then
      local mark = string.sub(v, 21, 21)
      redis.call('HSET', K_LEASES, id, string.sub(v, 1, 20) .. cancel_mark(mark) .. string.sub(v, 22))
    end
    return CANCELLED
  end
  local p, level = f[2], f[3] or '0'
  local kp = k_pending(p, level)
  redis.call('ZREM', kp, string.rep('0', 20 - #f[4]) .. f[4] .. id) -- the sequence number padded
  if redis.call('EXISTS', kp) == 0 then level_gone(p, level) end
  depth_add(p, -1)
  head_is(p, false)
  stat('pending', -1)
  task_end(id, kt, 'cancelled', nil, reason, 0, now)
  redis.call('DEL', kt)
  stat('cancelled', 1)
  if f[5] and is_ordered(p) then
    -- A task that sleeps or waits for a signal until a time blocks its ordered partition until
    -- then (settle's back): cancelled, it holds it no more, as a signal would end the block.
    local _, _, blocked = meta(p)
    if blocked then meta_del(p, 'b') end
  end
  return OK, p
end

-- flow_apply applies one message: a signal to a step or a parent ('s'), a note to a flow ('n'), the
-- rest of a fan-out ('f') or of the release of a flow's first steps ('g'), the end of a forgotten
-- flow's outcomes ('x'), or a cancel of a spawned child whose parent was cancelled ('k').
local function flow_apply(m, now)
  if m.k == 's' then
    flow_signal(m.c, m.n, m.s, m.v, m.e, now, m.d)
  elseif m.k == 'n' then
    flow_noted(m.f, m.t, m.s, m.v, now)
  elseif m.k == 'f' then
    flow_fanout(m.i, m.n, m.s, m.v, m.e, m.from, m.d)
  elseif m.k == 'k' then
    local _, p = task_cancel(m.i, m.e, now)
    if p then place(p, now) end
  elseif m.k == 'g' then
    flow_open(m.f, m.from)
  elseif m.k == 'x' then
    flow_forget(m.ids)
  end
end

-- flow_run applies the signals this call sent to this slot, and those they send in turn, while
-- the budget lasts (flow_send puts the rest in the outbox). Every script that may end a task runs
-- it before finish() when flow_queue says it has anything to do.
local function flow_run(now)
  while flow_queue and flow_head <= #flow_queue do
    local m = flow_queue[flow_head]
    flow_queue[flow_head] = false
    flow_head = flow_head + 1
    flow_apply(m, now)
  end
end
