-- common.lua: state, keys and helpers every script shares. Included first by every script.
--
-- Every script is called with two keys: KEYS[1], the key base "<prefix>:{<queue>}:", and the seq
-- key; they route the call to the queue's slot. The line "@keys" below makes KEYS the queue's
-- fixed keys, each the key base and a suffix (lua/keys.go), in this order (engine/keys.go builds
-- the same names):
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
--   KEYS[15] leases  HASH   the lease of every leased task: task id -> fencing token (20 digits),
--                           't' (tracked in its partition's held set) or 'u' (upper case when the
--                           task's end is recorded), then the consumer id
--   KEYS[16] prio    SET    partitions with pending tasks at a priority other than 0 (see levels_of)
-- ARGV[1] is the key base "<prefix>:{<queue>}:"; per-task and per-partition keys are built from it
-- and share the queue's hash tag. The variable part (id or partition) always ends the key, after a
-- fixed kind marker, so no id or partition can make two keys collide.

if redis.replicate_commands then redis.replicate_commands() end -- @eval-only

-- @keys
local K_READY, K_SCHED, K_INFLIGHT, K_DEAD = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_STATS, K_SEQ, K_WAKE, K_DEDUP, K_CTL = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local K_DEPTH, K_HEADS, K_CONSUMERS, K_QPAUSE, K_PPAUSE = KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14]
local K_LEASES, K_PRIO = KEYS[15], KEYS[16]
local BASE = ARGV[1]
-- ARGV[1] may carry, after the key base, the most entries the queue's event stream keeps (see
-- emit): "<prefix>:{<queue>}:<n>". The base ends at the first "}:", as no prefix or queue name
-- holds '}', so the number costs the callers no argument of its own and the scripts one find.
local EVENTS_MAX = false
if string.byte(BASE, -1) ~= 58 then -- a bare key base ends with ':'
  local i = string.find(BASE, '}:', 1, true)
  EVENTS_MAX = string.sub(BASE, i + 2)
  BASE = string.sub(BASE, 1, i + 1)
end

-- Result codes; engine/errors.go maps them to Go errors. LEVELS: a publish or requeue would give a
-- partition more than MAX_LEVELS priorities; REFUSED: a message of a publish batch refused whole.
local OK, STALE, NOTFOUND, DUPLICATE, NOTDEAD, DEAD = 0, 1, 2, 3, 4, 5
local CONFLICT, ABORTED, CANCELLED, FINISHED, LEVELS, REFUSED = 6, 7, 8, 9, 10, 11

