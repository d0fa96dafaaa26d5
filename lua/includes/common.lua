-- common.lua: state, keys and helpers every script shares. Included first by every script.
--
-- KEYS are the same for every script, in this order (engine/keys.go builds them):
--   KEYS[1] ready    ZSET   partitions that can yield work now; score = round-robin turn
--   KEYS[2] sched    ZSET   partitions whose next work is in the future; score = ms it becomes available
--   KEYS[3] inflight ZSET   leased task ids; score = lease deadline ms
--   KEYS[4] dead     ZSET   dead-lettered task ids; score = time of death in ms × 1000, made unique
--   KEYS[5] stats    HASH   counters kept by the scripts
--   KEYS[6] seq      STRING decimal counter for publish sequence numbers and fencing tokens
--   KEYS[7] wake     LIST   wake-up tokens that blocked fetchers pop
--   KEYS[8] dedup    ZSET   recently acked ids (only with a dedup window); score = ack ms
--   KEYS[9] ctl      SET    partitions that have controls (a meta hash): paused, limited or blocked
--   KEYS[10] depth   ZSET   partitions with pending tasks; score = their number of pending tasks
--   KEYS[11] heads   ZSET   partitions with pending tasks; score = available-at ms of their earliest one
--   KEYS[12] consumers ZSET consumers seen recently; score = ms of their last fetch or extend
--   KEYS[13] qpause  STRING present while the whole queue is paused; value = ms it was paused
--   KEYS[14] ppause  ZSET   paused partitions; score = ms they were paused
-- ARGV[1] is the key base "<prefix>:{<queue>}:"; per-task and per-partition keys are built from it
-- and share the queue's hash tag. The variable part (id or partition) always ends the key, after a
-- fixed kind marker, so no id or partition can make two keys collide.

if redis.replicate_commands then redis.replicate_commands() end

local K_READY, K_SCHED, K_INFLIGHT, K_DEAD = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_STATS, K_SEQ, K_WAKE, K_DEDUP, K_CTL = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local K_DEPTH, K_HEADS, K_CONSUMERS, K_QPAUSE, K_PPAUSE = KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14]
local BASE = ARGV[1]

-- Result codes; engine/errors.go maps them to Go errors.
local OK, STALE, NOTFOUND, DUPLICATE, NOTDEAD, DEAD = 0, 1, 2, 3, 4, 5

local function k_task(id) return BASE .. 't:' .. id end
local function k_meta(p) return BASE .. 'm:' .. p end
local function k_levels(p) return BASE .. 'r:' .. p end
local function k_pending(p, level) return BASE .. 'q:' .. level .. ':' .. p end
local function k_held(p) return BASE .. 'l:' .. p end

-- Ordered partitions are the keys that start with '!'.
local function is_ordered(p) return string.byte(p, 1) == 33 end

-- now_ms is the Redis server's clock: workers' clocks never decide what is due.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The counter in K_SEQ is kept as a decimal string and split into a high part and a low part of
-- 15 digits, so every value stays exact in Lua's doubles far past 2^53. next_seq hands out the
-- values as fixed-width 20-digit strings, whose byte order is their numeric order.
local SEQ_SPLIT = 1000000000000000
local seq_hi, seq_lo

local function next_seq()
  if not seq_hi then
    seq_hi, seq_lo = 0, 0
    local s = redis.call('GET', K_SEQ)
    if s then
      local n = #s
      if n > 15 then
        seq_hi, seq_lo = tonumber(string.sub(s, 1, n - 15)), tonumber(string.sub(s, n - 14))
      else
        seq_lo = tonumber(s)
      end
    end
  end
  seq_lo = seq_lo + 1
  if seq_lo >= SEQ_SPLIT then seq_hi, seq_lo = seq_hi + 1, seq_lo - SEQ_SPLIT end
  return string.format('%05d%015d', seq_hi, seq_lo)
end

local function stat(field, n)
  if n ~= 0 then redis.call('HINCRBY', K_STATS, field, n) end
end

