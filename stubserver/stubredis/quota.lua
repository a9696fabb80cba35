-- The layered quota of one stubredis Limiter: stubredis's only script, run
-- with EVALSHA (EVAL on NOSCRIPT). One call decides one request under every
-- limit of the Limiter: phase 1 checks each limit with its algorithm's
-- check, phase 2 charges every limit if all had room and none otherwise,
-- then each limit reports its state. Redis runs a script alone, so the
-- check and the charge of every limit are one atomic step for all the stubs
-- that share the Redis.
--
-- The arithmetic is the memory limiter's (stubserver.NewMemoryLimiter),
-- operation for operation in IEEE doubles, so that both decide alike: times
-- are whole µs since the Unix epoch (below 2^53, so exact), durations ns;
-- "Go:" comments quote the expression replicated.
--
-- KEYS[i]  limit i's state for the request's key (see the package doc)
-- ARGV[1]  the cost in units, at least 1
-- ARGV[2]  "" to read the clock with TIME (every stub then agrees); else
--          the instant to use, µs since the epoch (tests only)
-- ARGV[3+6(i-1)] .. ARGV[8+6(i-1)]  limit i: alg, a, b, c, d, ttl, with
--   alg 't' token-bucket    a rate (units/s), b burst, c ns per unit, d window ns
--   alg 'f' fixed-window    a window µs, b limit, c window ns
--   alg 's' sliding-window  a window µs, b limit, c window ns
--   alg 'l' sliding-window-log  a window ns, b limit
--   alg 'm' leaky-bucket meter  a ns per unit, b burst
--   alg 'h' leaky-bucket shaper a ns per unit, b burst, c max delay ns
--   ttl: the key's time to live in ms, set whenever the key is written
--
-- Returns {allowed, then for each limit: ok, wait, delay, remaining, reset}:
-- allowed 1 if every limit had room (and so all were charged); ok 1 if this
-- one had; wait the ns until it would have room (0 when ok); delay the ns a
-- shaper holds the request; remaining the units left after the decision;
-- reset the ns until the limit is whole again.
if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5: TIME in a writing script
local floor, ceil, fmod, max = math.floor, math.ceil, math.fmod, math.max
local cost = tonumber(ARGV[1])
local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
end

-- ceildur is Go's ceilDur: ns rounded up, 0 for ns <= 0.
local function ceildur(ns)
  if ns <= 0 then return 0 end
  return ceil(ns)
end

-- seconds is time.Duration(us µs).Seconds() as Go computes it.
local function seconds(us)
  local rem = fmod(us, 1000000)
  return (us - rem) / 1000000 + rem * 1000 / 1e9 -- Go: float64(sec) + float64(nsec)/1e9
end

local function num(v, default)
  v = tonumber(v)
  if v == nil then return default end
  return v
end

local function expire(s)
  redis.call('PEXPIRE', s.key, s.ttl)
end

-- token-bucket: a hash {tk = tokens (%.17g), ls = when they were counted
-- (µs)}, x/time/rate's Limiter state. A missing key is a full bucket.
local tb = {}
function tb.load(s)
  local v = redis.call('HMGET', s.key, 'tk', 'ls')
  s.tokens, s.last = tonumber(v[1]), tonumber(v[2])
  if s.tokens == nil or s.last == nil then s.tokens, s.last = s.b, now end
end
function tb.avail(s) -- Go: lim.advance(t)
  local last = s.last
  if now < last then last = now end
  local tokens = s.tokens + seconds(now - last) * s.a
  if tokens > s.b then tokens = s.b end
  return tokens
end
function tb.check(s)
  if cost > s.b then return false, s.d, 0 end
  local tokens = tb.avail(s)
  if tokens >= cost then return true, 0, 0 end
  return false, ceildur((cost - tokens) * s.c), 0
end
function tb.charge(s)
  s.tokens, s.last = tb.avail(s) - cost, now
  redis.call('HSET', s.key, 'tk', string.format('%.17g', s.tokens), 'ls', string.format('%.0f', now))
  expire(s)
end
function tb.report(s)
  local tokens = tb.avail(s)
  local rem = 0
  if tokens >= 1 then rem = floor(tokens) end -- Go: max(0, int(tokens))
  return rem, ceildur((s.b - tokens) * s.c)
end

