#!lua name=LIBRARY
-- redislimit's function library (FUNCTION LOAD; called with FCALL): one
-- function decides batches of units, a section per slot tag (one section
-- on a cluster, where a call's keys share a slot; every waiting tag's on a
-- single server), in order and atomically, and stores what they grant. Its arithmetic mirrors
-- package internal/bucket operation for operation (doubles on both sides);
-- the Go side replays every decision on the states this function reports
-- and refuses a reply that disagrees. The helpers and scratch tables are
-- made once, when the library loads; a call resets what it uses.
--
-- Times are (us, rem): whole microseconds since the Unix epoch and the
-- nanoseconds beyond them, 0 <= rem < 1000, both held exactly in doubles.
--
-- keys: the sections' drop records and expiry indexes, the holds the
-- batch names, then its buckets (nB from b0). args[1]: the program (see
-- program.go). args[2]: the clock as '<dd' (us, rem), or '' for the
-- server's TIME.
-- The libraries exist only when the function runs (not while the library
-- loads): bound on the first call.
local pack, sunpack, call, concat, tunpack, floor, huge, format

-- The call's inputs and clock.
local KEYS, prog, pos, nus, nrem, nS

-- Limits: kind (1 token bucket, 2 fixed window), rate, period as a double
-- (LF), capacity, maxReserved (0: unlimited), period as (us, rem).
local LK, LR, LF, LC, LM, LPu, LPr = {}, {}, {}, {}, {}, {}, {}
-- Items: key index, limit index, fixed-window phase as (us, rem).
local IK, IL, IHu, IHr = {}, {}, {}, {}

-- a <= b, for times
local function le(aus, arem, bus, brem)
  return aus < bus or (aus == bus and arem <= brem)
end

-- a - b, for times
local function sub(aus, arem, bus, brem)
  local us, rem = aus - bus, arem - brem
  if rem < 0 then
    return us - 1, rem + 1000
  end
  return us, rem
end

-- a + b, for times
local function add(aus, arem, bus, brem)
  local us, rem = aus + bus, arem + brem
  if rem >= 1000 then
    return us + 1, rem - 1000
  end
  return us, rem
end

-- q * period of limit l, exactly, as (us, rem)
local function mul(q, l)
  local pr = LPr[l]
  local qh = floor(q / 1000)
  local x = (q - qh * 1000) * pr
  local xh = floor(x / 1000)
  return q * LPu[l] + qh * pr + xh, x - xh * 1000
end

-- floor division of the time e by limit l's period: q and e - q*period
-- (in [0, period)), exactly. The double estimate of q is off by a few at
-- most; the exact remainder corrects it.
local function divmod(eus, erem, l)
  local pu, pr = LPu[l], LPr[l]
  local q = floor((eus * 1000 + erem) / LF[l])
  for _ = 1, 16 do
    local rus, rrem = sub(eus, erem, mul(q, l))
    if rus < 0 then
      q = q - 1
    elseif rus > pu or (rus == pu and rrem >= pr) then
      q = q + 1
    else
      return q, rus, rrem
    end
  end
  error('ratelimit: window division did not settle')
end

-- The double nearest d = dus*1000 + drem nanoseconds (dus >= 0), as Go's
-- float64(uint64(d)): exact below 2^53; above, two exact parts summed with
-- one rounding.
local function nanos(dus, drem)
  if dus < 9007199254740 then
    return dus * 1000 + drem
  end
  local h = floor(dus / 1048576)
  return h * 1048576000 + ((dus - h * 1048576) * 1000 + drem)
end

-- bucket.Limit.Project: s refilled up to now (nu, nr), capped.
-- (le, sub and nanos written out: it runs several times a decision)
local function project(l, v, tus, trem, nu, nr)
  local cap = LC[l]
  if nu < tus or (nu == tus and nr <= trem) then -- no time passed (or the clock went back)
    if cap < v then v = cap end
    return v, tus, trem
  end
  local dus, drem = nu - tus, nr - trem
  if drem < 0 then dus, drem = dus - 1, drem + 1000 end
  if LK[l] == 2 then
    if dus < LPu[l] or (dus == LPu[l] and drem < LPr[l]) then
      if cap < v then v = cap end
      return v, tus, trem
    end
    local k, rus, rrem = divmod(dus, drem, l)
    v = v + LR[l] * k
    if cap < v then v = cap end
    local sus, srem = sub(nu, nr, rus, rrem)
    return v, sus, srem
  end
  local d
  if dus < 9007199254740 then
    d = dus * 1000 + drem
  else
    d = nanos(dus, drem)
  end
  v = v + d * LR[l] / LF[l]
  if cap < v then v = cap end
  return v, nu, nr
