-- reject.lua: returns leased tasks to pending. An unordered task comes back at now+delay; an ordered
-- one keeps its exact position and its partition is blocked until now+delay, and every task of the
-- partition leased with it that comes later in the partition's order goes back too, to its own
-- position, without counting an attempt: nothing may complete before the rejected task. A task
-- whose attempts reach its max attempts goes to the dead letters instead, with the reason as its
-- last error; then the partition goes on and the later tasks stay leased. A task asked to be
-- cancelled while leased (cancel.lua), rejected or taken back, ends cancelled instead. A hand-back
-- (counts 2: a worker returns tasks it did not run, or whose handler its shutdown cut off) is a
-- reject that uses no attempt and is counted apart: handed_back counts each task it returned once,
-- with the later tasks of an ordered run it took back, and rejected and taken_back not at all.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  dead-letter cap by count (0: none)
-- ARGV[3]  dead-letter cap by age ms (0: none)
-- ARGV[4…] 7 per task: id, fencing token, delay ms, reason, counts (1: this delivery counts as an
--          attempt; 0: it does not, as for a rate limit; 2: a hand-back, no attempt), wait (''
--          for a reject: else what the task waits for, without counting an attempt: 't' a sleep of
--          delay ms, 's<name>' the signal name, at most delay ms when delay is not 0, 'c' its
--          children) and its state ('': left as it is; else kept in Z for its next run)
-- A task that waits keeps its place as a reject keeps it, and takes back the later tasks of an
-- ordered run the same way. A signal kept for it (sg:<id>) ends its wait at once, as do children
-- that all ended already (or one that failed through a fail edge); a wait for a signal without a
-- time, or for children, parks it (includes/flow.lua), else it is pending at the time its wait ends.
-- Returns: one code per task: OK (pending again, also when an earlier item of this call took it
--          back; or cancelled, when it was asked to be), DEAD (dead-lettered), STALE or NOTFOUND; then RELAY (-1) when the call wrote to
--          the flow outbox.

-- @include common
-- @include outcome
-- @include flow
-- @include settle

local now = now_ms()
local maxcount, maxage = tonumber(ARGV[2]), tonumber(ARGV[3])
local res, parts, seen = {}, {}, {}
local rejected, handed = 0, 0

-- took maps the ids take_back_later returned in this call to the token their lease had: a later
-- item of the same call that names one of them with that token finds it pending already.
-- took_hb marks those a hand-back took back, counted in handed_back then.
local took, took_hb = {}, {}

-- The leased run of each ordered partition this call rejects from, read once per call: run[p] lists
-- the ids of l:<p> in the partition's order, at[p][id] is an id's place in it, and cut[p] is the
-- place from which on none of them is leased any more (all taken back or settled by this call).
-- gone[id] marks the ids this call unleased. A reject of a run's task takes back the leased ids
-- between its place and the cut, and moves the cut to its place: each id is taken back at most
-- once, so a call costs the same whatever the order of its items (reading l:<p> again for each
-- item would cost the square of the run when the items come last task first).
local run, at, cut, gone = {}, {}, {}, {}