-- fixed-window and sliding-window: a hash {w = window index, c = its
-- count, p = the previous window's}. A missing key is window 0, empty.
local win = {}
function win.load(s)
  local v = redis.call('HMGET', s.key, 'w', 'c', 'p')
  s.win, s.cur, s.prev = num(v[1], 0), num(v[2], 0), num(v[3], 0)
  win.roll(s)
end
function win.roll(s) -- Go: roll
  local w = (now - fmod(now, s.a)) / s.a
  if w == s.win then
  elseif w == s.win + 1 then
    s.win, s.prev, s.cur, s.dirty = w, s.cur, 0, true
  elseif w > s.win then
    s.win, s.prev, s.cur, s.dirty = w, 0, 0, true
  end
  s.elapsed = (now - w * s.a) * 1000
end
function win.save(s)
  redis.call('HSET', s.key, 'w', string.format('%.0f', s.win), 'c', s.cur, 'p', s.prev)
  expire(s)
end
function win.charge(s)
  s.cur = s.cur + cost
  win.save(s)
  s.dirty = false
end

local fw = {load = win.load, charge = win.charge}
function fw.check(s)
  if s.cur + cost <= s.b then return true, 0, 0 end
  return false, s.c - s.elapsed, 0
end
function fw.report(s)
  if s.dirty then win.save(s) end -- the roll, even when nothing was charged
  return max(0, s.b - s.cur), s.c - s.elapsed
end

local sw = {load = win.load, charge = win.charge}
function sw.check(s) -- Go: checkSliding
  local per = s.c
  local frac = s.elapsed / per
  local est = s.prev * (1 - frac) + s.cur
  local limit = s.b
  if est + cost <= limit then return true, 0, 0 end
  if cost > s.b then return false, s.c, 0 end
  local wait
  if s.cur + cost <= limit and s.prev > 0 then
    local need = 1 - (limit - s.cur - cost) / s.prev
    wait = (need - frac) * per
  else
    wait = (1 - frac) * per
    if s.cur > 0 then
      wait = wait + max(0, 1 - (limit - cost) / s.cur) * per
    end
  end
  return false, ceil(max(wait, 1)), 0
end
function sw.report(s)
  if s.dirty then win.save(s) end
  local est = s.prev * (1 - s.elapsed / s.c) + s.cur
  return max(0, floor(s.b - est)), s.c - s.elapsed
end

-- sliding-window-log: a list of arrival instants (µs), oldest first, one
-- per unit. Entries that left the window are dropped at every call.
local lg = {}
function lg.load(s) -- Go: trim
  while true do
    local head = redis.call('LRANGE', s.key, 0, 31)
    local k = 0
    for j = 1, #head do
      if (now - tonumber(head[j])) * 1000 >= s.a then k = j else break end
    end
    if k > 0 then redis.call('LTRIM', s.key, k, -1) end
    if k < 32 then break end
  end
  s.len = redis.call('LLEN', s.key)
end
function lg.check(s)
  if s.len + cost <= s.b then return true, 0, 0 end
  if cost > s.b then return false, s.a, 0 end
  local leave = tonumber(redis.call('LINDEX', s.key, s.len + cost - s.b - 1))
  return false, (leave - now) * 1000 + s.a, 0 -- Go: leave + int64(l.per) - ns
end
function lg.charge(s)
  local at = string.format('%.0f', now)
  local batch = {}
  for j = 1, math.min(cost, 512) do batch[j] = at end
  local left = cost
  while left > 0 do
    local k = math.min(left, 512)
    redis.call('RPUSH', s.key, unpack(batch, 1, k))
    left = left - k
  end
  s.len = s.len + cost
  expire(s)
end
function lg.report(s)
  local reset = 0
  if s.len > 0 then
    reset = (tonumber(redis.call('LINDEX', s.key, -1)) - now) * 1000 + s.a
  end
  return max(0, s.b - s.len), reset
end

-- leaky-bucket: a hash {tu, tf}: the instant the queue is empty again, as
-- µs (tu) and the ns beyond them (tf, 0-999). A missing key is an empty
-- queue.
local lk = {}
function lk.load(s)
  local v = redis.call('HMGET', s.key, 'tu', 'tf')
  s.tu, s.tf = num(v[1], 0), num(v[2], 0)
end
function lk.busy(s) -- the queue empties after now
  return s.tu > now or (s.tu == now and s.tf > 0)
end
function lk.base(s) -- Go: max(st.tat, ns)
  if lk.busy(s) then return s.tu, s.tf end
  return now, 0
end
function lk.check(s)
  local bu, bf = lk.base(s)
  local nxt = ((bu - now) * 1000 + bf) + cost * s.a -- Go: float64(tat-ns) + float64(cost)*l.perUnit()
  local capacity = s.b * s.a
  if s.alg == 'm' then
    if nxt <= capacity + 0.5 then return true, 0, 0 end
    return false, ceildur(nxt - capacity), 0
  end
  local hold = ceildur(nxt - capacity)
  if hold <= 0 then return true, 0, 0 end
  if hold <= s.c then return true, 0, hold end
  return false, hold - s.c, 0
end
function lk.charge(s)
  local bu, bf = lk.base(s)
  local total = bf + floor(cost * s.a) -- Go: int64(float64(cost)*l.perUnit())
  s.tf = fmod(total, 1000)
  s.tu = bu + (total - s.tf) / 1000
  redis.call('HSET', s.key, 'tu', string.format('%.0f', s.tu), 'tf', string.format('%.0f', s.tf))
  expire(s)
end
function lk.report(s)
  local q = 0
  if lk.busy(s) then q = (s.tu - now) * 1000 + s.tf end
  local queued = q / s.a
  return max(0, floor(s.b - queued + 1e-9)), q
end

local algs = {t = tb, f = fw, s = sw, l = lg, m = lk, h = lk}

local layers = {}
local allowed = true
for i = 1, #KEYS do
  local o = 3 + 6 * (i - 1)
  local s = {key = KEYS[i], alg = ARGV[o], a = tonumber(ARGV[o + 1]), b = tonumber(ARGV[o + 2]),
    c = tonumber(ARGV[o + 3]), d = tonumber(ARGV[o + 4]), ttl = ARGV[o + 5]}
  s.impl = algs[s.alg]
  if s.impl == nil then return redis.error_reply('stubredis: unknown algorithm ' .. tostring(s.alg)) end
  s.impl.load(s)
  s.ok, s.wait, s.delay = s.impl.check(s)
  if not s.ok then allowed = false end
  layers[i] = s
end
local out = {allowed and 1 or 0}
for i = 1, #layers do
  local s = layers[i]
  if allowed then s.impl.charge(s) end
  local rem, reset = s.impl.report(s)
  local delay = 0
  if allowed then delay = s.delay end
  local n = #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = s.ok and 1 or 0, s.wait, delay, rem, reset
end
return out
