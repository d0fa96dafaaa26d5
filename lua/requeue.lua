-- requeue.lua: moves dead letters back to pending as if newly published: a new sequence number (so
-- an ordered partition gets it after the work already pending), available now, attempts reset. A
-- dead letter that holds its ordered partition (published to hold it on death), or waits to hold
-- it, goes back to its own place instead, and releases the partition unless another dead letter
-- holds it next (settle.lua, unhalt). The last error stays on the record.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2…] task ids
-- Returns: one code per id: OK, NOTFOUND, NOTDEAD, or LEVELS when its partition has MAX_LEVELS
--          non-zero priorities pending and its priority is another one (the letter stays dead).

-- @include common
-- @include outcome
-- @include flow
-- @include settle

local now = now_ms()
local res, parts, seen = {}, {}, {}
local requeued = 0

for i = 2, #ARGV do
  local id = ARGV[i]
  local kt = k_task(id)
  local f = redis.call('HMGET', kt, 'S', 'p', 'r', 'F', 'H', 'j', 's', 't', 'K', 'c')
  if not f[2] then
    res[#res + 1] = NOTFOUND
  elseif f[1] ~= 'd' then
    res[#res + 1] = NOTDEAD
  elseif level_full(f[2], f[3] or '0') then
    res[#res + 1] = LEVELS
  else
    local p, s, t = f[2], next_seq(), now
    if f[6] and unhalt(p, id) then
      -- It holds its partition, or waits to: it goes back to its own place, and the partition
      -- goes on from the head once no other dead letter holds it (unhalt).
      -- The record's sequence number padded (common.lua, next_seq); no t: available when
      -- published, at c.
      s, t = string.rep('0', 20 - #f[7]) .. f[7], tonumber(f[8] or f[10])
    end
    redis.call('ZREM', K_DEAD, id)
    redis.call('HSET', kt, 'S', 'p', 's', s, 't', int(t), 'a', 0, 'n', 0)
    pend(id, kt, p, f[3] or '0', s, t)
    if f[4] then flow_end(id, f[4], f[5] or BASE, 'r', '', f[9]) end -- a flow step or a child: its flow or parent goes on
    if not seen[p] then seen[p] = true; parts[#parts + 1] = p end
    requeued = requeued + 1
    emit('requeued', id)
    res[#res + 1] = OK
  end
end

for i = 1, #parts do place(parts[i], now) end
stat('pending', requeued)
stat('requeued', requeued)
if flow_queue then flow_run(now) end
finish()
return res
