-- settle.lua: helpers of the scripts that return leased tasks to pending or dead-letter them
-- (reject, kill, recover, requeue, purge). Included after common.lua, outcome.lua and flow.lua
-- (a dead letter's end is a task's end: task_end). They live apart from
-- common.lua because every function a script defines is a closure created on each call, and the
-- hot scripts (publish, fetch, ack) do not need these: keeping them out saves those scripts
-- about 1.5 µs a call.

-- level_full says whether adding level to p's levels would take p past MAX_LEVELS: level is not
-- 0, not among them, and p has MAX_LEVELS already. Cost: 0 calls for level 0, else 1–2.
local function level_full(p, level)
  if level == '0' then return false end
  if redis.call('ZSCORE', k_levels(p), level) then return false end
  return redis.call('ZCARD', k_levels(p)) >= MAX_LEVELS
end

-- unlease ends the lease of task id of partition p.
local function unlease(id, kt, p)
  redis.call('ZREM', K_INFLIGHT, id)
  redis.call('SREM', k_held(p), id)
  redis.call('HDEL', K_LEASES, id)
end

-- ERRORS_KEPT is how many failed deliveries' errors a task's record keeps in its field E
-- (engine.MaxAttemptErrors).
local ERRORS_KEPT = 10

-- note_error appends the error of a failed delivery, its attempt number and the time now to the
-- history of task kt (field E), keeping the last ERRORS_KEPT, oldest first. An entry is
-- "<attempt> <ms> <bytes> " and that many bytes of reason, so any reason, newlines included,
-- parses back (engine/task.go). An empty reason (a plain snooze, a kill without one) notes
-- nothing. Cost: one HGET and one HSET; the field holds at most ERRORS_KEPT reasons, each cut to
-- engine.MaxReasonLen bytes as the last error x is, and is deleted with the record.
local function note_error(kt, reason, attempt, now)
  if reason == '' then return end
  local s = (redis.call('HGET', kt, 'E') or '') .. string.format('%d %d %d ', attempt, now, #reason) .. reason
  local starts, i = {}, 1
  while i <= #s do
    local _, e, len = string.find(s, '^%d+ %d+ (%d+) ', i)
    if not e then break end
    starts[#starts + 1] = i
    i = e + 1 + tonumber(len)
  end
  if #starts > ERRORS_KEPT then s = string.sub(s, starts[#starts - ERRORS_KEPT + 1]) end
  redis.call('HSET', kt, 'E', s)
end

-- cancel_leased ends unleased task id (record kt), asked to be cancelled while leased (cancel.lua),
-- as cancelled: a cancel acknowledged to its caller is not undone by a retry, a hand-back or a
-- failure, and the task holds no partition.
local function cancel_leased(id, kt, now)
  task_end(id, kt, 'cancelled', nil, 'cancelled', 0, now)
  redis.call('DEL', kt)
  stat('cancelled', 1)
end

-- back returns an unleased task to pending: an ordered task to its exact position, with its
-- partition blocked until now+delay; an unordered one at now+delay.
local function back(id, kt, p, now, delay)
  local f = redis.call('HMGET', kt, 'r', 's', 't', 'c')
  f[1] = f[1] or '0'
  f[2] = string.rep('0', 20 - #f[2]) .. f[2] -- the sequence number padded (next_seq)
  local t = tonumber(f[3] or f[4]) -- no t: available when published, at c
  if is_ordered(p) then
    if delay > 0 then
      local _, _, blocked = meta(p)
      if not blocked or blocked < now + delay then meta_set(p, 'b', now + delay) end
    end
  else
    t = now + delay
  end
  redis.call('HSET', kt, 'S', 'p', 't', t)
  pend(id, kt, p, f[1], f[2], t)
  stat('pending', 1)
end

-- unhalt ends dead letter id's hold of ordered partition p (it is requeued or deleted). When id
-- holds p (m:<p> field h), the first dead letter waiting to hold p (field hq) holds it next; with
-- none, p goes on with its next task. When id waits to hold p, it waits no more. Returns whether id
-- held p or waited to. hq is the dead letters that died while p was held, in order of death, each
-- written as its length, ':' and its id (an id may hold any byte).
local function unhalt(p, id)
  local km = k_meta(p)
  local m = redis.call('HMGET', km, 'h', 'hq')
  local q, rest, next_id, found = m[2] or '', '', nil, m[1] == id
  local i = 1
  while i <= #q do
    local c = string.find(q, ':', i, true)
    local n = tonumber(string.sub(q, i, c - 1))
    local e = string.sub(q, c + 1, c + n)
    if e == id and not found then
      found = true
    elseif m[1] == id and not next_id then
      next_id = e
    else
      rest = rest .. n .. ':' .. e
    end
    i = c + n + 1
  end
  if not found then return false end
  if rest ~= '' then redis.call('HSET', km, 'hq', rest) elseif m[2] then redis.call('HDEL', km, 'hq') end
  if m[1] ~= id then return true end
  if next_id then
    redis.call('HSET', km, 'h', next_id)
  else
    meta_del(p, 'h')
    redis.call('ZREM', k_halted(), p)
    place(p, clock_ms or now_ms())
  end
  return true
end

-- drop deletes dead-lettered task id entirely. A flow step's dead letter deleted has failed for
-- good: its flow and its children are told; an ordered partition it held goes on.
local function drop(id)
  local kt = k_task(id)
  local f = redis.call('HMGET', kt, 'F', 'H', 'x', 'j', 'p', 'K', 'D')
  if f[1] then
    flow_end(id, f[1], f[2] or BASE, 'X', f[3], f[6])
    if not f[6] then redis.call('DEL', k_parents(id)) end
  end
  if f[7] then children_end(id, 'purged') end
  if f[4] then unhalt(f[5], id) end
  emit('purged', id)
  redis.call('DEL', kt)
  redis.call('ZREM', K_DEAD, id)
end

-- bury moves an unleased task to the dead letters with its last error, then trims the dead letters
-- to at most maxcount entries (0: no cap) and maxage ms (0: no cap), oldest first, at most 100 a call.
-- An empty reason keeps the last error the task had. The dead set's score is the time of death in
-- microsecond units made unique: max(now ms × 1000, last score + 1), so letters that die in the same
-- millisecond still trim oldest first; it stays below 2^53 until about the year 2255.
local function bury(id, kt, reason, now, maxcount, maxage)
  redis.call('HSET', kt, 'S', 'd')
  if reason ~= '' then redis.call('HSET', kt, 'x', reason) else reason = redis.call('HGET', kt, 'x') end
  task_end(id, kt, 'dead', nil, reason, 0, now)
  emit('dead', id, 'e', reason or '')
  -- Published to hold its ordered partition when it dies (j): the rest of the partition waits
  -- until this dead letter is requeued or deleted, or the partition is resumed. The caller places
  -- the partition, which finds it held.
  local hold = redis.call('HMGET', kt, 'j', 'p')
  if hold[1] and is_ordered(hold[2]) then
    local km = k_meta(hold[2])
    local holder = redis.call('HGET', km, 'h')
    if not holder then
      meta_set(hold[2], 'h', id)
      redis.call('ZADD', k_halted(), int(now), hold[2])
    elseif holder ~= id then
      -- A partition held already stays held by its first dead letter; this one waits to hold it
      -- after (unhalt), so the partition goes on only once each of them is requeued or deleted.
      redis.call('HSET', km, 'hq', (redis.call('HGET', km, 'hq') or '') .. #id .. ':' .. id)
    end
  end
  local last = redis.call('ZRANGE', K_DEAD, -1, -1, 'WITHSCORES')
  local score = now * 1000
  if last[2] and last[2] + 0 >= score then score = last[2] + 1 end
  redis.call('ZADD', K_DEAD, score, id)
  stat('dead', 1)
  local budget, trimmed = 100, 0
  if maxcount > 0 then
    local over = math.min(redis.call('ZCARD', K_DEAD) - maxcount, budget)
    if over > 0 then
      local ids = redis.call('ZRANGE', K_DEAD, 0, over - 1)
      for i = 1, #ids do drop(ids[i]) end
      trimmed = #ids
    end
  end
  if maxage > 0 and budget - trimmed > 0 then
    local ids = redis.call('ZRANGEBYSCORE', K_DEAD, '-inf', '(' .. string.format('%d', (now - maxage) * 1000),
      'LIMIT', 0, budget - trimmed)
    for i = 1, #ids do drop(ids[i]) end
    trimmed = trimmed + #ids
  end
  stat('trimmed', trimmed)
end
