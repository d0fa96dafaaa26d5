-- run_now.lua: makes pending tasks available now, as an operator's "run now": a delayed task
-- (published with a delay or an At, or sent back with a delay) gets available-at = now and a new
-- sequence number, which puts it after the tasks of its priority already available, also those
-- that became available in this millisecond (and before those still delayed),
-- and its partition is placed, so a fetch can take it at once. In an ordered partition blocked
-- by a delayed reject (m:<p> field b, set when its head was sent back with a delay), the block is
-- lifted: the partition goes on from its head. A task available already changes nothing but
-- that block. A paused or held partition stays paused or held.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2…] task ids
-- Returns: one code per id: OK, NOTFOUND (no record, nor an outcome kept) or CONFLICT (not
--          pending: leased, a dead letter, a flow step waiting for its parents, or ended with its
--          outcome kept).

-- @include common
-- @include outcome

local now = now_ms()
local now_s = int(now)
local res, parts, seen = {}, {}, {}

for i = 2, #ARGV do
  local id = ARGV[i]
  local kt = k_task(id)
  local f = redis.call('HMGET', kt, 'p', 'r', 's')
  if not f[1] then
    -- Ended: a task whose outcome is kept is known, and not pending (as cancel.lua's FINISHED).
    if redis.call('EXISTS', k_outcome(id)) == 1 then res[#res + 1] = CONFLICT else res[#res + 1] = NOTFOUND end
  else
    local s = f[3] or '' -- the record's form (common.lua, next_seq), padded for the member
    local p, member = f[1], string.rep('0', 20 - #s) .. s .. id
    local kp = k_pending(p, f[2] or '0')
    local score = redis.call('ZSCORE', kp, member)
    if not score then
      res[#res + 1] = CONFLICT
    else
      if score + 0 > now then
        -- A new sequence number too: at the score now, its old one would put it before the tasks
        -- that became available in this same millisecond, not after them.
        local ns = next_seq(true)
        redis.call('ZREM', kp, member)
        redis.call('ZADD', kp, now_s, string.rep('0', 20 - #ns) .. ns .. id)
        redis.call('HSET', kt, 't', now_s, 's', ns)
        head_lower(p, now, now_s)
      end
      if is_ordered(p) then
        local _, _, blocked = meta(p)
        if blocked and blocked > now then meta_del(p, 'b') end
      end
      if not seen[p] then seen[p] = true; parts[#parts + 1] = p end
      res[#res + 1] = OK
    end
  end
end

for i = 1, #parts do place(parts[i], now) end
finish()
return res