-- ready_push appends p to the round-robin order, behind every partition already waiting; for a p
-- already in ready, ZADD moves it there.
local ready_tail
local function ready_push(p)
  if not ready_tail then
    local last = redis.call('ZRANGE', K_READY, -1, -1, 'WITHSCORES')
    ready_tail = tonumber(last[2]) or 0
  end
  ready_tail = ready_tail + 1
  redis.call('ZADD', K_READY, ready_tail, p)
end

-- meta returns p's controls: paused flag, concurrency limit (unordered only) and blocked-until ms.
-- Most partitions have none: the ctl set names those that do, so a queue without controls never
-- looks up a meta hash, and one with a few looks up only theirs.
local ctl_count
local function meta(p)
  if ctl_count == nil then ctl_count = redis.call('SCARD', K_CTL) end
  if ctl_count == 0 or redis.call('SISMEMBER', K_CTL, p) == 0 then return nil, nil, nil end
  local m = redis.call('HMGET', k_meta(p), 'ps', 'lim', 'b')
  return m[1], tonumber(m[2]), tonumber(m[3])
end

-- meta_set and meta_del change one control of p, keeping the ctl set in step with the meta hashes.
local function meta_set(p, field, value)
  redis.call('HSET', k_meta(p), field, value)
  redis.call('SADD', K_CTL, p)
  ctl_count = nil
end

local function meta_del(p, field)
  redis.call('HDEL', k_meta(p), field)
  if redis.call('EXISTS', k_meta(p)) == 0 then
    redis.call('SREM', K_CTL, p)
    ctl_count = nil
  end
end

-- is_held says whether p may not hand out more work: an ordered partition while any of its tasks
-- is leased, a limited one while it has limit tasks leased.
local function is_held(p, limit)
  if is_ordered(p) then return redis.call('EXISTS', k_held(p)) == 1 end
  if limit then return redis.call('SCARD', k_held(p)) >= limit end
  return false
end

-- earliest is the smallest available-at among the heads of p's priority levels; nil when p has
-- nothing pending. Cost: one ZRANGE per priority level in use.
local function earliest(p)
  local levels = redis.call('ZRANGE', k_levels(p), 0, -1)
  local e
  for i = 1, #levels do
    local head = redis.call('ZRANGE', k_pending(p, levels[i]), 0, 0, 'WITHSCORES')
    local s = tonumber(head[2])
    if s and (not e or s < e) then e = s end
  end
  return e
end

-- pick returns the task p serves next at time now: the head of the highest priority level whose
-- head is available (a delayed head of a higher level holds nothing back), as its member, level,
-- pending key and the score of the task behind it in that level (nil if none). levels, highest
-- first, may be passed when already read.
local function pick(p, now, levels)
  levels = levels or redis.call('ZREVRANGE', k_levels(p), 0, -1)
  for i = 1, #levels do
    local kp = k_pending(p, levels[i])
    local head = redis.call('ZRANGE', kp, 0, 1, 'WITHSCORES')
    if head[2] and tonumber(head[2]) <= now then return head[1], levels[i], kp, tonumber(head[4]) end
  end
  return nil
end

-- schedule puts p in sched at time e. Sleepers wait until the earliest due time they know of; one
-- that is now earlier wakes one of them to wait for the new time instead.
local wakes = 0
local function schedule(p, e)
  local head = redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')
  if not head[2] or e < tonumber(head[2]) then wakes = wakes + 1 end
  redis.call('ZADD', K_SCHED, e, p)
end

-- place puts p where its state says it belongs: in ready (keeping its turn if already there), in
-- sched at the time it can next yield work, or in neither (empty, paused or held). Every script
-- that changes a partition places it (fetch and publish with shortcuts for what they already
-- know). outside says p is known to be in neither index, as a held partition whose last lease just
-- ended is, which spares the look-ups of ready and sched. Counts the partitions that became ready,
-- for wake-ups, and returns whether p is in ready now.
local function place(p, now, outside)
  local paused, limit, blocked = meta(p)
  local e
  if not paused and not is_held(p, limit) then e = earliest(p) end
  if not e then
    if not outside then
      redis.call('ZREM', K_READY, p)
      redis.call('ZREM', K_SCHED, p)
    end
    if blocked and blocked <= now then meta_del(p, 'b') end
    return false
  end
  if blocked and blocked > e then e = blocked end
  if e <= now then
    if outside or not redis.call('ZSCORE', K_READY, p) then
      if not outside then redis.call('ZREM', K_SCHED, p) end
      ready_push(p)
      wakes = wakes + 1
    end
    return true
  end
  if not outside then redis.call('ZREM', K_READY, p) end
  schedule(p, e)
  return false