end

-- windowStart is the start of the fixed window of item i's limit (and
-- phase) that holds the time (u, r): bucket.Limit.WindowStart.
local function windowStart(i, u, r)
  local eus, erem = sub(u, r, IHu[i], IHr[i])
  local _, rus, rrem = divmod(eus, erem, IL[i])
  return sub(u, r, rus, rrem)
end

-- bucket.Limit.Fresh at (nu, nr) for an item's limit and phase.
local function fresh(i, nu, nr)
  local l = IL[i]
  if LK[l] == 2 then
    local sus, srem = windowStart(i, nu, nr)
    return LC[l], sus, srem
  end
  return LC[l], nu, nr
end

local function allowed(l, reserve)
  if reserve == 0 then return 0 end
  if LM[l] > 0 then return LM[l] end
  return huge
end

-- bucket.Limit.take
local function take(l, v, us, rem, nu, nr, count, reserve)
  v, us, rem = project(l, v, us, rem, nu, nr)
  v = v - count
  return v >= -allowed(l, reserve) and v ~= -huge, v, us, rem
end

-- bucket.Limit.takeTwo: ok, writeA, writeB, then the two states.
local function takeTwo(l, av, au, ar, bv, bu, br, nu, nr, count, reserve)
  local okA, nav, nau, nar = take(l, av, au, ar, nu, nr, count, reserve)
  local okB, nbv, nbu, nbr = take(l, bv, bu, br, nu, nr, count, reserve)
  if okA and (not okB or nav >= nbv) then
    return true, true, false, nav, nau, nar, bv, bu, br
  end
  if okB then
    return true, false, true, av, au, ar, nbv, nbu, nbr
  end
  local pav, pau, par = project(l, av, au, ar, nu, nr)
  local pbv, pbu, pbr = project(l, bv, bu, br, nu, nr)
  local half = (pav + pbv - count) / 2
  if half == -huge then
    half = pav / 2 + pbv / 2 - count / 2
  end
  if half < -allowed(l, reserve) or half == -huge or pav < half or pbv < half then
    return false, false, false, av, au, ar, bv, bu, br
  end
  return true, true, true, half, pau, par, half, pbu, pbr
end

-- bucket.Limit.Credit
local function credit(l, v, us, rem, nu, nr, count)
  v, us, rem = project(l, v, us, rem, nu, nr)
  v = v + count
  if LC[l] < v then v = LC[l] end
  return v, us, rem
end

-- A tag's drop record: the latest clock reading at which a full bucket
-- was deleted there. An absent bucket is fresh as of max(now, it), so that
-- a clock gone back cannot count a refill twice (as the partitions do).
-- The record also keeps the tag's hold sequence (see "Holds"), as a third
-- double when not 0 (with no drop yet, the reading is -inf).
-- Per section: its drop record's key, expiry index's key (0: none), units,
-- the record's value (SDu, SDr; nil: none), hold sequence (SQ) and
-- whether it changed (SDc). sec is the section being decided.
local SDk, SEk, SNU, SDu, SDr, SQ, SDc = {}, {}, {}, {}, {}, {}, {}
local sec
local dropKeys = {}
-- loadDrops reads every section's drop record, at once.
local function loadDrops()
  if nS == 0 then return end
  for j = 1, nS do dropKeys[j] = KEYS[SDk[j]] end
  local raw = call('MGET', tunpack(dropKeys, 1, nS))
  for j = 1, nS do
    local b = raw[j]
    if b and #b == 24 then
      SDu[j], SDr[j], SQ[j] = sunpack('<ddd', b)
    elseif b then
      SDu[j], SDr[j] = sunpack('<dd', b)
    end
  end
end
-- dropRecord is section j's drop record, as stored.
local function dropRecord(j)
  if SQ[j] > 0 then return pack('<ddd', SDu[j] or -huge, SDr[j] or 0, SQ[j]) end
  return pack('<dd', SDu[j], SDr[j])
end
local function freshAt()
  local du = SDu[sec]
  if du and le(nus, nrem, du, SDr[sec]) then return du, SDr[sec] end
  return nus, nrem
