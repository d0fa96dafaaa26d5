-- fetch_tasks.lua: the work of a fetch, as functions, for fetch.lua and ack_fetch.lua. Included
-- after common.lua. A script runs fetch_begin once, then fetch_tasks once per consumer it fetches
-- for, then fetch_end, then finish().

-- The leases of every fetch_tasks call of the script, written by fetch_end with one ZADD to
-- inflight (score, id pairs) and one HSET to K_LEASES (id, lease pairs).
local fetch_leased, fetch_leases, fetch_taken = {}, {}, 0
local fetch_paused = false

-- fetch_begin prepares the fetches of one script, which lease at most n tasks in all: it reserves
-- their fencing tokens, finds out whether the queue is paused, and moves due partitions from sched
-- to ready, a bounded chunk a call.
local function fetch_begin(now, n)
  seq_reserve(n) -- one fencing token per task leased, at most n
  -- A paused queue hands out nothing; a wake-up token left would only make sleepers spin. The
  -- usual answer, no queue pause, no controls and no priorities anywhere, takes one EXISTS.
  if redis.call('EXISTS', K_QPAUSE, K_CTL, K_PRIO) == 0 then
    ctl_count, prio_count = 0, 0
  elseif redis.call('EXISTS', K_QPAUSE) == 1 then
    redis.call('DEL', K_WAKE)
    wakes = 0
    fetch_paused = true
    return
  end
  local due = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', int(now), 'LIMIT', '0', int(math.max(64, 4 * n)))
  for i = 1, #due do
    redis.call('ZREM', K_SCHED, due[i])
    if not redis.call('ZRANK', K_READY, due[i]) then ready_push(due[i]) end
  end
end

