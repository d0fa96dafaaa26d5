-- enqueue.lua: what publish.lua and publish_usual.lua share: the duplicate check, the usual task's
-- record (publish_usual.lua writes these two out in its loop), and where tasks just added to their
-- partition's pending set leave the partition. Included after common.lua. No state.

-- is_duplicate says whether task id (record kt) exists (pending, leased or dead) or, with a dedup
-- window of window ms, was acked within it at time now.
local function is_duplicate(id, kt, window, now)
  if redis.call('EXISTS', kt) == 1 then return true end
  if window == 0 then return false end
  local acked = redis.call('ZSCORE', K_DEDUP, id)
  return acked and acked + 0 > now - window
end

-- record_usual writes the record (kt) of a task at priority 0 with no headers, no outcome kept and
-- no hold: payload d, partition p, sequence number s (as next_seq(true) gives it), published at
-- now_s, available at t_s, and max attempts max ('0': unlimited). A pending task has no state
-- field, a level-0 task no level field, a task of unlimited attempts no max and a task available
-- when it was published no available-at (t; readers take c for it): absent means those, and every
-- byte of a record counts when millions wait, as does every field of an HSET (Redis grows the
-- record with a realloc per field and value).
local function record_usual(kt, d, p, s, t_s, now_s, max)
  if t_s == now_s then
    if max == '0' then
      redis.call('HSET', kt, 'd', d, 'p', p, 's', s, 'c', now_s)
    else
      redis.call('HSET', kt, 'd', d, 'p', p, 's', s, 'c', now_s, 'm', max)
    end
  elseif max == '0' then
    redis.call('HSET', kt, 'd', d, 'p', p, 's', s, 'c', now_s, 't', t_s)
  else
    redis.call('HSET', kt, 'd', d, 'p', p, 's', s, 'c', now_s, 't', t_s, 'm', max)
  end
end

-- place_new places partition p, which is not in ready, after a publish at time now gave it work
-- available from first_t on. Without controls and not held, p is in sched (at its earliest time)
-- or was empty, so its place follows from that score and first_t alone; otherwise place decides.
-- Returns whether p is in ready now.
local function place_new(p, first_t, now)
  local paused, limit, blocked = meta(p)
  if paused or limit or blocked then return place(p, now) end
  if is_ordered(p) and redis.call('EXISTS', k_held(p)) == 1 then return false end
  local e = first_t
  local s = redis.call('ZSCORE', K_SCHED, p)
  s = s and s + 0
  if s and s < e then e = s end
  if e <= now then
    if s then redis.call('ZREM', K_SCHED, p) end
    ready_push(p)
    return true
  end
  if e ~= s then
    if s then redis.call('ZREM', K_SCHED, p) end
    schedule(p, e)
  end
  return false
end

-- enqueued places partition p and updates the partition indexes after a publish at time now added
-- n tasks to it, the earliest available at t (t_s as Redis is sent it), as place and index_flush
-- would for them, and asks finish to wake sleepers for those that can be fetched now: all n when
-- t <= now, as the callers add either tasks available now or a single one. ready is whether p is
-- in ready when the caller knows it (an earlier call of this script call found it there or put it
-- there: ready_push defers the write, so ZSCORE would not see it), else nil. Returns whether p is
-- in ready now.
-- Cost: ZRANK ready unless known, ZINCRBY depth, and ZADD heads when p had nothing pending or is
-- not ready.
local function enqueued(p, n, t, t_s, now, ready)
  -- A partition in ready keeps its turn, and its head is at most now: tasks available from now on
  -- change neither.
  local in_ready = ready
  if in_ready == nil then in_ready = redis.call('ZRANK', K_READY, p) ~= false end
  local ready_now = in_ready
  if not in_ready then ready_now = place_new(p, t, now) end
  if ready_now and t <= now then wakes = wakes + n end
  -- The new depth, as Redis formats a score ("%.17g": an integer has no point or exponent), is by
  -- exactly when p had nothing pending; comparing the strings spares Lua parsing the reply.
  local by = n == 1 and '1' or int(n)
  if redis.call('ZINCRBY', K_DEPTH, by, p) == by then
    redis.call('ZADD', K_HEADS, t_s, p) -- p had nothing pending
    if redis.call('ZCARD', K_DEPTH) == 1 then indexes_fresh() end -- nor had any other partition
  elseif not in_ready or t < now then
    redis.call('ZADD', K_HEADS, 'LT', t_s, p)
  end
  return ready_now
end

-- pend_run adds a run of n tasks of partition p, all available at now (now_s), to p's level-0
-- pending set, and places p (enqueued, which is given ready and whose result it returns): member is
-- the first one's pending member, pairs nil for a run of one, else all their members as ZADD's
-- score, member pairs.
local function pend_run(p, n, member, pairs, now, now_s, ready)
  if pairs then
    bulk('ZADD', k_pending(p, '0'), nil, pairs)
  else
    redis.call('ZADD', k_pending(p, '0'), now_s, member)
  end
  return enqueued(p, n, now, now_s, now, ready)
end