end
-- dropped records that a full bucket stamped (u, r) was deleted: the
-- record becomes the latest of itself, now and the stamp (later than now
-- when the clock went back since), so that the bucket comes back full as
-- of no earlier than it was.
local function dropped(u, r)
  if le(u, r, nus, nrem) then u, r = nus, nrem end
  local du = SDu[sec]
  if not du or not le(u, r, du, SDr[sec]) then
    SDu[sec], SDr[sec], SDc[sec] = u, r, true
  end
end

-- The bucket cache, by key index: CP[k] is true (present) or false
-- (absent); CV, CU, CR its state; CE its room record (see "Holds"; nil:
-- none); CW the item whose limit last wrote it; KS the section that wrote
-- it; CB the 24 bytes it was read as, while its state is still theirs
-- (nil once written, or if it had a room record), which a reply repeats
-- instead of packing the state again.
local CP, CV, CU, CR, CE, CW, KS, CB = {}, {}, {}, {}, {}, {}, {}, {}

-- # Holds
--
-- Phase one of a call across tags takes its tokens at once and records a
-- hold; if the call is then denied, phase two gives them back. Meanwhile
-- other requests may write the bucket, and a refill, a credit or a reset
-- may bring it to capacity, where the tokens held no longer count (the
-- bucket would be full without them too): giving them back then would
-- over-admit. What may be given back is at most the least room (capacity
-- minus value) the bucket has had since the hold: every write after it
-- takes equally from the bucket with and without the held tokens, and
-- every refill or credit caps both alike. Room a give-back uses up is
-- taken out of the rooms recorded since its hold, so that two holds on
-- one bucket cannot give the same room back twice.
--
-- So each tag numbers its holds (SQ, kept in its drop record; a hold key
-- stores its number), and a bucket that a hold wrote keeps a room record:
-- (number, room) pairs, the room it had at writes made after that hold
-- number was given (before each write, refilled to then, and after it).
-- The record keeps only what a query can use (a pair whose room a later
-- pair undercuts goes) and at most roomPairs pairs: beyond, a new pair
-- merges into the top one, as the new number with the top's lesser room,
-- which can only lower what is given back, and least where rooms are
-- largest (rooms rise along the record). A bucket that has none, having been deleted (full)
-- since, gives nothing back; a new record starts with room 0 for the
-- holds before it. The records travel after the state in the bucket's
-- value, 16 bytes a pair.
local roomPairs = 16
-- HN[holdK]: the number of the hold recorded under key index holdK in this
-- call; curHold: the number of the hold whose unit is being stored (nil:
-- none).
local HN = {}
local curHold
-- holdNumber gives the hold of key index holdK its number, once per call.
local function holdNumber(holdK)
  local n = HN[holdK]
  if not n then
    n = SQ[sec] + 1
    SQ[sec], SDc[sec], HN[holdK] = n, true, n
  end
  return n
end
-- observe adds (n, room) to bucket k's room record e.
local function observe(e, n, room)
  local len = #e
  while len > 0 and e[len] >= room do
    e[len], e[len - 1], len = nil, nil, len - 2
  end
  if len > 0 and e[len - 1] == n then return end
  if len == 2 * roomPairs then -- full: the top pair takes on n, keeping its lesser room
    e[len - 1] = n
  else
    e[len + 1], e[len + 2] = n, room
  end
end
-- leastRoom is the least room bucket k's record holds since hold number
-- n, or 0 if it has none.
local function leastRoom(k, n)
  local e = CE[k]
  if not e then return 0 end
  for j = 1, #e, 2 do
    if e[j] >= n then return e[j + 1] end -- rooms rise along the record
  end
  return 0
end
-- record notes in bucket k's room record a write of item i's limit that
-- leaves value v, when the bucket has one or the write is a hold's.
local function record(k, i, v)
  local e = CE[k]
  if not e and not curHold then return end
  local l = IL[i]
  local cap = LC[l]
  local before = 0 -- an absent bucket is full
  if CP[k] then before = cap - project(l, CV[k], CU[k], CR[k], nus, nrem) end
  local n = SQ[sec]
  local was = curHold and curHold - 1 or n -- a hold's own write begins before its number
  if not e then
    e = {was, 0} -- the holds before: the bucket was deleted (full) since
    CE[k] = e
  end
  observe(e, was, before)
  observe(e, n, cap - v)
