-- wrk-pipeline.lua: send N pipelined GET / requests per write (TechEmpower's
-- plaintext setting is 16). wrk counts every response.
--   wrk -s bench/wrk-pipeline.lua http://host:port/ -- 16
init = function(args)
	local n = tonumber(args[1]) or 16
	local r = {}
	for i = 1, n do
		r[i] = wrk.format(nil)
	end
	req = table.concat(r)
end

request = function()
	return req
end
