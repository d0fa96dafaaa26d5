-- set_limit.lua: sets how many tasks of one unordered partition may be leased at once.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] partition (never an ordered one: those are always held by one consumer)
-- ARGV[3] limit (0: no limit)
-- Returns: OK
-- Tasks leased before a limit was set are not counted against it; they end as usual.

-- @include common

local p = ARGV[2]
if ARGV[3] == '0' then
  meta_del(p, 'lim')
else
  meta_set(p, 'lim', ARGV[3])
end
place(p, now_ms())
finish()
return OK
