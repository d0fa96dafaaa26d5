-- outcome.lua: what a task's end leaves for whoever asked for it: its outcome (state, result,
-- error), kept for a retention, and a wake-up for a caller waiting on it. Included after
-- common.lua.
--
-- Keys, built from the key base like the per-partition keys, so they share the queue's hash tag:
--   o:<id>  HASH  the outcome of task id: s (state: 'ok', 'dead' or 'cancelled'), f (ms it ended),
--                 v (the handler's result, when it gave one), e (the error, when it failed)
--   w:<id>  LIST  the state of the last end of a task published to be waited for; the waiter pops it
--   outs    ZSET  the ids whose outcome is kept; score = ms the retention ends
--
-- A task wants its outcome kept when its record has the field 'o': the retention in ms, followed
-- by 'w' when a caller may wait for it (PublishAndWait). Flow steps always have it. A fetch marks
-- the lease of such a task (lease_outcome) so an ack knows without reading the record; a task
-- without it keeps a result only under the queue's result retention, which the ack is given.

local function k_outs() return BASE .. 'outs' end
local function k_outcome(id) return BASE .. 'o:' .. id end
local function k_waiter(id) return BASE .. 'w:' .. id end

-- outcome_spec parses a record's 'o' field: the retention in ms, and whether a caller waits.
local function outcome_spec(o)
  if not o then return 0, false end
  if string.byte(o, -1) == 119 then return tonumber(string.sub(o, 1, -2)) or 0, true end -- 'w'
  return tonumber(o) or 0, false
end

-- OUTCOME_PRUNE is how many expired outcomes a write of one forgets while expired ones remain:
-- more than it writes, so the kept ones never grow past those within their retention, and bounded.
-- A call's writes after a look that found fewer do not look again (outcome_more).
local OUTCOME_PRUNE = 20

-- outcome_more is nil until a write of this call looked for expired outcomes, then whether that look
-- found a full page (more may wait).
local outcome_more = nil

-- outcome_prune forgets up to n outcomes whose retention has ended, with their waiter lists, and
-- returns whether it found n (more may wait).
local function outcome_prune(now, n)
  local old = redis.call('ZRANGEBYSCORE', k_outs(), '-inf', int(now), 'LIMIT', '0', n)
  if #old == 0 then return false end
  local keys = {}
  for i = 1, #old do
    keys[#keys + 1] = k_outcome(old[i])
    keys[#keys + 1] = k_waiter(old[i])
  end
  redis.call('DEL', unpack(keys))
  redis.call('ZREM', k_outs(), unpack(old))
  return #old == n
end

-- outcome_put records that task id ended at now in state s ('ok', 'dead' or 'cancelled') with
-- result v and error e (nil or '' for none), kept keep ms (nil: until it is deleted, as a flow
-- step's is with its flow), and wakes its waiter when waiter is set. A later end of the same task
-- (a dead letter requeued, then acked) replaces it.
local function outcome_put(id, s, v, e, keep, waiter, now)
  local ko = k_outcome(id)
  local f = {'s', s, 'f', int(now)}
  if v and v ~= '' then f[#f + 1] = 'v'; f[#f + 1] = v end
  if e and e ~= '' then f[#f + 1] = 'e'; f[#f + 1] = e end
  redis.call('DEL', ko)
  redis.call('HSET', ko, unpack(f))
  redis.call('ZADD', k_outs(), keep and int(now + keep) or '+inf', id)
  if waiter then
    local kw = k_waiter(id)
    redis.call('LPUSH', kw, s)
    redis.call('LTRIM', kw, '0', '0')
  end
  if outcome_more ~= false then outcome_more = outcome_prune(now, OUTCOME_PRUNE) end
end

-- outcome_of returns what became of task id at time now, as outcome.lua returns it: {state,
-- ended ms, result, error}, or nil when the task does not exist and no outcome of it is kept: an
-- outcome past its retention (its score in outs at or before now), which a later outcome write
-- deletes, is not kept any more.
local function outcome_of(id, now)
  local rec = redis.call('HMGET', k_task(id), 'S', 'p', 'x')
  if rec[2] and rec[1] ~= 'd' then
    if rec[1] == 'w' then return {'waiting', 0, '', ''} end
    if rec[1] == 'c' then return {'cancelled', 0, '', rec[3] or ''} end
    if redis.call('HEXISTS', K_LEASES, id) == 1 then return {'leased', 0, '', ''} end
    return {'pending', 0, '', ''}
  end
  local o = redis.call('HMGET', k_outcome(id), 's', 'f', 'v', 'e')
  if o[1] then
    -- A score that is no number is "inf": kept until a flow lets it go.
    local until_ms = redis.call('ZSCORE', k_outs(), id)
    until_ms = until_ms and tonumber(until_ms)
    if not until_ms or until_ms > now then
      return {o[1], tonumber(o[2]), o[3] or '', o[4] or ''}
    end
  end
  if rec[2] then return {'dead', 0, '', rec[3] or ''} end
  return nil
end
