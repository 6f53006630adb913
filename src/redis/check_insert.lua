-- timebloom: check-and-insert (or check) of a group of keys of one shard.
-- The contract is documented in docs/distributed.md, "The Lua contract".
--
-- KEYS[1]    the client's result key (idempotent retries); the other keys
--            are the tiers' directory hashes and the sub-filter strings,
--            referenced by index from the plan. All share one hash tag.
-- ARGV[1]    'i' check-and-insert, 'c' check only
-- ARGV[2]    request id (a retry sends the same id and gets the stored answer)
-- ARGV[3]    plan: records separated by ';'
--              T <dir key index> <prune below window>
--              W <window> <n> <first key index> <first geometry> <r|w|rw> <expireat>
--            a W belongs to the T before it; its n sub-filters are the keys
--            first..first+n-1 with geometries first..first+n-1
-- ARGV[4]    probe count of each geometry, space separated
-- ARGV[5]    K: cells sent per key
-- ARGV[6]    number of keys
-- ARGV[7]    per key: one u32 block index per geometry, then K u16 cells
--            (little-endian)
-- ARGV[8]    seconds the result key is kept
-- Returns {0, '<dir index> <window> <n>'} when a directory knows more
-- sub-filters than the plan (the client refreshes and retries, nothing was
-- written), else {1, '<one char per key>|<fill reports>'}: '1' is new (i)
-- or present (c); a fill report '<dir index> <window> <sub> <bits set>'.
local mode = ARGV[1]
local req = ARGV[2]
if mode == 'i' then
  local done = redis.call('GET', KEYS[1])
  if done then
    local sep = string.find(done, '|', 1, true)
    if sep and string.sub(done, 1, sep - 1) == req then
      return {1, string.sub(done, sep + 1)}
    end
  end
end

local ks = {}
for k in string.gmatch(ARGV[4], '%d+') do ks[#ks + 1] = tonumber(k) end
local G = #ks
local K = tonumber(ARGV[5])
local nkeys = tonumber(ARGV[6])
local blob = ARGV[7]
local ttl = tonumber(ARGV[8])

local tiers = {}
local tier
for rec in string.gmatch(ARGV[3], '[^;]+') do
  local f = {}
  for w in string.gmatch(rec, '%S+') do f[#f + 1] = w end
  if f[1] == 'T' then
    tier = {dir = tonumber(f[2]), prune = tonumber(f[3]), windows = {}}
    tiers[#tiers + 1] = tier
  else
    tier.windows[#tier.windows + 1] = {
      w = f[2], n = tonumber(f[3]), key = tonumber(f[4]), geom = tonumber(f[5]),
      read = string.find(f[6], 'r', 1, true) ~= nil,
      write = string.find(f[6], 'w', 1, true) ~= nil,
      exp = f[7], added = 0,
    }
  end
end

-- Directories: how many sub-filters each window has in this shard.
for _, t in ipairs(tiers) do
  local flat = redis.call('HGETALL', KEYS[t.dir])
  local chain = {}
  local old = {}
  for i = 1, #flat, 2 do
    local f = flat[i]
    local w = string.match(f, '^(-?%d+)')
    if w and tonumber(w) < t.prune then
      old[#old + 1] = f
    elseif f == w then
      chain[w] = tonumber(flat[i + 1])
    end
  end
  t.old = old
  for _, win in ipairs(t.windows) do
    local have = chain[win.w] or 0
    if have > win.n then
      return {0, t.dir .. ' ' .. win.w .. ' ' .. have}
    end
    win.have = have
  end
end
if mode == 'i' then
  for _, t in ipairs(tiers) do
    if #t.old > 0 then redis.call('HDEL', KEYS[t.dir], unpack(t.old)) end
    for _, win in ipairs(t.windows) do
      if win.write and win.have < win.n then
        redis.call('HSET', KEYS[t.dir], win.w, win.n)
        win.have = win.n
      end
    end
  end
end

-- The keys.
local fmt = '<' .. string.rep('I4', G) .. string.rep('I2', K)
local pos = 1
local v, cb, cv, cache
local function block(ki, g)
  local b = cache[ki]
  if not b then
    local off = v[g] * 64
    b = redis.call('GETRANGE', KEYS[ki], off, off + 63)
    cache[ki] = b
  end
  return b
end
local function holds(ki, g)
  local b = block(ki, g)
  if #b == 0 then return false end
  for c = 1, ks[g] do
    local byte = string.byte(b, cb[c])
    if not byte or bit.band(byte, cv[c]) == 0 then return false end
  end
  return true
end

local out = {}
local written = {}
for j = 1, nkeys do
  v = {struct.unpack(fmt, blob, pos)}
  pos = v[G + K + 1]
  cb, cv, cache = {}, {}, {}
  for c = 1, K do
    local cell = v[G + c]
    cb[c] = math.floor(cell / 8) + 1
    cv[c] = 2 ^ (cell % 8)
  end
  local present = false
  for _, t in ipairs(tiers) do
    for _, win in ipairs(t.windows) do
      if win.read and not present then
        for i = win.have - 1, 0, -1 do
          if holds(win.key + i, win.geom + i) then
            present = true
            break
          end
        end
      end
    end
  end
  if mode == 'i' then
    for _, t in ipairs(tiers) do
      for _, win in ipairs(t.windows) do
        if win.write then
          local held = false
          for i = 0, win.n - 2 do
            if holds(win.key + i, win.geom + i) then
              held = true
              break
            end
          end
          if not held then
            local ki, g = win.key + win.n - 1, win.geom + win.n - 1
            local bytes = {string.byte(block(ki, g), 1, 64)}
            for x = #bytes + 1, 64 do bytes[x] = 0 end
            local newly = 0
            for c = 1, ks[g] do
              local x = cb[c]
              if bit.band(bytes[x], cv[c]) == 0 then
                bytes[x] = bytes[x] + cv[c]
                newly = newly + 1
              end
            end
            if newly > 0 then
              local s = string.char(unpack(bytes))
              redis.call('SETRANGE', KEYS[ki], v[g] * 64, s)
              cache[ki] = s
              win.added = win.added + newly
              written[ki] = win.exp
            end
          end
        end
      end
    end
  end
  if (mode == 'i') ~= present then out[j] = '1' else out[j] = '0' end
end

local fills = {}
if mode == 'i' then
  for _, t in ipairs(tiers) do
    for _, win in ipairs(t.windows) do
      if win.added > 0 then
        local sub = win.n - 1
        local f = redis.call('HINCRBY', KEYS[t.dir], win.w .. ':' .. sub, win.added)
        fills[#fills + 1] = t.dir .. ' ' .. win.w .. ' ' .. sub .. ' ' .. f
      end
    end
  end
  for ki, exp in pairs(written) do redis.call('EXPIREAT', KEYS[ki], exp) end
end
local res = table.concat(out) .. '|' .. table.concat(fills, ';')
if mode == 'i' then redis.call('SET', KEYS[1], req .. '|' .. res, 'EX', ttl) end
return {1, res}
