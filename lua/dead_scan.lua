-- dead_scan.lua: dead letters newest first from a cursor, optionally filtered by partition and by a
-- substring of the last error, looking at no more than a window of letters. Read-only.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] cursor: '' to start at the newest letter, else the dead score to continue below (exclusive)
-- ARGV[3] the most letters to return
-- ARGV[4] window: the most letters to look at
-- ARGV[5] '1': keep only the partition in ARGV[6]
-- ARGV[6] partition
-- ARGV[7] keep only letters whose last error, in ASCII lower case, contains this ('' : all)
-- ARGV[8] '1': return payloads and headers; '0': leave them out
-- Returns: {dead letters, next cursor ('' when the scan reached the oldest letter), letter…}; a
--          letter is {id, dead score, partition, priority, attempts, max attempts, enqueued-at ms,
--          payload, headers, crashes, last error}.

-- @include common

local cursor, limit, window = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local by_part, part, needle, full = ARGV[5] == '1', ARGV[6], ARGV[7], ARGV[8] == '1'
local top = '+inf'
if cursor ~= '' then top = '(' .. cursor end
local page = redis.call('ZREVRANGEBYSCORE', K_DEAD, top, '-inf', 'WITHSCORES', 'LIMIT', 0, window)
local out = {redis.call('ZCARD', K_DEAD), ''}
local found, last = 0, nil
for i = 1, #page, 2 do
  local id = page[i]
  last = page[i + 1]
  local kt = k_task(id)
  local f = redis.call('HMGET', kt, 'p', 'x')
  local p, x = f[1] or '', f[2] or ''
  if (not by_part or p == part) and (needle == '' or string.find(string.lower(x), needle, 1, true)) then
    -- Only a letter that passes reads the rest of its record.
    local g
    if full then
      g = redis.call('HMGET', kt, 'r', 'a', 'm', 'c', 'd', 'h', 'n')
    else
      g = redis.call('HMGET', kt, 'r', 'a', 'm', 'c')
    end
    out[#out + 1] = {id, last, p, g[1] or '0', tonumber(g[2]) or 0, tonumber(g[3]) or 0, tonumber(g[4]) or 0,
      g[5] or '', g[6] or '', tonumber(g[7]) or 0, x}
    found = found + 1
    if found >= limit then
      if i + 1 < #page or #page == 2 * window then out[2] = last end
      return out
    end
  end
end
if #page == 2 * window then out[2] = last end
return out
