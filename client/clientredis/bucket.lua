-- A token bucket shared by every process of one application: clientredis's
-- only script, run with EVALSHA (EVAL on NOSCRIPT).
--
-- KEYS[1]  the bucket: a hash of tokens (a float, negative while permits are
--          reserved ahead) and ts (the instant they were counted, in µs of
--          the Redis server's clock, read with TIME so that processes on
--          different hosts agree).
-- ARGV[1]  rate, permits per second
-- ARGV[2]  burst, the bucket's capacity
-- ARGV[3]  op: "take" reserves one permit, "give" gives one back
-- ARGV[4]  take: the longest wait in µs (a longer one reserves nothing);
--          give: the reserved permit's instant in µs (past it, nothing is
--          given back: the permit's slot is gone)
--
-- Returns {done, wait, at}: take: 1 if reserved (0 if the wait would pass
-- ARGV[4]), the wait in µs, and the permit's instant (now + wait) in µs;
-- give: 1 if a permit went back.
--
-- The key expires twice the time the bucket takes to refill from the state
-- written, so an idle key goes away no sooner than it is full again.
if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5: TIME in a writing script
local key = KEYS[1]
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local op = ARGV[3]
local limit = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local s = redis.call('HMGET', key, 'tokens', 'ts')
local tokens, ts = tonumber(s[1]), tonumber(s[2])
if op == 'give' and (tokens == nil or ts == nil or now >= limit) then
  return {0, 0, now}
end
if tokens == nil or ts == nil then
  tokens, ts = burst, now
end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000000)
  ts = now
end
local wait = 0
if op == 'give' then
  tokens = math.min(burst, tokens + 1)
else
  tokens = tokens - 1
  if tokens < 0 then
    wait = math.ceil(-tokens * 1000000 / rate)
  end
  if wait > limit then
    return {0, wait, now + wait}
  end
end
redis.call('HSET', key, 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.0f', ts))
redis.call('PEXPIRE', key, math.max(1000, math.ceil(2000 * (burst - tokens) / rate)))
return {1, wait, now + wait}
