-- ack_tasks.lua: the work of an ack, as a function, for ack.lua and ack_fetch.lua. Included after
-- common.lua, outcome.lua and flow.lua; the caller runs flow_run (when flow_queue is set) and finish()
-- afterwards.

-- ack_tasks completes the leased tasks named by ARGV[first…last], 3 per task (id, fencing token,
-- the handler's result or ''): each record is deleted, and a partition whose last leased task this
-- was is released to the round-robin. A task whose end is recorded (lease_outcome) leaves its
-- outcome and moves its flow on (task_end); any other with a result keeps it for keep ms (0: not
-- kept). window is the dedup window in ms (0: none). Returns one code per task: OK, STALE (the
-- token is not the current lease's) or NOTFOUND.
local function ack_tasks(now, window, keep, first, last)
  local now_s = int(now) -- formatted once, not per acked id (see int)
  local res, parts, seen, done, keys, seen_id = {}, {}, {}, {}, {}, {}
  local acked = 0
  local dedup = {} -- score, id pairs for one variadic ZADD to dedup

  local ids = {}
  for i = first, last, 3 do ids[#ids + 1] = ARGV[i] end
  local leases = leases_of(ids)

  for j = 1, #ids do
    local id, token, v = ids[j], ARGV[first + 3 * j - 2], leases[j]
    local kt = k_task(id)
    if seen_id[id] then
      res[#res + 1] = NOTFOUND -- a repeat of an id in this call finds it acked already
    elseif not v then
      -- Not leased: a task that went back to pending or died is still there, an acked one is not.
      if redis.call('EXISTS', kt) == 1 then res[#res + 1] = STALE else res[#res + 1] = NOTFOUND end
    elseif lease_token(v) ~= token then
      res[#res + 1] = STALE
    else
      seen_id[id] = true
      done[#done + 1] = id
      keys[#keys + 1] = kt
      -- Only a task fetched from an ordered or limited partition is in its partition's held set.
      if lease_tracked(v) then
        local p = redis.call('HGET', kt, 'p')
        if p and redis.call('SREM', k_held(p), id) == 1 and not seen[p] then
          seen[p] = true
          parts[#parts + 1] = p
        end
      end
      local result = ARGV[first + 3 * j - 1]
      if lease_outcome(v) then
        task_end(id, kt, 'ok', result, nil, keep, now)
      elseif keep > 0 and result ~= '' then
        outcome_put(id, 'ok', result, nil, keep, false, now)
      end
      if window > 0 then dedup[#dedup + 1] = now_s; dedup[#dedup + 1] = id end
      acked = acked + 1
      if EVENTS_MAX then emit('acked', id) end
      res[#res + 1] = OK
    end
  end

  for i = 1, #done, 1000 do
    local j = math.min(i + 999, #done)
    redis.call('DEL', unpack(keys, i, j))
    redis.call('ZREM', K_INFLIGHT, unpack(done, i, j))
    redis.call('HDEL', K_LEASES, unpack(done, i, j))
  end
  if #dedup > 0 then bulk('ZADD', K_DEDUP, nil, dedup) end
  for i = 1, #parts do
    -- An ordered partition was held, so it is in neither index; a limited one may be in either.
    -- An ack leaves pending tasks alone, and comes first in its script: heads is exact.
    place(parts[i], now, is_ordered(parts[i]), true)
  end
  if window > 0 and acked > 0 then prune_dedup(now, window, math.min(100 + acked, 1000)) end
  stat('acked', acked)
  return res
end