-- fetch_tasks leases up to n tasks to consumer until now + lease, serving ready partitions
-- round-robin, and returns {now ms, lease deadline ms, ms until the next delayed work is due (-1:
-- none; 0 when tasks were leased), 12 values per task…} (fetch.lua lists them) and the number of
-- tasks leased. Each turn takes one task and sends the partition behind all others. An ordered
-- partition taken here leaves the round-robin, held by consumer until all of its leased tasks
-- end. Only when no partition is ready any more does it take further tasks of the ordered
-- partitions it holds, as consecutive runs of up to maxrun tasks each.
local function fetch_tasks(now, consumer, n, lease, maxrun)
  local deadline = now + lease
  local deadline_s = int(deadline)

  seen_consumer(consumer, now)
  if fetch_paused then return {now, deadline, -1}, 0 end

  local out = {now, deadline, 0}
  local taken = 0
  local leased, leases = fetch_leased, fetch_leases
  local tail_tracked, tail_plain = 't' .. consumer, 'u' .. consumer -- a lease after its token
  local tail_tracked_end, tail_plain_end = 'T' .. consumer, 'U' .. consumer -- its end is recorded

  -- take leases task member of level (pending set kp) of partition p; next_score is the score of
  -- the task behind it in that level, nil if none (the level empties). A tracked lease (ordered or
  -- limited p) is added to the held set l:<p>. The record is only read: its attempts field counts
  -- the deliveries that ended (the one leased now is the next), and the lease is kept in K_LEASES.
  local function take(p, member, level, kp, next_score, track)
    redis.call('ZREM', kp, member)
    if not next_score then level_gone(p, level) end
    depth_add(p, -1)
    local id = string.sub(member, 21)
    local kt = k_task(id)
    local f = redis.call('HMGET', kt, 'a', 'm', 'c', 't', 'd', 'h', 'n', 'x', 'o', 'W')
    if f[10] then
      -- A workflow's wait that was pending until its time: the delivery ends it, and it becomes
      -- the last wait (L), which the handler reads (a signal sent from now on is kept).
      redis.call('HSET', kt, 'L', f[10])
      redis.call('HDEL', kt, 'W')
    end
    local attempt = '1' -- a first attempt, the usual case, needs no formatting
    if f[1] then attempt = int(f[1] + 1) end
    local token = next_seq()
    leases[#leases + 1] = id
    if track then
      leases[#leases + 1] = token .. (f[9] and tail_tracked_end or tail_tracked)
      redis.call('SADD', k_held(p), id)
    else
      leases[#leases + 1] = token .. (f[9] and tail_plain_end or tail_plain)
    end
    leased[#leased + 1] = deadline_s
    leased[#leased + 1] = id
    taken = taken + 1
    -- The numbers go out as the record holds them, decimal strings, for the client to parse:
    -- tonumber would parse each with strtod here, on the server's one thread. The row's 12 fields
    -- are appended to out itself, not as a table of their own: a table per task would cost Lua an
    -- allocation and its collection, and Redis the probes it runs on every table of a reply.
    local k = #out -- in order, one at a time: each lands in the array part, appended
    out[k + 1] = id; out[k + 2] = token; out[k + 3] = p; out[k + 4] = level; out[k + 5] = attempt
    out[k + 6] = f[2] or 0; out[k + 7] = f[3] or 0; out[k + 8] = f[4] or f[3] or 0; out[k + 9] = f[5] or ''
    out[k + 10] = f[6] or ''; out[k + 11] = f[7] or 0; out[k + 12] = f[8] or ''
  end

  -- Round-robin: read the next partitions of ready in one call, serve each one task, and send each
  -- behind all others (or out of ready); repeat while tasks are wanted and partitions are ready.
  -- Every turn leases a task or takes a partition out of ready, so the loop is bounded by n plus the
  -- stale entries it meets; the cap only guards against a bug. An ordered partition in ready is
  -- never held: fetch takes it out of ready when it leases from it, and place keeps a held one out.
  local held = {}
  local turns = 0
  while taken < n and turns < 2 * n + 64 do
    ready_flush() -- the partitions the last turn sent to the tail or took out
    local heads = redis.call('ZRANGE', K_READY, '0', int(n - taken - 1))
    if #heads == 0 then break end
    for i = 1, #heads do
      if taken >= n then break end
      turns = turns + 1
      local p = heads[i]
      local paused, limit, blocked = meta(p)
      if paused or (blocked and blocked > now) or (limit and is_held(p, limit)) then
        place(p, now)
      else
        local levels = levels_of(p)
        local member, level, kp, next_score, next_s, at, low, low_s = pick(p, now, levels)
        -- p's new head, once member is taken: the task behind it, the delayed heads of the levels
        -- pick looked at before its level, and the heads of the levels after it (with one level,
        -- the first alone).
        local e, e_s = next_score, next_s
        if member then
          if low and (not e or low < e) then e, e_s = low, low_s end
          e, e_s = earliest_below(p, levels, at, e, e_s)
        end
        if not member then
          redis.call('ZREM', K_READY, p)
          place(p, now)
        elseif is_ordered(p) then
          take(p, member, level, kp, next_score, true)
          head_is(p, e, e_s)
          ready_del(p) -- held by this consumer until its leased tasks end
          held[#held + 1] = p
        else
          take(p, member, level, kp, next_score, limit)
          head_is(p, e, e_s)
          if limit and redis.call('SCARD', k_held(p)) >= limit then e = nil end
          if not e then
            ready_del(p)
          elseif e <= now then
            ready_push(p)
          else
            ready_del(p)
            schedule(p, e)
          end
        end
      end
    end
  end

  -- Nothing else is ready: lengthen the runs of the ordered partitions this fetch holds.
  for i = 1, #held do
    local p, run = held[i], 1
    while taken < n and run < maxrun do
      local member, level, kp, next_score = pick(p, now)
      if not member then break end
      take(p, member, level, kp, next_score, true)
      head_is(p, false)
      run = run + 1
    end
  end
  fetch_taken = fetch_taken + taken
  -- Partitions this fetch sent to the back of ready were ready before it and wake nobody (ready_push
  -- counts no wake-up); a partition it scheduled earlier than any before does (schedule).
  if taken == 0 then
    -- Nothing is ready, so any wake-up token left is stale; drop them so sleepers sleep.
    redis.call('DEL', K_WAKE)
    local next_due = redis.call('ZRANGE', K_SCHED, '0', '0', 'WITHSCORES')
    if next_due[2] then out[3] = math.max(1, next_due[2] - now) else out[3] = -1 end
  end
  return out, taken
end

-- fetch_end writes the leases of the script's fetches and counts the tasks they took off pending.
local function fetch_end()
  local leased, leases = fetch_leased, fetch_leases
  -- In chunks: unpack fails past about 8000 values (a fetch of 4000 tasks).
  local added = 0
  for i = 1, #leased, 1000 do
    added = added + redis.call('ZADD', K_INFLIGHT, unpack(leased, i, math.min(i + 999, #leased)))
  end
  for i = 1, #leases, 1000 do redis.call('HSET', K_LEASES, unpack(leases, i, math.min(i + 999, #leases))) end
  -- Only a listpack that held leases before this fetch is converted (LEASES_CONVERT): a consumer
  -- whose leases all end before its next fetch makes the keys anew on every call, and would
  -- convert them on every call.
  if added > 0 then
    local size = redis.call('ZCARD', K_INFLIGHT)
    if size >= LEASES_CONVERT and size > added and is_listpack(K_INFLIGHT) then leases_convert() end
  end
  stat('pending', -fetch_taken)
end
