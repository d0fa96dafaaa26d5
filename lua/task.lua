-- task.lua: one task's record by id, with its lease deadline when leased.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] task id
-- Returns: NOTFOUND, or {lease deadline ms (0: not leased), field, value, …}: the record's fields,
--          and for a leased task then S (state) 'i', k (token), w (consumer) and a (attempts,
--          counting the current delivery), which the Go side reads as later fields winning.

-- @include common

local kt = k_task(ARGV[2])
local fields = redis.call('HGETALL', kt)
if #fields == 0 then return NOTFOUND end
local out = {tonumber(redis.call('ZSCORE', K_INFLIGHT, ARGV[2])) or 0}
local ended = 0 -- deliveries that ended: the record's attempts field
for i = 1, #fields, 2 do
  out[#out + 1] = fields[i]
  out[#out + 1] = fields[i + 1]
  if fields[i] == 'a' then ended = tonumber(fields[i + 1]) end
end
local lease = redis.call('HGET', K_LEASES, ARGV[2])
if lease then
  for _, v in ipairs({'S', 'i', 'k', lease_token(lease), 'w', lease_consumer(lease), 'a', int(ended + 1)}) do
    out[#out + 1] = v
  end
end
return out
