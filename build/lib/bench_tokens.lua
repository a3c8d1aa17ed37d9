-- wrk: each request carries the next of the Bearer tokens in the file $BENCH_TOKENS (one per line),
-- so the server reads as many different sessions as there are tokens.
local tokens = {}
for line in io.lines(os.getenv("BENCH_TOKENS")) do tokens[#tokens + 1] = line end
local i = 0
request = function()
  i = i % #tokens + 1
  return wrk.format("GET", nil, { ["Authorization"] = "Bearer " .. tokens[i] })
end