end
local isDirty, dirty, nDirty = {}, {}, 0
local function mark(k)
  KS[k] = sec
  if not isDirty[k] then
    isDirty[k] = true
    nDirty = nDirty + 1
    dirty[nDirty] = k
  end
end
-- item i's bucket as stored, or fresh: v, us, rem, present
-- A fixed window's stored start off its limit's grid (stored under
-- another period or phase: SetLimits) is read as the start of the window
-- on the grid that holds it, as the partitions read it.
local function state(i)
  local k = IK[i]
  if CP[k] then
    if LK[IL[i]] == 2 then
      local u, r = windowStart(i, CU[k], CR[k])
      return CV[k], u, r, true
    end
    return CV[k], CU[k], CR[k], true
  end
  local fu, fr = freshAt()
  local v, u, r = fresh(i, fu, fr)
  return v, u, r, false
end
local function put(k, i, v, u, r)
  record(k, i, v)
  CP[k], CV[k], CU[k], CR[k], CW[k], CB[k] = true, v, u, r, i, nil
  mark(k)
end
-- gone deletes bucket k (full, or reset).
local function gone(k)
  CP[k], CE[k], CB[k] = false, nil, nil
  mark(k)
end
-- a decided state: a full bucket is deleted (full equals absent)
local function store(k, i, v, u, r)
  local l = IL[i]
  if project(l, v, u, r, nus, nrem) >= LC[l] then
    gone(k)
    dropped(u, r)
  else
    put(k, i, v, u, r)
  end
end

-- The reply, in pieces; ST[s] is status byte s.
local out, nOut = {}, 0
local ST = {[0] = '\0', '\1', '\2'}
local function emit(v, u, r, present)
  nOut = nOut + 1
  out[nOut] = pack('<Bddd', present and 1 or 0, v, u, r)
end
-- FB[l]: the reply's bytes for an absent token bucket of limit l, fresh
-- at the call's clock (set per call).
local FB = {}
-- emitPrior is emit of item i's state (v, u, r, present, as state(i)
-- returned it) without packing what the call already holds as bytes: a
-- token bucket still as read (its stored bytes), or absent and fresh at
-- the call's clock. Both are the bytes emit would pack.
local function emitPrior(i, v, u, r, present)
  local l = IL[i]
  if LK[l] == 1 then
    if present then
      local b = CB[IK[i]]
      if b then
        out[nOut + 1], out[nOut + 2] = ST[1], b
        nOut = nOut + 2
        return
      end
    elseif u == nus and r == nrem then
      local b = FB[l]
      if not b then
        b = pack('<Bddd', 0, v, u, r)
        FB[l] = b
      end
      nOut = nOut + 1
      out[nOut] = b
      return
    end
  end
  emit(v, u, r, present)
end
-- emitItem emits item i's prior state and returns it, as state(i).
local function emitItem(i)
  local v, u, r, present = state(i)
  emitPrior(i, v, u, r, present)
  return v, u, r, present
end

-- A unit's tentative writes, applied to the cache when it is granted;
-- oAt[k] is key k's entry (see clearWrites).
local oK, oI, oV, oU, oR, nO = {}, {}, {}, {}, {}, 0
local oAt = {}
local function clearWrites()
  for j = 1, nO do oAt[oK[j]] = nil end
  nO = 0
end
local function cur(i)
  local j = oAt[IK[i]]
  if j then return oV[j], oU[j], oR[j] end
  local v, u, r = state(i)
  return v, u, r
end
local function tput(i, v, u, r)
  local k = IK[i]
  local j = oAt[k]
  if not j then
    nO = nO + 1
    j, oK[nO], oAt[k] = nO, k, nO
  end
  oI[j], oV[j], oU[j], oR[j] = i, v, u, r
end

-- Decide members of a unit.
local mOp, mRes, mRole, mA, mB, mCount = {}, {}, {}, {}, {}, {}
local mRv, mRu, mRr, mTu, mTr, mWv, mFirst = {}, {}, {}, {}, {}, {}, {}

