-- enqueue.lua: where a task just added to its partition's pending set leaves the partition, for
-- publish.lua's single-task paths. Included after common.lua. No state.

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
-- one task to it, available at t (t_s as Redis is sent it), as place and index_flush would for
-- it, and asks finish to wake a sleeper when the task can be fetched now.
-- Cost: ZSCORE ready, ZINCRBY depth, and ZADD heads when p had nothing pending or is not ready.
local function enqueued(p, t, t_s, now)
  -- A partition in ready keeps its turn, and its head is at most now: a task available from now on
  -- changes neither.
  local in_ready = redis.call('ZSCORE', K_READY, p) ~= false
  local ready_now = in_ready
  if not in_ready then ready_now = place_new(p, t, now) end
  if ready_now and t <= now then wakes = math.max(wakes, 1) end
  if redis.call('ZINCRBY', K_DEPTH, '1', p) + 0 == 1 then
    redis.call('ZADD', K_HEADS, t_s, p) -- p had nothing pending
    if redis.call('ZCARD', K_DEPTH) == 1 then indexes_fresh() end -- nor had any other partition
  elseif not in_ready or t < now then
    redis.call('ZADD', K_HEADS, 'LT', t_s, p)
  end
end
