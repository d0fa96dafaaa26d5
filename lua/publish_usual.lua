-- publish_usual.lua: publish.lua for a call whose tasks are all usual ones: priority 0, available
-- now, no headers and every other option at its zero value but max attempts, the same for all
-- (engine/merge.go decides). It adds them as publish.lua would, from 3 arguments a task instead of
-- 5 and without the batch machinery: a usual task is never refused, so the callers' batches need
-- not be told apart, and a task needs none of the tables a priority, a delay, a child or a
-- debounce key does. An id that still exists (pending, leased or dead), or that was acked within
-- the dedup window, is a duplicate and changes nothing.
--
-- KEYS: the common keys (includes/common.lua).
-- ARGV[1]  key base
-- ARGV[2]  dedup window ms (0: none); when every id is new (made for this call), -1 minus it: no
--          id is checked, and the window still prunes the acked ids
-- ARGV[3]  max attempts of every task (0: unlimited)
-- ARGV[4…] 3 per task: id, partition, payload
-- Returns: one code per task, in order: OK (added) or DUPLICATE.
--
-- Cost: TIME, INCRBY, HINCRBY and, when a task can be fetched now, LPUSH a call; HSET a task, and
-- EXISTS (and ZSCORE with a dedup window) unless its id is new; ZADD, ZRANK and ZINCRBY per run of
-- consecutive tasks of one partition (a batch to one partition is one run).
--
-- Helpers only a partition that is not ready, a dedup window or an event stream needs are made at
-- their first use (lua/cold.go).
-- @cold k_meta k_levels seq_split to_skiplist meta_del is_held levels_of level_add earliest
-- @cold schedule place prune_dedup emit place_new

-- @include common
-- @include enqueue

local now = now_ms()
local now_s = int(now)
local window = ARGV[2] + 0
local check = window >= 0
if not check then window = -1 - window end
local max = ARGV[3]
local n = (#ARGV - 3) / 3
if n > 1 then seq_reserve(n) end

local res = {}
local added = 0
-- The current run of added tasks of one partition: the partition, the first one's pending member,
-- how many, and once there are two, all their members as ZADD's score, member pairs.
local run_p, run_m, run_n, run
-- Whether each partition whose run was added is in ready now: for the first such partition, then
-- for all once there is a second (a partition may have several runs, and the ready_push of its
-- first one is not written yet, so ZRANK would not see it).
local first_p, first_ready, ready_of
-- One round more than there are tasks, to add the last run.
for i = 4, #ARGV + 1, 3 do
  local id, p = ARGV[i], ARGV[i + 1]
  local kt, dup
  if id and check then
    kt = k_task(id)
    -- is_duplicate and record_usual (enqueue.lua), written out: their calls cost a batch 3 % more
    -- instructions per task (bench/cmd/instr publish100-one). TestPublishUsualMatchesPublish
    -- fails if this copy and publish.lua's differ in what they write.
    dup = redis.call('EXISTS', kt) == 1
    if not dup and window > 0 then
      local acked = redis.call('ZSCORE', K_DEDUP, id)
      dup = acked and acked + 0 > now - window
    end
    if dup then res[#res + 1] = DUPLICATE end
  end
  if run_p and (not id or (not dup and p ~= run_p)) then
    -- The run ends: add it.
    local known
    if ready_of then known = ready_of[run_p] elseif run_p == first_p then known = first_ready end
    local r = pend_run(run_p, run_n, run_m, run, now, now_s, known)
    if not first_p then
      first_p, first_ready = run_p, r
    else -- a second run is of another partition: runs of one partition end at another's task
      if not ready_of then ready_of = {[first_p] = first_ready} end
      ready_of[run_p] = r
    end
    run_p = nil
  end
  if id and not dup then
    kt = kt or k_task(id)
    local s = n == 1 and seq_one() or next_seq(true) -- the record's form; seq_member pads it
    if max == '0' then
      redis.call('HSET', kt, 'd', ARGV[i + 2], 'p', p, 's', s, 'c', now_s)
    else
      redis.call('HSET', kt, 'd', ARGV[i + 2], 'p', p, 's', s, 'c', now_s, 'm', max)
    end
    if not run_p then
      run_p, run_m, run_n, run = p, seq_member(s, id), 1, nil
    else
      if not run then run = {now_s, run_m} end
      run[#run + 1] = now_s
      run[#run + 1] = seq_member(s, id)
      run_n = run_n + 1
    end
    if EVENTS_MAX then emit('published', id, 'p', p) end
    added = added + 1
    res[#res + 1] = OK
  end
end
if window > 0 then prune_dedup(now, window, 100) end
stat('pub', added)
stat('duplicates', n - added)
finish()
return res