local function k_task(id) return BASE .. 't:' .. id end
local function k_meta(p) return BASE .. 'm:' .. p end
local function k_levels(p) return BASE .. 'r:' .. p end
local function k_pending(p, level) return BASE .. 'q:' .. level .. ':' .. p end
local function k_held(p) return BASE .. 'l:' .. p end
-- k_halted is the ZSET of the ordered partitions held by a dead letter, scored by the ms they were
-- held (settle.lua's bury).
local function k_halted() return BASE .. 'halted' end

-- emit appends an event of kind about task (or flow) id, with more field, value pairs, to the
-- queue's event stream in the same call as the change it reports, capped near EVENTS_MAX entries
-- (MAXLEN ~, so trimming is cheap). Without a stream it does nothing.
local function emit(kind, id, ...)
  if not EVENTS_MAX then return end
  redis.call('XADD', BASE .. 'ev', 'MAXLEN', '~', EVENTS_MAX, '*', 'k', kind, 'id', id, ...)
end

-- Ordered partitions are the keys that start with '!'.
local function is_ordered(p) return string.byte(p, 1) == 33 end

-- A lease, as K_LEASES holds it: the fencing token (next_seq's 20 digits), 't' when the task is in
-- its partition's held set (an ordered or limited partition) or 'u', then the consumer id. The
-- fields that change with every delivery live there, in one hash, rather than in the task's
-- record: a fetch writes the leases of all its tasks with one HSET and an ack reads them with one
-- HMGET, where a field of each record would cost a command per task (docs/data-model.md).
-- The mark is upper case ('T' or 'U') for a task whose end must be recorded (includes/outcome.lua):
-- an ack then reads its record, which it otherwise need not. A task asked to be cancelled while
-- leased (cancel.lua) has 'c' for 't' and 'd' for 'u' ('C', 'D'): the next extension tells its
-- holder; an ack removes the mark with the lease, and a reject (also of the tasks it takes back),
-- a kill or a recovery of the lease ends the task cancelled.
local function lease_token(v) return string.sub(v, 1, 20) end
local function lease_tracked(v) local b = string.byte(v, 21) return b == 116 or b == 84 or b == 99 or b == 67 end
local function lease_outcome(v) return string.byte(v, 21) < 97 end -- upper case
local function lease_cancelled(v) local b = string.byte(v, 21) return b == 99 or b == 100 or b == 67 or b == 68 end
local function lease_consumer(v) return string.sub(v, 22) end


-- leases_of returns the leases of ids, in their order (false for an id without one), with one
-- HMGET per 1000 ids (unpack fails past about 8000 values).
local function leases_of(ids)
  local out = {}
  for i = 1, #ids, 1000 do
    local part = redis.call('HMGET', K_LEASES, unpack(ids, i, math.min(i + 999, #ids)))
    if i == 1 then out = part else for j = 1, #part do out[#out + 1] = part[j] end end
  end
  return out
end

-- int formats an integral number as a decimal string. A Lua number passed to redis.call is
-- formatted with "%.17g" (snprintf: about 2,400 instructions under callgrind, three times
-- string.format's '%d'); the hot paths pass the numbers they send through int, reuse a string made
-- once per script, or write constants as strings ('0', '-1'). The clock now_ms read last it has
-- as a string already (clock_s), and returns that.
local clock_ms, clock_s
local function int(n)
  if n == clock_ms then return clock_s end
  return string.format('%d', n)
end

-- The hot paths (publish, fetch, ack and the helpers they share) turn the numbers of replies and
-- arguments (scores, counts, the clock) into Lua numbers by arithmetic, s + 0, which parses the
-- string once; tonumber(s) parses it twice (lua_isnumber, then lua_tonumber), with strtod at about
-- 500 instructions each. A reply that may be missing (false) is tested first: s and s + 0.

-- now_ms is the Redis server's clock: workers' clocks never decide what is due. The last reading
-- is kept for the counter's floor (seq_load), and as a decimal string for int. The string is made
-- from TIME's reply by cutting its microseconds (sent without leading zeros) to milliseconds, and
-- parsed once, rather than computing the number and formatting it (string.format: about 1,900
-- instructions).
local function now_ms()
  local t = redis.call('TIME')
  local us = t[2]
  local k = #us
  if k == 6 then -- 100,000 µs or more: nine calls in ten
    clock_s = t[1] .. string.sub(us, 1, 3)
  elseif k > 3 then
    clock_s = t[1] .. string.sub('00', k - 3) .. string.sub(us, 1, k - 3)
  else
    clock_s = t[1] .. '000'
  end
  clock_ms = clock_s + 0
  return clock_ms
end

-- The counter in K_SEQ is kept as a decimal string and split into a high part and a low part of
-- 15 digits, so every value stays exact in Lua's doubles far past 2^53. next_seq hands out the
-- values as fixed-width 20-digit strings, whose byte order is their numeric order.
--
-- A script that knows the most values it can need calls seq_reserve(n) first: its first next_seq
-- then takes all n with one INCRBY (one call instead of a GET now and a SET in finish). Unused
-- values are gaps, which nothing relies on not existing. A script that hands out more than it
-- reserved (a publish whose duplicate child wakes its parent, which takes values of its own)
-- writes the counter back in finish, as an unreserved one does, so no value is handed out twice.
-- INCRBY's reply reaches Lua as a double, so above 2^53 the exact value is read back with GET;
-- past INCRBY's int64 range (the key can hold up to 20 digits) the script falls back to GET and SET.
--
-- The counter never hands out a value at or below the server clock in ms × 1000 (SEQ_PER_MS
-- values a millisecond): when it is behind, the script moves it to that floor plus SEQ_AHEAD (100
-- ms' worth), so below 1,000 values a millisecond it jumps at most once per 100 ms, one SET. A
-- counter that went back, because a failover lost its last increments or a snapshot older than
-- them was restored, thus still hands out values larger than any it handed out before, as long
-- as the clock moved on by more than 100 ms plus the values handed out in the last 100 ms
-- divided by 1,000: fencing tokens are not reused (docs/guarantees.md).
local SEQ_SPLIT = 1000000000000000
local SEQ_EXACT = 9007199254740992 -- 2^53
local SEQ_PER_MS, SEQ_AHEAD = 1000, 100000
local seq_hi, seq_lo, seq_dirty, seq_want
local seq_left -- reserved values not yet handed out (nil: none were reserved)

local function seq_split(s)
  local n = #s
  if n > 15 then return tonumber(string.sub(s, 1, n - 15)), tonumber(string.sub(s, n - 14)) end
  return 0, tonumber(s)
end

-- seq_norm carries lo into hi so that 0 <= lo < SEQ_SPLIT.
local function seq_norm(hi, lo)
  while lo < 0 do hi, lo = hi - 1, lo + SEQ_SPLIT end
  while lo >= SEQ_SPLIT do hi, lo = hi + 1, lo - SEQ_SPLIT end
  return hi, lo
end

-- seq_string formats hi, lo as the counter key holds it: decimal, no leading zeros.
local function seq_string(hi, lo)
  if hi > 0 then return string.format('%d%015d', hi, lo) end
  return string.format('%d', lo)
end

local function seq_reserve(n) seq_want = n end

-- seq_floor raises seq_hi, seq_lo (the last value handed out) to the clock floor when they are
-- below it, and says whether it did.
local function seq_floor()
  local f = (clock_ms or now_ms()) * SEQ_PER_MS -- exact: below 2^53 until the year 2255
  local fhi = math.floor(f / SEQ_SPLIT)
  local flo = f - fhi * SEQ_SPLIT
  if seq_hi > fhi or (seq_hi == fhi and seq_lo >= flo) then return false end
  seq_hi, seq_lo = seq_norm(fhi, flo + SEQ_AHEAD)
  return true
end

-- seq_load reads the counter for next_seq: v is the reply of the INCRBY of seq_want when the caller
-- sent it already (seq_one), else nil.
local function seq_load(v)
  seq_hi, seq_lo = 0, 0
  if seq_want and seq_want > 0 then
    if v == nil then v = redis.pcall('INCRBY', K_SEQ, seq_want == 1 and '1' or int(seq_want)) end
    if type(v) == 'number' then
      if v < SEQ_EXACT then
        -- v and hi·SEQ_SPLIT are exact; the division may round, which seq_norm corrects.
        seq_hi = math.floor(v / SEQ_SPLIT)
        seq_hi, seq_lo = seq_norm(seq_hi, v - seq_hi * SEQ_SPLIT)
      else
        seq_hi, seq_lo = seq_split(redis.call('GET', K_SEQ))
      end
      -- Step back to the value before the reserved ones.
      seq_hi, seq_lo = seq_norm(seq_hi, seq_lo - seq_want)
      seq_left = seq_want
      if seq_floor() then
        local hi, lo = seq_norm(seq_hi, seq_lo + seq_want)
        redis.call('SET', K_SEQ, seq_string(hi, lo))
      end
      return
    end
  end
  local s = redis.call('GET', K_SEQ)
  if s then seq_hi, seq_lo = seq_split(s) end
  seq_floor()
  seq_dirty = true
end

-- A task's record keeps its sequence number without the leading zeros: Redis then stores it as
-- an integer, 10 bytes instead of 22, which with the record's other fields keeps a usual task's
-- record within a smaller allocation. next_seq(true) hands out the next value so, at the same
-- cost, and seq_member builds a pending member from it. Whoever builds a pending member or an
-- order key from a record pads its number back to 20 digits, string.rep('0', 20 - #s) .. s,
-- written out rather than a helper: scripts near the embedded Redis's limit of locals include
-- them (a record that holds the 20 digits reads the same).
local function next_seq(short)
  if not seq_hi then seq_load() end
  if seq_left then
    seq_left = seq_left - 1
    if seq_left < 0 then seq_dirty = true end -- past the reservation: finish writes the counter
  end
  seq_lo = seq_lo + 1
  if seq_lo >= SEQ_SPLIT then seq_hi, seq_lo = seq_hi + 1, seq_lo - SEQ_SPLIT end
  -- One number to format is half the work of two: below 2^53 (until the year 2255, see seq_floor)
  -- the value is exact as one.
  if seq_hi < 9 then return string.format(short and '%d' or '%020d', seq_hi * SEQ_SPLIT + seq_lo) end
  return string.format(short and '%d%015d' or '%05d%015d', seq_hi, seq_lo)
end

local function seq_member(short, id)
  -- 16 digits, the usual width from the clock floor (ms × 1000) until the year 2286, takes no
  -- string.rep, a C call.
  if #short == 16 then return '0000' .. short .. id end
  return string.rep('0', 20 - #short) .. short .. id
end

-- seq_one is seq_reserve(1) and then next_seq(true), for a script that needs one value: INCRBY's
-- reply is the value, formatted at once when it is exact and above the clock floor (all but the
-- first call after the counter went back, or past 2^53); else next_seq(true)'s way. A later
-- next_seq of the call reserves again.
local function seq_one()
  seq_want = 1
  local v = redis.pcall('INCRBY', K_SEQ, '1')
  if type(v) == 'number' and v < SEQ_EXACT and v > (clock_ms or now_ms()) * SEQ_PER_MS then
    return string.format('%d', v)
  end
  seq_load(v)
  return next_seq(true)
end

-- stat adds n to a counter of the stats hash. A publish counts its tasks once, in 'pub', which
-- engine.Stats adds to both 'published' and 'pending' ('pending' counts every other change of the
-- pending tasks): one command a publish instead of two.
local function stat(field, n)
  if n ~= 0 then redis.call('HINCRBY', K_STATS, field, n == 1 and '1' or int(n)) end
end

-- A new sorted set starts in the listpack encoding, where every update of a member scans the whole
-- set: about 3 µs at 100 members, against 1 µs for a skiplist, and the partition indexes (ready,
-- depth, heads) of a queue with a hundred partitions are updated several times per task. Adding
-- and removing one member longer than zset-max-listpack-value (64 by default) converts a set to a
-- skiplist, which Redis keeps until the key is deleted or loaded again (recover.lua converts
-- loaded keys back); besides recovery, only the script that creates an index pays the 2 calls of
-- to_skiplist (fetch_end converts inflight when it has grown, see LEASES_CONVERT). A server whose
-- zset-max-listpack-value is 200 or more is not converted by it; the keys then stay listpacks, as
-- they would without it, and the checks before it (is_listpack) keep paying its 2 calls.
-- The member is 200 bytes of 0xFF: invalid UTF-8, so no partition key (partition.Validate) and no
-- task id can be it, and the ZREM can never take out a real member. It is made here, not once per
-- script: string.rep at the top level cost every script call about 0.9 µs.
local function to_skiplist(key)
  local member = string.rep('\255', 200)
  redis.call('ZADD', key, 0, member)
  redis.call('ZREM', key, member)
end

-- to_hashtable does the same for a hash: one field longer than hash-max-listpack-value (64 by
-- default) converts it to the hashtable encoding, which Redis keeps until the key is deleted or
-- loaded again. No task id can be the field: ids are UTF-8.
local function to_hashtable(key)
  local field = string.rep('\255', 200)
  redis.call('HSET', key, field, '')
  redis.call('HDEL', key, field)
end

-- LEASES_CONVERT is the number of leased tasks from which inflight and leases are converted from
-- the listpack encoding, the one Redis gives a small set or hash (a new one, or any it loads from
-- a snapshot or an AOF file), to a skiplist and a hashtable. In a listpack every ZADD, HSET, ZREM,
-- HDEL and look-up scans the key and most of them reallocate it, and a pool of consumers keeps a
-- few dozen tasks leased: converted, 8 consumers spend 8 % fewer instructions per task in Redis
-- (docs/benchmarks.md, section 3.8). Below it a listpack is as fast.
local LEASES_CONVERT = 8

-- leases_convert converts inflight to a skiplist and leases to a hashtable (see LEASES_CONVERT).
local function leases_convert()
  to_skiplist(K_INFLIGHT)
  to_hashtable(K_LEASES)
end

-- is_listpack says whether key is in the small, scanned encoding: listpack, or ziplist before
-- Redis 7. pcall: the embedded Redis has no OBJECT ENCODING, and no encodings; there the answer is
-- no.
local function is_listpack(key)
  local enc = redis.pcall('OBJECT', 'ENCODING', key)
  return enc == 'listpack' or enc == 'ziplist'
end

-- Whether p is in ready is asked with ZRANK, not ZSCORE: an integer reply costs Redis far less than
-- a score, which it formats with "%.17g" (about 2,000 instructions under callgrind); the walk to
-- the rank is a few hundred at a hundred partitions.
--
-- ready_push appends p to the round-robin order, behind every partition already waiting; for a p
-- already in ready, ZADD moves it there. The ZADDs are collected and sent as one variadic ZADD by
-- ready_flush, which runs before anything reads or removes members of ready (place, fetch's turns,
-- finish): scores are taken in call order, so the order is the same as with one ZADD per push.
local ready_tail, ready_fresh
local ready_adds -- made at the first push
local function ready_push(p)
  if not ready_tail then
    local last = redis.call('ZRANGE', K_READY, '-1', '-1', 'WITHSCORES')
    ready_tail = last[2] and last[2] + 0 or 0
    ready_fresh = last[2] == nil -- ready does not exist: the flush creates it
  end
  ready_tail = ready_tail + 1
  if not ready_adds then ready_adds = {} end
  ready_adds[#ready_adds + 1] = int(ready_tail)
  ready_adds[#ready_adds + 1] = p
end

-- ready_del takes p out of ready, also deferred to ready_flush, which removes before it adds. A
-- caller may defer a removal only of a partition it does not push again before the flush (fetch's
-- turns: each partition comes up once per turn).
local ready_dels -- made at the first removal
local function ready_del(p)
  if not ready_dels then ready_dels = {} end
  ready_dels[#ready_dels + 1] = p
end

local function ready_flush()
  if ready_dels then
    local n = #ready_dels
    for i = 1, n, 1000 do redis.call('ZREM', K_READY, unpack(ready_dels, i, math.min(i + 999, n))) end
    ready_dels = nil
  end
  if not ready_adds then return end
  local n = #ready_adds
  for i = 1, n, 1000 do redis.call('ZADD', K_READY, unpack(ready_adds, i, math.min(i + 999, n))) end
  ready_adds = nil
  if ready_fresh then
    to_skiplist(K_READY)
    ready_fresh = false
  end
end

-- The ctl and prio sets (see meta and levels_of) are usually both empty, and then absent: one
-- EXISTS of both answers for the two at once. gates reads it once per script, unless a caller
-- already knew (fetch asks together with qpause).
local ctl_count, prio_count
local function gates()
  if ctl_count == nil and prio_count == nil and redis.call('EXISTS', K_CTL, K_PRIO) == 0 then
    ctl_count, prio_count = 0, 0
  end
end

-- meta returns p's controls: paused flag, concurrency limit (unordered only) and blocked-until ms.
-- An ordered partition held by a dead letter (field h, its id: settle.lua's bury) or by a parked
-- task (field w, its id: flow.lua's park) counts as paused. Most partitions have none: the ctl set names those that do, so a queue without controls
-- never looks up a meta hash, and one with a few looks up only theirs.
local function meta(p)
  gates()
  if ctl_count == nil then ctl_count = redis.call('SCARD', K_CTL) end
  if ctl_count == 0 or redis.call('SISMEMBER', K_CTL, p) == 0 then return nil, nil, nil end
  local m = redis.call('HMGET', k_meta(p), 'ps', 'lim', 'b', 'h', 'w')
  return m[1] or m[4] or m[5], tonumber(m[2]), tonumber(m[3])
end

-- meta_set and meta_del change one control of p (meta_del two when given field2), keeping the ctl
-- set in step with the meta hashes.
local function meta_set(p, field, value)
  redis.call('HSET', k_meta(p), field, value)
  redis.call('SADD', K_CTL, p)
  ctl_count = nil
end

local function meta_del(p, field, field2)
  if field2 then redis.call('HDEL', k_meta(p), field, field2) else redis.call('HDEL', k_meta(p), field) end
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

-- Priority levels. Level 0 is implicit: its pending set q:0:<p> is always looked at, and r:<p>
-- holds only p's non-zero levels, existing only while p has pending tasks at one. K_PRIO names the
-- partitions whose r:<p> exists; a script reads its SCARD once (again after it changed), and while
-- it is 0, the common case of a queue without priorities, no level set is read or written at all.
local LEVEL0 = {'0'}

-- MAX_LEVELS is the most non-zero levels a publish or a requeue lets a partition have pending
-- (engine.MaxPriorityLevels): pick and earliest read one pending set per level, so it bounds what
-- they cost. A reject or a recovery returns a task to its level even past it (docs/data-model.md,
-- section 12, says why that stays bounded).
local MAX_LEVELS = 16

-- levels_of returns p's levels in use, highest first, with '0' among them (whether or not q:0:<p>
-- holds anything). Cost: 0 calls while no partition uses priorities, else one ZREVRANGE.
local function levels_of(p)
  gates()
  if prio_count == nil then prio_count = redis.call('SCARD', K_PRIO) end
  if prio_count == 0 then return LEVEL0 end
  local lv = redis.call('ZREVRANGE', k_levels(p), 0, -1)
  if #lv == 0 then return LEVEL0 end
  local out, zero = {}, false
  for i = 1, #lv do
    local l = lv[i]
    if not zero and tonumber(l) <= 0 then out[#out + 1] = '0'; zero = true end
    if l ~= '0' then out[#out + 1] = l end
  end
  if not zero then out[#out + 1] = '0' end
  return out
end

-- level_add notes that p has pending tasks at level (only non-zero levels are recorded).
local function level_add(p, level)
  if level == '0' then return end
  if redis.call('ZADD', k_levels(p), level, level) == 1 and redis.call('SADD', K_PRIO, p) == 1 then
    prio_count = nil
  end
end

-- level_gone notes that p's pending set at level just emptied.
local function level_gone(p, level)
  if level == '0' then return end
  redis.call('ZREM', k_levels(p), level)
  if redis.call('EXISTS', k_levels(p)) == 0 then
    redis.call('SREM', K_PRIO, p)
    prio_count = nil
  end
end

-- earliest_below is the smallest of e (a score, with e_s, the same as Redis wrote it; both may be
-- nil) and the available-at of the heads of the levels that come after the i-th in levels. Cost:
-- one ZRANGE per such level.
local function earliest_below(p, levels, i, e, e_s)
  for j = i + 1, #levels do
    local head = redis.call('ZRANGE', k_pending(p, levels[j]), '0', '0', 'WITHSCORES')
    local s = head[2] and head[2] + 0
    if s and (not e or s < e) then e, e_s = s, head[2] end
  end
  return e, e_s
end

-- earliest is the smallest available-at among the heads of p's priority levels, and that score as
-- Redis wrote it (see pick); nil when p has nothing pending. Cost: one ZRANGE per priority level in
-- use, plus levels_of.
local function earliest(p)
  return earliest_below(p, levels_of(p), 0)
end

-- pick returns the task p serves next at time now: the head of the highest priority level whose
-- head is available (a delayed head of a higher level holds nothing back), as its member, level,
-- pending key and the score of the task behind it in that level (nil if none), also as Redis wrote
-- it: whatever form Redis replies in ('1700000000000' from Redis, '1.7e+12' from the embedded one)
-- parses back to the same double, so that string goes back to Redis as it is (head_is) instead of
-- being formatted again (int). Then the level's place in levels, and the smallest score of the
-- delayed heads of the levels before it (nil if none), as a number and as Redis wrote it: with
-- the task behind the one served and earliest_below, it gives p's earliest available-at once the
-- task is taken, without reading those levels again. levels, highest first, may be passed when
-- already read. Cost: one ZRANGE per level down to the one served.
local function pick(p, now, levels)
  levels = levels or levels_of(p)
  local low, low_s
  for i = 1, #levels do
    local kp = k_pending(p, levels[i])
    local head = redis.call('ZRANGE', kp, '0', '1', 'WITHSCORES')
    local s = head[2] and head[2] + 0
    if s and s <= now then return head[1], levels[i], kp, head[4] and head[4] + 0, head[4], i, low, low_s end
    if s and (not low or s < low) then low, low_s = s, head[2] end
  end
  return nil
end

-- schedule puts p in sched at time e. Sleepers wait until the earliest due time they know of; one
-- that is now earlier wakes one of them to wait for the new time instead. wakes counts the
-- sleepers to wake (finish pushes that many tokens); ready_wakes the part of it that place counted
-- for partitions made ready, which a fetch in the same script may serve itself (ack_fetch.lua).
local wakes, ready_wakes = 0, 0
local function schedule(p, e)
  local head = redis.call('ZRANGE', K_SCHED, '0', '0', 'WITHSCORES')
  if not head[2] or e < head[2] + 0 then wakes = wakes + 1 end
  redis.call('ZADD', K_SCHED, int(e), p)
end

-- place puts p where its state says it belongs: in ready (keeping its turn if already there), in
-- sched at the time it can next yield work, or in neither (empty, paused or held). Every script
-- that changes a partition places it (fetch and publish with shortcuts for what they already
-- know). outside says p is known to be in neither index, as a held partition whose last lease just
-- ended is, which spares the look-ups of ready and sched. Counts the partitions that became ready,
-- for wake-ups, and returns whether p is in ready now. Only a place that reads or removes members
-- of ready flushes it first: an ack that releases 10 held partitions (outside) sends their 10
-- pushes as one ZADD, not one each. settled says that nothing changed p's pending tasks in this
-- script so far, so that heads has p's earliest available-at (index_flush keeps it exact at the
-- end of every script): one ZSCORE instead of earliest, which reads every priority level.
local function place(p, now, outside, settled)
  if not outside then ready_flush() end
  local paused, limit, blocked = meta(p)
  local e
  if not paused and not is_held(p, limit) then
    if settled then
      local h = redis.call('ZSCORE', K_HEADS, p)
      e = h and h + 0
    else
      e = earliest(p)
    end
  end
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
    if outside or not redis.call('ZRANK', K_READY, p) then
      if not outside then redis.call('ZREM', K_SCHED, p) end
      ready_push(p)
      wakes = wakes + 1
      ready_wakes = ready_wakes + 1
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
local ix_parts, ix_delta, ix_low, ix_head, ix_head_s -- made at the first change noted (ix_touch)
-- ix_low_s[p] is ix_low[p] formatted already (head_lower), and ix_most[p] a time p's head was at
-- most when the script began (head_at_most). Only publish notes them: in the other scripts they
-- stay nil, no table made.
local ix_low_s, ix_most

local function ix_touch(p)
  if not ix_parts then ix_parts, ix_delta, ix_low, ix_head, ix_head_s = {}, {}, {}, {}, {} end
  if ix_delta[p] == nil then ix_delta[p] = 0; ix_parts[#ix_parts + 1] = p end
end

-- depth_add notes that p's pending count changed by n.
local function depth_add(p, n)
  ix_touch(p)
  ix_delta[p] = ix_delta[p] + n
end

-- head_lower notes that a task available at t joined p's pending tasks. t_s, when given, is t
-- formatted already (int), which index_flush then sends as it is.
local function head_lower(p, t, t_s)
  ix_touch(p)
  if not ix_low[p] or t < ix_low[p] then
    ix_low[p] = t
    if t_s then ix_low_s = ix_low_s or {}; ix_low_s[p] = t_s elseif ix_low_s then ix_low_s[p] = nil end
  end
end

-- head_at_most notes that p's head in heads was at most t when the script began, if p had pending
-- tasks then: index_flush then leaves out a lowering to t or later, which could not change it.
local function head_at_most(p, t)
  ix_most = ix_most or {}
  ix_most[p] = t
end

-- head_is notes that p's earliest pending available-at is t now (nil: p has none left), or false:
-- unknown, read it again at the end. t_s, when given, is t as Redis wrote it (pick).
local function head_is(p, t, t_s)
  ix_touch(p)
  ix_head[p] = t
  ix_head_s[p] = t_s
  ix_low[p] = nil
  if ix_low_s then ix_low_s[p] = nil end
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

-- pend puts task id (record kt, partition p) into its partition's pending set at time t.
local function pend(id, kt, p, level, s, t)
  redis.call('ZADD', k_pending(p, level), t, s .. id)
  level_add(p, level)
  depth_add(p, 1)
  head_lower(p, t)
end

-- indexes_fresh converts depth and heads, which this script has just created (they hold only the
-- partitions it gave pending tasks), from listpacks to skiplists (see to_skiplist).
local function indexes_fresh()
  to_skiplist(K_DEPTH)
  to_skiplist(K_HEADS)
end

-- index_flush writes what the script noted into depth and heads: one ZINCRBY for a single touched
-- partition, else one ZMSCORE and one variadic ZADD for all; one variadic ZADD (or ZADD LT) of
-- heads; one ZREM of each for the partitions left with nothing pending. Only when a partition is
-- new to depth does it ask whether depth is (a ZCARD or an EXISTS): then it converts both.
local function index_flush()
  if not ix_parts then return end
  local n = #ix_parts
  local counts = {}
  local fresh = false
  if n == 1 then
    local p = ix_parts[1]
    local d = ix_delta[p]
    if d == 0 then
      counts[1] = (redis.call('ZSCORE', K_DEPTH, p) or 0) + 0
    else
      counts[1] = redis.call('ZINCRBY', K_DEPTH, d == 1 and '1' or int(d), p) + 0
      fresh = d > 0 and counts[1] == d and redis.call('ZCARD', K_DEPTH) == 1
    end
  else
    local cur = {}
    for i = 1, n, 1000 do
      local part = redis.call('ZMSCORE', K_DEPTH, unpack(ix_parts, i, math.min(i + 999, n)))
      for j = 1, #part do cur[#cur + 1] = part[j] end
    end
    local set, added = {}, false
    for i = 1, n do
      local p = ix_parts[i]
      local c = (cur[i] or 0) + ix_delta[p]
      counts[i] = c
      if c > 0 and ix_delta[p] ~= 0 then
        set[#set + 1] = int(c); set[#set + 1] = p
        if not cur[i] then added = true end
      end
    end
    fresh = added and redis.call('EXISTS', K_DEPTH) == 0
    if #set > 0 then bulk('ZADD', K_DEPTH, nil, set) end
  end
  local gone, exact, low = {}, {}, {}
  for i = 1, n do
    local p = ix_parts[i]
    if counts[i] <= 0 then
      gone[#gone + 1] = p
    else
      local h, h_s = ix_head[p], ix_head_s[p]
      if h == false then
        h, h_s = earliest(p) -- reads every change, additions included
      elseif h and ix_low[p] and ix_low[p] < h then
        h, h_s = ix_low[p], nil
      end
      if h then
        exact[#exact + 1] = h_s or int(h); exact[#exact + 1] = p
      elseif ix_low[p] and not (ix_most and ix_most[p] and ix_low[p] >= ix_most[p] and counts[i] > ix_delta[p]) then
        -- Left out when p had pending tasks before the script (heads has its entry) and that
        -- entry is no later than every task that joined: the ZADD LT would change nothing.
        low[#low + 1] = ix_low_s and ix_low_s[p] or int(ix_low[p]); low[#low + 1] = p
      end
    end
  end
  if #exact > 0 then bulk('ZADD', K_HEADS, nil, exact) end
  if #low > 0 then bulk('ZADD', K_HEADS, 'LT', low) end
  if fresh then indexes_fresh() end
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
  if redis.call('ZADD', K_CONSUMERS, int(now), consumer) == 1 then
    redis.call('ZREMRANGEBYSCORE', K_CONSUMERS, '-inf', '(' .. (now - CONSUMERS_KEEP_MS))
    redis.call('ZREMRANGEBYRANK', K_CONSUMERS, 0, -(CONSUMERS_MAX + 1))
  end
end

-- prune_dedup forgets ids acked before the dedup window, a bounded chunk at a time.
local function prune_dedup(now, window, chunk)
  local old = redis.call('ZRANGEBYSCORE', K_DEDUP, '-inf', now - window, 'LIMIT', 0, chunk)
  if #old > 0 then redis.call('ZREM', K_DEDUP, unpack(old)) end
end

-- finish writes the partition indexes, saves the counter and wakes up to 32 blocked fetchers when
-- work became ready.
local function finish()
  ready_flush()
  index_flush()
  if seq_dirty then redis.call('SET', K_SEQ, seq_string(seq_hi, seq_lo)) end
  if wakes > 0 then
    -- LPUSH returns the length: trim only when over 64, and then to 32 (no call wakes more than
    -- 32), so while no one sleeps to pop them a busy queue trims once per 32 tokens, not per call.
    local len
    if wakes == 1 then
      len = redis.call('LPUSH', K_WAKE, '1')
    else
      local tokens = {}
      for i = 1, math.min(wakes, 32) do tokens[i] = '1' end
      len = redis.call('LPUSH', K_WAKE, unpack(tokens))
    end
    if len > 64 then redis.call('LTRIM', K_WAKE, 0, 31) end
  end
end
