-- set_paused.lua: pauses or resumes one partition. A paused partition hands out no work; its pending
-- and leased tasks stay as they are.
--
-- KEYS: the common nine (includes/common.lua).
-- ARGV[1] key base
-- ARGV[2] partition
-- ARGV[3] 1: pause; 0: resume
-- Returns: OK

-- @include common

local p = ARGV[2]
if ARGV[3] == '1' then
  meta_set(p, 'ps', '1')
else
  meta_del(p, 'ps')
end
place(p, now_ms())
finish()
return OK