end

-- The partition indexes depth and heads are written once per script, by finish: the scripts only
-- note here what changed, per partition, in Lua tables. ix_delta is the change of p's pending
-- count; ix_low the earliest available-at of a task that joined p's pending tasks; ix_head what
-- p's earliest available-at is now when the script knows it exactly (a number), or false when it
-- must be read again (earliest) because a pending task left p without the script knowing what
-- comes next.
local ix_parts, ix_delta, ix_low, ix_head = {}, {}, {}, {}

local function ix_touch(p)
  if ix_delta[p] == nil then ix_delta[p] = 0; ix_parts[#ix_parts + 1] = p end
end

-- depth_add notes that p's pending count changed by n.
local function depth_add(p, n)
  ix_touch(p)
  ix_delta[p] = ix_delta[p] + n
end

-- head_lower notes that a task available at t joined p's pending tasks.
local function head_lower(p, t)
  ix_touch(p)
  if not ix_low[p] or t < ix_low[p] then ix_low[p] = t end
end

-- head_is notes that p's earliest pending available-at is t now (nil: p has none left), or false:
-- unknown, read it again at the end.
local function head_is(p, t)
  ix_touch(p)
  ix_head[p] = t
  ix_low[p] = nil
end

-- bulk sends cmd key args… in chunks, so no unpack exceeds Lua's stack.
local function bulk(cmd, key, opt, args)
  for i = 1, #args, 1000 do
    local j = math.min(i + 999, #args)
    if opt then
      redis.call(cmd, key, opt, unpack(args, i, j))
    else
      redis.call(cmd, key, unpack(args, i, j))
    end
  end
end

-- index_flush writes what the script noted into depth and heads: one ZINCRBY for a single touched
-- partition, else one ZMSCORE and one variadic ZADD for all; one variadic ZADD (or ZADD LT) of
-- heads; one ZREM of each for the partitions left with nothing pending.
local function index_flush()
  local n = #ix_parts
  if n == 0 then return end
  local counts = {}
  if n == 1 then
    local p = ix_parts[1]
    if ix_delta[p] == 0 then
      counts[1] = tonumber(redis.call('ZSCORE', K_DEPTH, p)) or 0
    else
      counts[1] = tonumber(redis.call('ZINCRBY', K_DEPTH, ix_delta[p], p))
    end
  else
    local cur = {}
    for i = 1, n, 1000 do
      local part = redis.call('ZMSCORE', K_DEPTH, unpack(ix_parts, i, math.min(i + 999, n)))
      for j = 1, #part do cur[#cur + 1] = part[j] end
    end
    local set = {}
    for i = 1, n do
      local p = ix_parts[i]
      local c = (tonumber(cur[i]) or 0) + ix_delta[p]
      counts[i] = c
      if c > 0 and ix_delta[p] ~= 0 then set[#set + 1] = c; set[#set + 1] = p end
    end
    if #set > 0 then bulk('ZADD', K_DEPTH, nil, set) end
  end
  local gone, exact, low = {}, {}, {}
  for i = 1, n do
    local p = ix_parts[i]
    if counts[i] <= 0 then
      gone[#gone + 1] = p
    else
      local h = ix_head[p]
      if h == false then
        h = earliest(p) -- reads every change, additions included
      elseif h and ix_low[p] and ix_low[p] < h then
        h = ix_low[p]
      end
      if h then
        exact[#exact + 1] = h; exact[#exact + 1] = p
      elseif ix_low[p] then
        low[#low + 1] = ix_low[p]; low[#low + 1] = p
      end
    end
  end
  if #exact > 0 then bulk('ZADD', K_HEADS, nil, exact) end
  if #low > 0 then bulk('ZADD', K_HEADS, 'LT', low) end
  if #gone > 0 then
    bulk('ZREM', K_DEPTH, nil, gone)
    bulk('ZREM', K_HEADS, nil, gone)
  end
end

-- CONSUMERS_KEEP_MS and CONSUMERS_MAX bound the consumers set: a consumer not seen for an hour is
-- dropped, and at most 10,000 are kept (the least recently seen go first).
local CONSUMERS_KEEP_MS, CONSUMERS_MAX = 3600000, 10000

-- seen records that consumer fetched or extended at now; a consumer new to the set prunes it.
local function seen_consumer(consumer, now)
  if redis.call('ZADD', K_CONSUMERS, now, consumer) == 1 then
    redis.call('ZREMRANGEBYSCORE', K_CONSUMERS, '-inf', '(' .. (now - CONSUMERS_KEEP_MS))
    redis.call('ZREMRANGEBYRANK', K_CONSUMERS, 0, -(CONSUMERS_MAX + 1))
  end
end

-- pend puts task id (record kt, partition p) into its partition's pending set at time t.
local function pend(id, kt, p, level, s, t)
  redis.call('ZADD', k_pending(p, level), t, s .. id)
  redis.call('ZADD', k_levels(p), level, level)
  depth_add(p, 1)
  head_lower(p, t)
end

-- unlease ends the lease of task id of partition p.
local function unlease(id, kt, p)
  redis.call('ZREM', K_INFLIGHT, id)
  redis.call('SREM', k_held(p), id)
  redis.call('HDEL', kt, 'k', 'w', 'l')
end

-- back returns an unleased task to pending: an ordered task to its exact position, with its
-- partition blocked until now+delay; an unordered one at now+delay.
local function back(id, kt, p, now, delay)
  local f = redis.call('HMGET', kt, 'r', 's', 't')
  f[1] = f[1] or '0'
  local t = tonumber(f[3])
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

-- drop deletes dead-lettered task id entirely.
local function drop(id)
  redis.call('DEL', k_task(id))
  redis.call('ZREM', K_DEAD, id)
end

-- bury moves an unleased task to the dead letters with its last error, then trims the dead letters
-- to at most maxcount entries (0: no cap) and maxage ms (0: no cap), oldest first, at most 100 a call.
-- An empty reason keeps the last error the task had. The dead set's score is the time of death in
-- microsecond units made unique: max(now ms × 1000, last score + 1), so letters that die in the same
-- millisecond still trim oldest first; it stays below 2^53 until about the year 2255.
local function bury(id, kt, reason, now, maxcount, maxage)
  redis.call('HSET', kt, 'S', 'd')
  if reason ~= '' then redis.call('HSET', kt, 'x', reason) end
  local last = redis.call('ZRANGE', K_DEAD, -1, -1, 'WITHSCORES')
  local score = now * 1000
  if last[2] and tonumber(last[2]) >= score then score = tonumber(last[2]) + 1 end
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

-- prune_dedup forgets ids acked before the dedup window, a bounded chunk at a time.
local function prune_dedup(now, window, chunk)
  local old = redis.call('ZRANGEBYSCORE', K_DEDUP, '-inf', now - window, 'LIMIT', 0, chunk)
  if #old > 0 then redis.call('ZREM', K_DEDUP, unpack(old)) end
end

-- finish writes the partition indexes, saves the counter and wakes up to 32 blocked fetchers when
-- work became ready.
local function finish()
  index_flush()
  if seq_hi then
    if seq_hi > 0 then
      redis.call('SET', K_SEQ, string.format('%d%015d', seq_hi, seq_lo))
    else
      redis.call('SET', K_SEQ, string.format('%d', seq_lo))
    end
  end
  if wakes > 0 then
    local tokens = {}
    for i = 1, math.min(wakes, 32) do tokens[i] = '1' end
    redis.call('LPUSH', K_WAKE, unpack(tokens))
    redis.call('LTRIM', K_WAKE, 0, 63)
  end
end