-- decideUnit decides n members (already read) all or none, and returns
-- the unit's status: 0 denied, 1 granted, 2 a pair across slots whose
-- held share cannot cover the decision.
local function decideUnit(n)
  clearWrites()
  for m = 1, n do
    local op, res, i, count = mOp[m], mRes[m], mA[m], mCount[m]
    local l = IL[i]
    local role = mRole[m]
    if op == 2 then -- credit
      local v, u, r = cur(i)
      tput(i, credit(l, v, u, r, nus, nrem, count))
    elseif role == 1 then -- first shard of a pair across slots: hold what it may take
      local v, u, r = cur(i)
      local pv, pu, pr = project(l, v, u, r, nus, nrem)
      if op == 0 then
        local al = allowed(l, res)
        local w = pv - count
        if not (w >= -al and w ~= -huge) then
          if al ~= huge and pv > -al then w = -al else w = pv end
        end
        tput(i, w, pu, pr)
      end
    elseif role == 2 then -- second shard: decide the pair, the first's state given
      local v, u, r = cur(i)
      local du, dr = nus, nrem
      if le(mTu[m], mTr[m], du, dr) then du, dr = mTu[m], mTr[m] end
      local good, wa, wb, av, au, ar, bv, bu, br, other
      if mFirst[m] == 1 then
        good, wa, wb, av, au, ar, bv, bu, br = takeTwo(l, mRv[m], mRu[m], mRr[m], v, u, r, du, dr, count, res)
        other = wa and av or mRv[m]
        if good and op == 0 and wb then tput(i, bv, bu, br) end
      else
        good, wa, wb, av, au, ar, bv, bu, br = takeTwo(l, v, u, r, mRv[m], mRu[m], mRr[m], du, dr, count, res)
        other = wb and bv or mRv[m]
        if good and op == 0 and wa then tput(i, av, au, ar) end
      end
      if not good then return 0 end
      if op == 0 and other < mWv[m] then return 2 end
    elseif mB[m] == 0 then
      local v, u, r = cur(i)
      local good, nv, nu2, nr2 = take(l, v, u, r, nus, nrem, count, res)
      if not good then return 0 end
      if op == 0 then tput(i, nv, nu2, nr2) end
    else
      local av, au, ar = cur(i)
      local bv, bu, br = cur(mB[m])
      local good, wa, wb, nav, nau, nar, nbv, nbu, nbr = takeTwo(l, av, au, ar, bv, bu, br, nus, nrem, count, res)
      if not good then return 0 end
      if op == 0 then
        if wa then tput(i, nav, nau, nar) end
        if wb then tput(mB[m], nbv, nbu, nbr) end
      end
    end
  end
  return 1
end