-- read_run reads p's leased run: one SMEMBERS and one HMGET per id, sorted by order_key, a string
-- whose byte order is the partition's order: priority desc, available-at asc, sequence asc.
local function order_key(kt)
  local f = redis.call('HMGET', kt, 'r', 't', 's', 'c') -- no t: available when published, at c
  local s = f[3] or '' -- the record's form (common.lua, next_seq), padded
  return string.format('%010d%015d', 2147483647 - (tonumber(f[1]) or 0), tonumber(f[2] or f[4]) or 0) ..
    string.rep('0', 20 - #s) .. s
end

local function read_run(p)
  local held = redis.call('SMEMBERS', k_held(p))
  local keyed, ids, place = {}, {}, {}
  for i = 1, #held do keyed[i] = order_key(k_task(held[i])) .. '\0' .. held[i] end
  table.sort(keyed)
  for i = 1, #keyed do
    local id = string.sub(keyed[i], string.find(keyed[i], '\0', 1, true) + 1)
    ids[i] = id
    place[id] = i
  end
  run[p], at[p], cut[p] = ids, place, #ids + 1
end

-- take_back_later returns the leased tasks of ordered partition p that come after task id, whose
-- own reject sent it back (a hand-back when hb), and how many went back to pending.
local function take_back_later(id, p, now, hb)
  local i, ids, n = at[p][id], run[p], 0
  if not i or i >= cut[p] then return 0 end
  for j = i + 1, cut[p] - 1 do
    local other = ids[j]
    if not gone[other] then
      -- Its delivery never ran: its attempts field, which counts ended deliveries, stays.
      local kt = k_task(other)
      local lease = redis.call('HGET', K_LEASES, other)
      unlease(other, kt, p)
      if lease and lease_cancelled(lease) then
        cancel_leased(other, kt, now) -- asked to be cancelled: it does not go back
      else
        back(other, kt, p, now, 0)
        n = n + 1
      end
      took[other] = lease and lease_token(lease)
      took_hb[other] = hb
      gone[other] = true
    end
  end
  cut[p] = i
  return n
end

-- taken counts n tasks take_back_later returned for an item whose counts is counts: handed back
-- for a hand-back, else taken back.
local function taken(counts, n)
  if counts == '2' then handed = handed + n else stat('taken_back', n) end
end

-- wait_for sets task id (record kt, partition p, unleased) waiting for what (see ARGV), with its
-- state, for at most delay ms (0: no limit).
local function wait_for(id, kt, p, what, state, delay, now)
  if state ~= '' then redis.call('HSET', kt, 'Z', state) end
  redis.call('HDEL', kt, 'G', 'L')
  local kind = string.sub(what, 1, 1)
  if kind == 's' then
    local name = string.sub(what, 2)
    local v = redis.call('HGET', k_signals(id), name)
    if v then
      -- Sent before the wait: it ends the wait at once, and is taken.
      redis.call('HDEL', k_signals(id), name)
      redis.call('HSET', kt, 'L', what, 'G', name .. '\0' .. v)
      back(id, kt, p, now, 0)
      return
    end
    workflow_mark(id, kt)
  elseif kind == 'c' then
    local f = redis.call('HMGET', kt, 'R', 'B')
    if (tonumber(f[1]) or 0) <= 0 or (tonumber(f[2]) or 0) > 0 then
      redis.call('HSET', kt, 'L', what)
      back(id, kt, p, now, 0)
      return
    end
  end
  if kind == 't' or delay > 0 then
    redis.call('HSET', kt, 'W', what)
    back(id, kt, p, now, delay)
  else
    park(id, kt, p, what)
  end
end

for i = 4, #ARGV, 7 do
  local id, token, delay, reason, counts = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], ARGV[i + 4]
  local wait = ARGV[i + 5]
  local kt = k_task(id)
  local f = redis.call('HMGET', kt, 'p', 'a', 'm')
  local lease = redis.call('HGET', K_LEASES, id)
  if not f[1] then
    res[#res + 1] = NOTFOUND
  elseif took[id] == token and wait ~= '' then
    -- Taken back by an earlier item of this call, as the wait would have: it runs again, with
    -- the state it set.
    took[id] = nil
    if ARGV[i + 6] ~= '' then redis.call('HSET', kt, 'Z', ARGV[i + 6]) end
    res[#res + 1] = OK
  elseif took[id] == token then
    -- Taken back by an earlier item of this call: it is pending already, in its position. Apply
    -- this item's reason, attempt and delay, once.
    took[id] = nil
    local p = f[1]
    if reason ~= '' then redis.call('HSET', kt, 'x', reason) end
    note_error(kt, reason, (tonumber(f[2]) or 0) + 1, now)
    local attempts, max = tonumber(f[2]) or 0, tonumber(f[3]) or 0
    if counts == '1' then
      attempts = redis.call('HINCRBY', kt, 'a', 1)
    end
    if max > 0 and attempts >= max then
      local g = redis.call('HMGET', kt, 'r', 's')
      g[1] = g[1] or '0'
      local kp = k_pending(p, g[1])
      redis.call('ZREM', kp, string.rep('0', 20 - #g[2]) .. g[2] .. id) -- the sequence number padded
      if g[1] ~= '0' and redis.call('EXISTS', kp) == 0 then level_gone(p, g[1]) end
      stat('pending', -1)
      depth_add(p, -1)
      head_is(p, false)
      bury(id, kt, reason, now, maxcount, maxage)
      res[#res + 1] = DEAD
    else
      if delay > 0 then
        local _, _, blocked = meta(p)
        if not blocked or blocked < now + delay then meta_set(p, 'b', now + delay) end
      end
      if counts ~= '2' then
        rejected = rejected + 1
      elseif not took_hb[id] then
        handed = handed + 1 -- a reject took it back: handed back now, counted once
      end
      res[#res + 1] = OK
    end
  elseif not lease or lease_token(lease) ~= token then
    res[#res + 1] = STALE
  else
    local p = f[1]
    local attempts, max = tonumber(f[2]) or 0, tonumber(f[3]) or 0 -- deliveries ended before this one
    if is_ordered(p) then
      if not run[p] then read_run(p) end -- before unlease takes id out of l:<p>
      gone[id] = true
    end
    unlease(id, kt, p)
    if wait ~= '' then
      counts, reason = '0', '' -- a wait is no failure
    end
    if counts == '1' then
      attempts = attempts + 1
      redis.call('HSET', kt, 'a', attempts)
    end
    if reason ~= '' then redis.call('HSET', kt, 'x', reason) end
    note_error(kt, reason, (tonumber(f[2]) or 0) + 1, now)
    if lease_cancelled(lease) then
      cancel_leased(id, kt, now)
      res[#res + 1] = OK
      if is_ordered(p) then taken(counts, take_back_later(id, p, now, counts == '2')) end
    elseif wait ~= '' then
      wait_for(id, kt, p, wait, ARGV[i + 6], delay, now)
      res[#res + 1] = OK
      if is_ordered(p) then taken('0', take_back_later(id, p, now, false)) end
    elseif max > 0 and attempts >= max then
      bury(id, kt, reason, now, maxcount, maxage)
      res[#res + 1] = DEAD
    else
      back(id, kt, p, now, delay)
      if counts == '2' then
        handed = handed + 1
        emit('handed_back', id)
      else
        rejected = rejected + 1
        emit('retried', id, 'e', reason, 'd', int(delay))
      end
      res[#res + 1] = OK
      if is_ordered(p) then taken(counts, take_back_later(id, p, now, counts == '2')) end
    end
    if not seen[p] then seen[p] = true; parts[#parts + 1] = p end
  end
end

for i = 1, #parts do place(parts[i], now) end
stat('rejected', rejected)
stat('handed_back', handed)
if flow_queue then flow_run(now) end
if flow_outboxed then res[#res + 1] = RELAY end -- the caller relays the outbox
finish()
return res
