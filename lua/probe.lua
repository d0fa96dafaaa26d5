-- probe.lua: what a worker's background work has to do now in each of several queue slots, read in
-- one call so that an idle worker asks Redis once, not once a slot (engine.Probe). It writes
-- nothing. The slots' keys are built from their key bases, which may carry different hash tags:
-- a standalone server runs it over any slots, Redis Cluster would refuse it (CROSSSLOT), so
-- engine.Probe takes only engines that CanWaitTogether.
--
-- KEYS: the common keys (includes/common.lua) of the first slot; not read: every slot's keys,
--       the first's too, are built from its key base:
--   <base>inflight ZSET  leased task ids; score = lease deadline ms (recover.lua)
--   <base>outs     ZSET  kept outcomes; score = ms their retention ends (outcome_prune)
--   <base>flowsx   ZSET  ended flows; score = ms their retention ends (flow_prune)
--   <base>ready, <base>depth, <base>heads  the keys recover.lua converts back from listpacks
--   <base>crondue  ZSET  schedule name -> ms it is next due (schedule_due.lua)
--   <base>fo       ZSET  the flow outbox (engine.Relay)
--   <base>flowsp   ZSET  flows being published; score = ms the publish began (engine.RecoverFlows)
-- ARGV[1]  key base of the first slot
-- ARGV[2]  ms after which a flow publish not completed counts as abandoned (0 or absent: 5 minutes)
-- ARGV[3…] the key bases of the other slots
-- Returns: {now ms, then five integers a slot, in the order of the key bases:
--   1 when a lease has expired (Recover has tasks to return), else 0;
--   1 when Recover has other upkeep (an outcome or ended flow past its retention), else 2 when it
--     has only keys to convert back from a listpack (after a load), else 0;
--   ms at which the earliest schedule is due, due or not (-1: none);
--   the number of messages in the flow outbox;
--   1 when a flow publish began more than ARGV[2] ms ago and has not completed, else 0}

-- @include common

local now = now_ms()
local abandon = tonumber(ARGV[2]) or 0
if abandon <= 0 then abandon = 300000 end

-- lowest returns the lowest score of ZSET key, or nil when it is empty.
local function lowest(key)
  local r = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return tonumber(r[2])
end

local bases = {BASE}
for i = 3, #ARGV do bases[#bases + 1] = ARGV[i] end
local out = {now}
for _, b in ipairs(bases) do
  local lease = lowest(b .. 'inflight')
  local expired = 0
  if lease and lease <= now then expired = 1 end
  local upkeep = 0
  local o, f = lowest(b .. 'outs'), lowest(b .. 'flowsx')
  if (o and o <= now) or (f and f <= now) then upkeep = 1 end
  if upkeep == 0 then
    for _, k in ipairs({'ready', 'depth', 'heads'}) do
      if is_listpack(b .. k) then upkeep = 2; break end
    end
  end
  if upkeep == 0 and lease and is_listpack(b .. 'inflight') and redis.call('ZCARD', b .. 'inflight') >= LEASES_CONVERT then
    upkeep = 2
  end
  local sched = lowest(b .. 'crondue') or -1
  local outbox = redis.call('ZCARD', b .. 'fo')
  local pub = lowest(b .. 'flowsp')
  local stale = 0
  if pub and pub <= now - abandon then stale = 1 end
  out[#out + 1] = expired
  out[#out + 1] = upkeep
  out[#out + 1] = sched
  out[#out + 1] = outbox
  out[#out + 1] = stale
end
return out
