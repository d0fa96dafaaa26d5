-- dead_list.lua: one page of dead letters, newest first.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] offset
-- ARGV[3] count
-- Returns: {total dead letters, task…}; a task is {id, partition, priority, attempts, max attempts,
--          enqueued-at ms, died-at ms, payload, headers, crashes, last error}.

-- @include common

local offset, count = tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {redis.call('ZCARD', K_DEAD)}
local page = redis.call('ZREVRANGE', K_DEAD, offset, offset + count - 1, 'WITHSCORES')
for i = 1, #page, 2 do
  local id = page[i]
  local f = redis.call('HMGET', k_task(id), 'p', 'r', 'a', 'm', 'c', 'd', 'h', 'n', 'x')
  out[#out + 1] = {id, f[1] or '', f[2] or '0', tonumber(f[3]) or 0, tonumber(f[4]) or 0, tonumber(f[5]) or 0,
    math.floor(tonumber(page[i + 1]) / 1000), f[6] or '', f[7] or '', tonumber(f[8]) or 0, f[9] or ''}
end
return out
