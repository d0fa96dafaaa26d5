-- debounce.lua: debounced and throttled publishes (engine.Debounce). Included after common.lua,
-- by publish.lua only, whose @cold lines make every helper here at its first use: a publish
-- without a debounce key makes none of them.
--
-- Key, built from the key base like the per-task keys, so it shares the queue's hash tag:
--   db:<key>  STRING  "<until ms>,<task id>": the task a debounced publish of key added last, and
--                     the end of its window (the task's available-at for a debounce, the publish
--                     time plus the window for a throttle). It expires (PX) 600,000 ms (10
--                     minutes, engine.DebounceKeep) after the end of that window; no script
--                     deletes it. Whether it holds is decided by the times and the task's record,
--                     never by the expiry: a task that waits that long past its window with no
--                     publish of its key in between is forgotten by the key, and the next publish
--                     adds another task.
--
-- A debounced task's record has the field 'b': its mode ('d' debounce, 't' throttle) followed by
-- its key, for the operators' views.
--
-- A debounced message's options (publish.lua, task_opts) carry the mode in the policy field ('d'
-- or 't') and "<window ms>,<key>" in the ref field, which a spawned child uses and a debounced
-- message never has.
--
-- The include has no state and one helper: the Functions library holds all includes' helpers as
-- locals of its top level, near Lua's limit (lua/library.go).

-- debounce_find decides what a debounced publish of payload d and headers h (encoded, or '') does
-- at time now: mode is 'd' or 't', ref "<window ms>,<key>", id the id of the task it would add. It
-- returns nil when the publish adds that task, having made it its key's task and written the mode
-- and key to its record's field 'b' (the caller then writes the record's other fields and adds it:
-- a publish that got here is not refused); else the reply, 'r' followed by the id of the task it
-- replaced, or 'd' and the id of the task that made it drop, and, for a replace, the partition of
-- that task, which the caller places (place) once the call's tasks are written.
--
-- Debounce: the key's task, while it is pending and no worker has taken it yet (in its pending
-- set, so not leased and not ended, and without the state field 'S', which every lease that ends
-- without an ack writes: a task back for a retry, from a crash or a requeue has it), gets payload
-- d and headers h, and its available-at moves to now + window (its record's 't', its score in its
-- pending set); the key's window moves with it. Else a task is added.
-- Throttle: dropped while now is before the key's window ends, or while its task exists and is
-- not a dead letter (pending, delayed, leased or waiting); else a task is added.
-- Cost: GET, then HMGET; a replace ZSCORE, ZADD, HSET (and HDEL of 'h' when the task had headers
-- and h is empty), SET, HINCRBY; a drop HINCRBY (and PEXPIRE when the window has passed); an add
-- SET, HSET.
local function debounce_find(mode, ref, d, h, now, new)
  local win, key = string.match(ref, '^(%d+),(.*)$')
  local keep = int(win + 600000)
  local kd = BASE .. 'db:' .. key
  local function add()
    redis.call('SET', kd, int(now + win) .. ',' .. new, 'PX', keep)
    redis.call('HSET', k_task(new), 'b', mode .. key)
    return nil
  end
  local v = redis.call('GET', kd)
  if not v then return add() end
  local untl, id = string.match(v, '^(%d+),(.*)$')
  if not id then return add() end
  local kt = k_task(id)
  if mode == 't' then
    if untl + 0 <= now then
      local rec = redis.call('HMGET', kt, 'p', 'S')
      if not rec[1] or rec[2] == 'd' then return add() end
      -- Its task outlives the window: the key lives on while publishes find it.
      redis.call('PEXPIRE', kd, keep)
    end
    stat('dropped', 1)
    return 'd' .. id
  end
  local rec = redis.call('HMGET', kt, 'p', 'r', 's', 'h', 'S')
  if not rec[1] or rec[5] then return add() end -- gone, or taken by a worker before
  local p = rec[1]
  local kp = k_pending(p, rec[2] or '0')
  local member = string.rep('0', 20 - #rec[3]) .. rec[3] .. id -- the sequence number padded (next_seq)
  if not redis.call('ZSCORE', kp, member) then return add() end -- leased, ended or waiting
  local t_s = int(now + win)
  redis.call('ZADD', kp, t_s, member)
  if h ~= '' then
    redis.call('HSET', kt, 'd', d, 't', t_s, 'h', h)
  else
    redis.call('HSET', kt, 'd', d, 't', t_s)
    if rec[4] then redis.call('HDEL', kt, 'h') end
  end
  redis.call('SET', kd, t_s .. ',' .. id, 'PX', keep)
  head_is(p, false) -- its partition's earliest time is read again at the end
  stat('replaced', 1)
  return 'r' .. id, p
end
