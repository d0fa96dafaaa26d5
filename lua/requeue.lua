-- requeue.lua: moves dead letters back to pending as if newly published: a new sequence number (so
-- an ordered partition gets it after the work already pending), available now, attempts reset. The
-- last error stays on the record.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2…] task ids
-- Returns: one code per id: OK, NOTFOUND, NOTDEAD, or LEVELS when its partition has MAX_LEVELS
--          non-zero priorities pending and its priority is another one (the letter stays dead).

-- @include common
-- @include settle

local now = now_ms()
local res, parts, seen = {}, {}, {}
local requeued = 0

for i = 2, #ARGV do
  local id = ARGV[i]
  local kt = k_task(id)
  local f = redis.call('HMGET', kt, 'S', 'p', 'r')
  if not f[2] then
    res[#res + 1] = NOTFOUND
  elseif f[1] ~= 'd' then
    res[#res + 1] = NOTDEAD
  elseif level_full(f[2], f[3] or '0') then
    res[#res + 1] = LEVELS
  else
    local p, s = f[2], next_seq()
    redis.call('ZREM', K_DEAD, id)
    redis.call('HSET', kt, 'S', 'p', 's', s, 't', now, 'a', 0, 'n', 0)
    pend(id, kt, p, f[3] or '0', s, now)
    if not seen[p] then seen[p] = true; parts[#parts + 1] = p end
    requeued = requeued + 1
    res[#res + 1] = OK
  end
end

for i = 1, #parts do place(parts[i], now) end
stat('pending', requeued)
stat('requeued', requeued)
finish()
return res