-- When a bucket is full again, as (us, rem), checked with project: nil if
-- never (or beyond the clock's range).
local function fullAt(i, v, u, r)
  local l = IL[i]
  local cap = LC[l]
  local pv, pu, pr = project(l, v, u, r, nus, nrem)
  local need = cap - pv
  if not (need < huge) then return nil end
  if LK[l] == 2 then
    local k = floor(need / LR[l])
    if k < 1 then k = 1 end
    if not (k * (LPu[l] + 1) < 4503599627370496) then return nil end
    local tu, tr = add(pu, pr, mul(k, l))
    for _ = 1, 4 do
      if project(l, v, u, r, tu, tr) >= cap then return tu, tr end
      tu, tr = add(tu, tr, LPu[l], LPr[l])
    end
    return nil
  end
  local d = floor(need * LF[l] / LR[l] / 1000) + 1
  for _ = 1, 8 do
    if not (pu + d < 4503599627370496) then return nil end
    if project(l, v, u, r, pu + d, pr) >= cap then return pu + d, pr end
    d = d * 2
  end
  return nil
end

-- expiryMs is the servers' expiry, in Unix milliseconds, of a key whose
-- bucket is full at tu (us): within two milliseconds after, never before.
local function expiryMs(tu)
  return floor(tu / 1000) + 2
end

local holds, nHolds = {}, 0
local ebuf = {} -- a room record, packed
local sweepN, verify, holdMs

-- clock binds the libraries on a function's first call, then reads its
-- clock into (nus, nrem): the server's TIME when arg is '', else arg. It
-- reports whether the reading is in range.
local function clock(arg)
  if not call then
    pack, sunpack, call, concat, tunpack = struct.pack, struct.unpack, redis.call, table.concat, unpack
    floor, huge, format = math.floor, math.huge, string.format
  end
  if arg == '' then
    local t = call('TIME')
    nus, nrem = tonumber(t[1]) * 1000000 + tonumber(t[2]), 0
  else
    nus, nrem = sunpack('<dd', arg)
  end
  return nus >= 0 and nus < 4503599627370496 -- 2^52 us: 1970 to 2112
end

-- begin reads the call's clock and program header, limits and items;
-- false and an error reply when the clock is out of range.
local function begin(keys, args)
  KEYS, prog = keys, args[1]
  if not clock(args[2]) then
    return false
  end
  local nL, nI, b0, nB
  nL, nI, nS, b0, nB, sweepN, verify, holdMs, pos = sunpack('<HHHHHHHd', prog, 1)
  for i = 1, nL do
    LK[i], LR[i], LF[i], LC[i], LM[i], LPu[i], LPr[i], pos = sunpack('<Bdddddd', prog, pos)
    FB[i] = nil
  end
  for i = 1, nI do
    IK[i], IL[i], IHu[i], IHr[i], pos = sunpack('<HHdd', prog, pos)
  end
  for j = 1, nS do
    SDk[j], SEk[j], SNU[j], pos = sunpack('<HHH', prog, pos)
    SDu[j], SDr[j], SQ[j], SDc[j] = nil, nil, 0, false
  end
  for h in pairs(HN) do HN[h] = nil end
  nDirty, nOut, nHolds = 0, 1, 0
  out[1] = pack('<dd', nus, nrem)
  return true, b0, nB
end

-- Keys an MGET reads at most; the keys of a chunk it read as absent.
local mgetChunk = 4096
local absent = {}

-- load reads the drop records, sweeps the expiry index (clock from the
-- client: delete the buckets that are full by now, bounded per call), then
-- reads every bucket at once.
local function load(b0, nB)
  loadDrops()
  for j = 1, nS do
    local expK = SEk[j]
    if expK > 0 and sweepN > 0 then
      local due = call('ZRANGEBYSCORE', KEYS[expK], '-inf', nus, 'LIMIT', 0, sweepN)
      if #due > 0 then
        call('DEL', tunpack(due))
        call('ZREM', KEYS[expK], tunpack(due))
        sec = j
        dropped(nus, nrem) -- they are full by now (their scores are)
        -- written at once: should the call fail later, the buckets stay deleted
        call('SET', KEYS[SDk[j]], dropRecord(j))
        SDc[j] = false
      end
    end
  end
  -- in chunks: unpack cannot spread more than a few thousand values
  for lo = b0, b0 + nB - 1, mgetChunk do
    local hi = lo + mgetChunk - 1
    if hi > b0 + nB - 1 then hi = b0 + nB - 1 end
    local raw = call('MGET', tunpack(KEYS, lo, hi))
    local nAbsent = 0
    for k = lo, hi do
      local b = raw[k - lo + 1]
      isDirty[k] = false
      CE[k] = nil
      if b then
        if #b < 24 or (#b - 24) % 16 ~= 0 then error('ratelimit: ' .. KEYS[k] .. ' is not a bucket') end
        CP[k] = true
        local at
        CV[k], CU[k], CR[k], at = sunpack('<ddd', b)
        if #b > 24 then
          local e = {}
          for j = 1, (#b - 24) / 8 do e[j], at = sunpack('<d', b, at) end
          CE[k], CB[k] = e, nil
        else
          CB[k] = b
        end
      else
        CP[k], CB[k] = false, nil
        nAbsent = nAbsent + 1
        absent[nAbsent] = KEYS[k]
      end
    end
    -- MGET reads a key of another type (a hash, a list) as absent: one
    -- of those is not a bucket either, and must not be written over.
    if nAbsent > 0 and call('EXISTS', tunpack(absent, 1, nAbsent)) > 0 then
      for j = 1, nAbsent do
        if call('EXISTS', absent[j]) == 1 then error('ratelimit: ' .. absent[j] .. ' is not a bucket') end
      end
    end
  end
end

-- addHold records that the unit took tokens under hold key holdK (0: none).
local function addHold(holdK)
  if holdK > 0 then
    nHolds = nHolds + 1
    holds[nHolds] = holdK
  end
end

-- decideOne decides a unit whose one member takes or checks one bucket,
-- as decideKind does, without the unit's scratch tables.
local function decideOne(op, res, i, count, holdK)
  nOut = nOut + 1
  local at = nOut
  local v, u, r = emitItem(i)
  local good, nv, nu, nr = take(IL[i], v, u, r, nus, nrem, count, res)
  out[at] = good and ST[1] or ST[0]
  if good then
    if op == 0 then
      if holdK > 0 then curHold = holdNumber(holdK) end
      store(IK[i], i, nv, nu, nr)
      curHold = nil
      addHold(holdK)
    end
    if verify == 1 then emit(state(i)) end
  end
end

-- decideKind runs a decide unit of n members.
local function decideKind(n, holdK)
  if n == 1 then
    local op, res, role, a, b, count, after = sunpack('<BBBHHd', prog, pos)
    if role == 0 and b == 0 and op ~= 2 then
      pos = after
      return decideOne(op, res, a, count, holdK)
    end
  end
  for m = 1, n do
    mOp[m], mRes[m], mRole[m], mA[m], mB[m], mCount[m], pos = sunpack('<BBBHHd', prog, pos)
    if mRole[m] == 2 then
      mRv[m], mRu[m], mRr[m], mTu[m], mTr[m], mWv[m], mFirst[m], pos = sunpack('<ddddddB', prog, pos)
    end
  end
  nOut = nOut + 1
  local at = nOut
  for m = 1, n do
    emitItem(mA[m])
    if mB[m] > 0 then emitItem(mB[m]) end
  end
  local status = decideUnit(n)
  if status == 1 then
    if nO > 0 and holdK > 0 then curHold = holdNumber(holdK) end
    for j = 1, nO do store(oK[j], oI[j], oV[j], oU[j], oR[j]) end
    curHold = nil
    if nO > 0 then addHold(holdK) end
    if verify == 1 then -- tests: the states the unit left, compared bit for bit
      for m = 1, n do
        emit(state(mA[m]))
        if mB[m] > 0 then emit(state(mB[m])) end
      end
    end
  end
  out[at] = ST[status]
end

-- itemsKind runs a peek (kind 2) or reset (kind 3) unit of n items.
local function itemsKind(kind, n)
  nOut = nOut + 1
  out[nOut] = ST[1]
  for _ = 1, n do
    local i
    i, pos = sunpack('<H', prog, pos)
    if kind == 2 then
      emitItem(i)
    else
      gone(IK[i])
    end
  end
end

-- usedUp takes room given back by hold number num out of bucket k's
-- record: the rooms recorded since the hold (its tokens out then) shrink
-- by given, not below 0, so that no other hold can give the same room
-- back again; then a pair a later one undercuts goes, as in observe.
local function usedUp(k, num, given)
  local e = CE[k]
  if not e then return end
  for q = 2, #e, 2 do
    if e[q - 1] >= num then
      local x = e[q] - given
      if x < 0 then x = 0 end
      e[q] = x
    end
  end
  local w, least = #e, huge
  for q = #e, 2, -2 do -- keep, from the top down, the pairs below every later room
    if e[q] < least then
      least = e[q]
      e[w - 1], e[w] = e[q - 1], e[q]
      w = w - 2
    end
  end
  local len = #e - w
  for q = 1, len do e[q] = e[w + q] end
  for q = #e, len + 1, -1 do e[q] = nil end
end

-- settleKind ends a hold: restores what is unchanged, gives back the
-- rest, no more than the least room since the hold (see "Holds").
local function settleKind(n, holdK)
  local h = call('GETDEL', KEYS[holdK])
  local live = h ~= false
  local num = live and (tonumber(h) or 1) -- a hold without a number: its call's own
  nOut = nOut + 1
  out[nOut] = live and ST[1] or ST[0]
  for _ = 1, n do
    local i, ep, ev, eu, er, tp, tv, tu, tr, amount
    i, ep, ev, eu, er, tp, tv, tu, tr, amount, pos = sunpack('<HBdddBdddd', prog, pos)
    if live then
      local k = IK[i]
      local l = IL[i]
      local same, room = ep == 0, 0
      if CP[k] then
        same = ep == 1 and CV[k] == ev and CU[k] == eu and CR[k] == er
        room = LC[l] - project(l, CV[k], CU[k], CR[k], nus, nrem)
        local least = leastRoom(k, num)
        if least < room then room = least end
      end
      if same and room >= amount then -- nothing took the place of what it holds
        if amount > 0 then usedUp(k, num, amount) end
        if tp == 1 then
          put(k, i, tv, tu, tr)
        else
          gone(k)
        end
      elseif amount > 0 and room > 0 then
        if room < amount then amount = room end
        usedUp(k, num, amount)
        store(k, i, credit(l, CV[k], CU[k], CR[k], nus, nrem, amount))
      end
    end
  end
end

-- EXS[ms]: the decimal string of an expiry this call has formatted
-- (keys written in one call mostly share a few); EXL lists them, to
-- clear.
local EXS, EXL = {}, {}
local function expiryArg(ms)
  local s = EXS[ms]
  if not s then
    s = format('%d', ms)
    EXS[ms] = s
    EXL[#EXL + 1] = ms
  end
  return s
end

-- writeBack stores what changed, with its expiry, and the holds.
local function writeBack()
  for j = 1, nDirty do
    local k = dirty[j]
    local expK = SEk[KS[k]]
    if CP[k] then
      local blob = pack('<ddd', CV[k], CU[k], CR[k])
      local e = CE[k]
      if e then
        for j = 1, #e do ebuf[j] = pack('<d', e[j]) end
        blob = blob .. concat(ebuf, '', 1, #e)
      end
      local tu = fullAt(CW[k], CV[k], CU[k], CR[k])
      if expK > 0 then
        call('SET', KEYS[k], blob)
        if tu then
          call('ZADD', KEYS[expK], tu + 1, KEYS[k])
        else
          call('ZREM', KEYS[expK], KEYS[k])
        end
      elseif tu then -- whole milliseconds, as a decimal string (Redis 7.0 formats a number argument with %.17g, which costs more)
        call('SET', KEYS[k], blob, 'PXAT', expiryArg(expiryMs(tu)))
      else
        call('SET', KEYS[k], blob)
      end
    else
      call('DEL', KEYS[k])
      if expK > 0 then call('ZREM', KEYS[expK], KEYS[k]) end
    end
  end
  for j = 1, nHolds do
    call('SET', KEYS[holds[j]], format('%d', HN[holds[j]]), 'PX', holdMs)
  end
  for j = 1, nS do
    if SDc[j] then call('SET', KEYS[SDk[j]], dropRecord(j)) end
  end
  for j = 1, #EXL do
    EXS[EXL[j]], EXL[j] = nil, nil
  end
end

local function run(keys, args)
  local ok, b0, nB = begin(keys, args)
  if not ok then
    return redis.error_reply('RANGE ratelimit: clock outside the years 1970 to 2112')
  end
  load(b0, nB)
  for j = 1, nS do
    sec = j
    for _ = 1, SNU[j] do
      local kind, n, holdK
      kind, n, holdK, pos = sunpack('<BHH', prog, pos)
      if kind == 1 then
        decideKind(n, holdK)
      elseif kind == 2 or kind == 3 then
        itemsKind(kind, n)
      elseif kind == 4 then
        settleKind(n, holdK)
      else
        error('ratelimit: unknown unit ' .. kind)
      end
    end
  end
  writeBack()
  return concat(out, '', 1, nOut)
end

-- extend moves the expiries of buckets a changed limit reads (SetLimits)
-- to when each is full under it, never earlier than they were: a key
-- written under the old limit must not expire, and read full, before the
-- new limit would fill it. keys: n buckets, then (with the client's
-- clock) each one's expiry index. args[1]: the limit, as a program's;
-- args[2]: the clock, as run's; args[3]: n. Keys that are not buckets are
-- left alone. Returns how many expiries moved.
local function extend(keys, args)
  if not clock(args[2]) then
    return redis.error_reply('RANGE ratelimit: clock outside the years 1970 to 2112')
  end
  LK[1], LR[1], LF[1], LC[1], LM[1], LPu[1], LPr[1] = sunpack('<Bdddddd', args[1], 1)
  local n = tonumber(args[3])
  local clientClock = #keys == 2 * n
  local moved = 0
  for j = 1, n do
    IL[j] = 1
    local b = redis.pcall('GET', keys[j])
    if type(b) == 'string' and #b >= 24 and (#b - 24) % 16 == 0 then
      local v, u, r = sunpack('<ddd', b)
      local tu = fullAt(j, v, u, r)
      if clientClock then
        if tu then
          moved = moved + call('ZADD', keys[n + j], 'GT', 'CH', tu + 1, keys[j])
        else
          moved = moved + call('ZREM', keys[n + j], keys[j])
        end
      else
        local cur = call('PEXPIRETIME', keys[j])
        if tu then
          local at = expiryMs(tu)
          if cur >= 0 and at > cur then
            call('PEXPIREAT', keys[j], format('%d', at))
            moved = moved + 1
          end
        elseif cur >= 0 then
          call('PERSIST', keys[j])
          moved = moved + 1
        end
      end
    end
  end
  return moved
end

redis.register_function{function_name = 'LIBRARY', callback = run}
redis.register_function{function_name = 'LIBRARY_extend', callback = extend}
