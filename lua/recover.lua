-- recover.lua: returns tasks whose lease expired, at most a chunk a call. An expired task of an
-- ordered partition takes every other leased task of that partition back with it, so the old holder
-- keeps nothing and a late ack of its later tasks cannot overtake the earlier ones. Each returned
-- task counts a crash; whether it also counts as an attempt is the caller's setting. Tasks whose
-- attempts reach max attempts go to the dead letters. Idempotent and safe to run from every
-- consumer at once: each task is moved by exactly one run. It also converts back the keys a load
-- made listpacks again (see the end).
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] chunk: the most expired leases to look at
-- ARGV[3] 1: a lease expiry counts as an attempt; 0: it does not
-- ARGV[4] dead-letter cap by count (0: none)
-- ARGV[5] dead-letter cap by age ms (0: none)
-- Returns: {tasks returned to pending, tasks dead-lettered, 1 if more leases may have expired}

-- @include common
-- @include outcome
-- @include flow
-- @include settle

local now = now_ms()
local chunk, counts = tonumber(ARGV[2]), ARGV[3]
local maxcount, maxage = tonumber(ARGV[4]), tonumber(ARGV[5])
local expired = redis.call('ZRANGEBYSCORE', K_INFLIGHT, '-inf', now, 'LIMIT', 0, chunk)
local returned, buried = 0, 0
local parts, seen = {}, {}

local function give_back(id, p, first)
  local kt = k_task(id)
  local v = redis.call('HGET', K_LEASES, id)
  if v and lease_cancelled(v) then
    -- Asked to be cancelled while leased: its holder is gone, so it ends here, cancelled.
    unlease(id, kt, p)
    cancel_leased(id, kt, now)
    return
  end
  local f = redis.call('HMGET', kt, 'a', 'm')
  local attempts, max = tonumber(f[1]) or 0, tonumber(f[2]) or 0 -- deliveries ended before this one
  unlease(id, kt, p)
  redis.call('HINCRBY', kt, 'n', 1)
  if first then
    -- Its delivery failed: the error joins its errors and is its last error, as a reject's is.
    note_error(kt, 'lease expired', attempts + 1, now)
    if counts ~= '0' then
      attempts = attempts + 1
      redis.call('HSET', kt, 'a', attempts, 'x', 'lease expired')
    else
      redis.call('HSET', kt, 'x', 'lease expired')
    end
  end
  if max > 0 and attempts >= max then
    bury(id, kt, 'lease expired', now, maxcount, maxage)
    buried = buried + 1
  else
    back(id, kt, p, now, 0)
    returned = returned + 1
    emit('recovered', id)
  end
end

for i = 1, #expired do
  local id = expired[i]
  -- An earlier task of the same ordered partition may have taken this one back already.
  if redis.call('ZSCORE', K_INFLIGHT, id) then
    local p = redis.call('HGET', k_task(id), 'p')
    if not p then
      -- No record behind the lease: nothing to return, only the index entries to drop.
      redis.call('ZREM', K_INFLIGHT, id)
      redis.call('HDEL', K_LEASES, id)
    else
      if is_ordered(p) then
        -- The partition's leased run goes back whole. Its holder ran it one task at a time, in
        -- order: only the first can have been under way; the others never started and keep
        -- their attempts (else a run at its last attempt would die whole, out of order).
        local group = redis.call('SMEMBERS', k_held(p))
        if redis.call('SISMEMBER', k_held(p), id) == 0 and redis.call('ZSCORE', K_INFLIGHT, id) then
          group[#group + 1] = id
        end
        local head, key = nil, nil
        for j = 1, #group do
          local f = redis.call('HMGET', k_task(group[j]), 'r', 't', 's', 'c')
          -- The partition's order: priority desc, then available-at (t, else the publish time c),
          -- then sequence; as a string key comparable byte by byte (priorities are int32, times
          -- below 2^53, sequences 20 digits).
          local s = f[3] or '' -- the record's form (common.lua, next_seq), padded
          local k = string.format('%011d%016d%s', 2147483648 - (tonumber(f[1]) or 0), tonumber(f[2] or f[4]) or 0,
            string.rep('0', 20 - #s) .. s)
          if not key or k < key then head, key = group[j], k end
        end
        for j = 1, #group do give_back(group[j], p, group[j] == head) end
      else
        give_back(id, p, true)
      end
      if not seen[p] then seen[p] = true; parts[#parts + 1] = p end
    end
  end
end

for i = 1, #parts do place(parts[i], now) end
stat('recovered', returned + buried)
-- Redis gives every small set and hash it loads, after a restart or on a replica a failover
-- promoted, the listpack encoding again, whatever the scripts converted it to when they made it
-- (to_skiplist); the hot scripts would pay for the scans until the key is next deleted, which on
-- a busy queue may be never. Recovery runs on every worker every RecoverInterval, so it converts
-- them back here, at 4–5 calls a round, rather than the hot scripts at one call each. inflight is
-- converted from LEASES_CONVERT leases on, also when one fetch made it that large (fetch_end
-- leaves such a key alone, to spare a consumer that makes it anew on every call a conversion per
-- call; here it costs one per round). A ready that place's deferred pushes will create is not
-- there yet: finish creates it, converted.
for _, key in ipairs({K_READY, K_DEPTH, K_HEADS}) do
  if is_listpack(key) then to_skiplist(key) end
end
if is_listpack(K_INFLIGHT) and redis.call('ZCARD', K_INFLIGHT) >= LEASES_CONVERT then leases_convert() end
-- What a quiet queue's calls would otherwise never forget: outcomes and ended flows past their
-- retention, a bounded chunk a round.
outcome_prune(now, 100)
flow_prune(now, FLOW_PRUNE)
if flow_queue then flow_run(now) end
finish()
local more = 0
if #expired == chunk then more = 1 end
return {returned, buried, more}
