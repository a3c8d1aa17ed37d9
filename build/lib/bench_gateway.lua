-- wrk, build/bench gateway: request i carries the i-th Bearer token of $BENCH_TOKENS (one per line,
-- in turn) and X-Forwarded-For 10.x.y.z, the i-th of as many addresses as tokens (band-edge trusts
-- 127.0.0.1 as a proxy, so each caller counts as a client address of its own: one token from one
-- address would be over band-edge's fixed per-account and per-address limits on forwarded routes
-- after its first 60 requests). nginx and h2o ignore both fields.
-- $BENCH_METHOD=POST: every request a POST of a small JSON body with an Idempotency-Key of its own
-- ("bench-<thread>-<n>"), so band-edge signs a fresh write assertion for each.
local tokens = {}
for line in io.lines(os.getenv("BENCH_TOKENS")) do tokens[#tokens + 1] = line end
local post = os.getenv("BENCH_METHOD") == "POST"
local body = '{"student":"stu_bench","present":true}'
local prepared = {}
local thread_id = 0
local counter = 0
local i = 0

local function fields(n)
  return {
    ["Authorization"] = "Bearer " .. tokens[n],
    ["X-Forwarded-For"] = string.format("10.%d.%d.%d", math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256),
  }
end

local next_id = 0
setup = function(thread)
  next_id = next_id + 1
  thread:set("thread_id", next_id)
end

init = function()
  if not post then
    -- Formatted once: the turn then costs wrk as little per request as a fixed -H would.
    for n = 1, #tokens do prepared[n] = wrk.format("GET", nil, fields(n)) end
  end
end

request = function()
  i = i % #tokens + 1
  if not post then return prepared[i] end
  counter = counter + 1
  local f = fields(i)
  f["Content-Type"] = "application/json"
  f["Idempotency-Key"] = string.format('"bench-%d-%d"', thread_id, counter)
  return wrk.format("POST", nil, f, body)
end
