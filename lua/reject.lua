-- reject.lua: returns leased tasks to pending. An unordered task comes back at now+delay; an ordered
-- one keeps its exact position and its partition is blocked until now+delay, and every task of the
-- partition leased with it that comes later in the partition's order goes back too, to its own
-- position, without counting an attempt: nothing may complete before the rejected task. A task
-- whose attempts reach its max attempts goes to the dead letters instead, with the reason as its
-- last error; then the partition goes on and the later tasks stay leased.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  dead-letter cap by count (0: none)
-- ARGV[3]  dead-letter cap by age ms (0: none)
-- ARGV[4…] 5 per task: id, fencing token, delay ms, reason, counts (1: this delivery counts as an
--          attempt; 0: it does not, as for a rate limit)
-- Returns: one code per task: OK (pending again, also when an earlier item of this call took it
--          back), DEAD (dead-lettered), STALE or NOTFOUND; then RELAY (-1) when the call wrote to
--          the flow outbox.

-- @include common
-- @include outcome
-- @include flow
-- @include settle

local now = now_ms()
local maxcount, maxage = tonumber(ARGV[2]), tonumber(ARGV[3])
local res, parts, seen = {}, {}, {}
local rejected = 0

-- order_key is what orders a task in its partition: priority desc, available-at asc, sequence asc.
local function order_key(kt)
  local f = redis.call('HMGET', kt, 'r', 't', 's')
  return -(tonumber(f[1]) or 0), tonumber(f[2]), f[3]
end

local function later(a1, a2, a3, b1, b2, b3)
  if a1 ~= b1 then return a1 > b1 end
  if a2 ~= b2 then return a2 > b2 end
  return a3 > b3
end

-- took maps the ids take_back_later returned in this call to the token their lease had: a later
-- item of the same call that names one of them with that token finds it pending already.
local took = {}

-- take_back_later returns the leased tasks of ordered partition p that come after task id.
local function take_back_later(id, kt, p, now)
  local r1, r2, r3 = order_key(kt)
  local n = 0
  local held = redis.call('SMEMBERS', k_held(p))
  for i = 1, #held do
    local other = k_task(held[i])
    local o1, o2, o3 = order_key(other)
    if later(o1, o2, o3, r1, r2, r3) then
      -- Its delivery never ran: its attempts field, which counts ended deliveries, stays.
      local lease = redis.call('HGET', K_LEASES, held[i])
      local token = lease and lease_token(lease)
      unlease(held[i], other, p)
      back(held[i], other, p, now, 0)
      took[held[i]] = token
      n = n + 1
    end
  end
  return n
end

for i = 4, #ARGV, 5 do
  local id, token, delay, reason, counts = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], ARGV[i + 4]
  local kt = k_task(id)
  local f = redis.call('HMGET', kt, 'p', 'a', 'm')
  local lease = redis.call('HGET', K_LEASES, id)
  if not f[1] then
    res[#res + 1] = NOTFOUND
  elseif took[id] == token then
    -- Taken back by an earlier item of this call: it is pending already, in its position. Apply
    -- this item's reason, attempt and delay, once.
    took[id] = nil
    local p = f[1]
    if reason ~= '' then redis.call('HSET', kt, 'x', reason) end
    local attempts, max = tonumber(f[2]) or 0, tonumber(f[3]) or 0
    if counts ~= '0' then
      attempts = redis.call('HINCRBY', kt, 'a', 1)
    end
    if max > 0 and attempts >= max then
      local g = redis.call('HMGET', kt, 'r', 's')
      g[1] = g[1] or '0'
      local kp = k_pending(p, g[1])
      redis.call('ZREM', kp, g[2] .. id)
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
      rejected = rejected + 1
      res[#res + 1] = OK
    end
  elseif not lease or lease_token(lease) ~= token then
    res[#res + 1] = STALE
  else
    local p = f[1]
    local attempts, max = tonumber(f[2]) or 0, tonumber(f[3]) or 0 -- deliveries ended before this one
    unlease(id, kt, p)
    if counts ~= '0' then
      attempts = attempts + 1
      redis.call('HSET', kt, 'a', attempts)
    end
    if reason ~= '' then redis.call('HSET', kt, 'x', reason) end
    if max > 0 and attempts >= max then
      bury(id, kt, reason, now, maxcount, maxage)
      res[#res + 1] = DEAD
    else
      back(id, kt, p, now, delay)
      rejected = rejected + 1
      emit('retried', id, 'e', reason, 'd', int(delay))
      res[#res + 1] = OK
      if is_ordered(p) then stat('taken_back', take_back_later(id, kt, p, now)) end
    end
    if not seen[p] then seen[p] = true; parts[#parts + 1] = p end
  end
end

for i = 1, #parts do place(parts[i], now) end
stat('rejected', rejected)
if flow_pending() then flow_run(now) end
if flow_outboxed then res[#res + 1] = RELAY end -- the caller relays the outbox
finish()
return res
