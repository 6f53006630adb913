-- timebloom: check-and-insert (or check) of a group of keys of one shard.
-- The contract is documented in docs/distributed.md, "The Lua contract".
--
-- KEYS[1]    the client's result key (idempotent retries); the other keys
--            are the tiers' directory hashes and the sub-filter strings,
--            referenced by index from the plan. All share one hash tag.
-- ARGV[1]    'i' check-and-insert, 'd' check-and-insert of the keys absent
--            from every window read (a key found is not written), 'c'
--            check only
-- ARGV[2]    request id (a retry sends the same id and gets the stored answer)
-- ARGV[3]    plan: records separated by ';'
--              T <dir key index> <prune below window> <seen>
--              W <window> <n> <first key index> <first geometry> <r|w|rw> <expireat>
--            <seen> is 1 when the client has seen that directory exist
--            (a directory is never deleted, so its absence means the node
--            lost its keys); a W belongs to the T before it; the client names n sub-filters,
--            keys first..first+n-1 with geometries first..first+n-1 (for a
--            window it writes, one more than it has seen: room to grow)
-- ARGV[4]    probe count of each geometry, space separated
-- ARGV[5]    K: cells sent per key
-- ARGV[6]    number of keys
-- ARGV[7]    per key: one u32 block index per geometry (little-endian),
--            then per cell two bytes: its byte in the block (1..64) and
--            its bit in that byte (1, 2, 4 .. 128)
-- ARGV[8]    seconds the result key is kept
-- ARGV[9]    per geometry: the bits set in one shard at which a tail is full
-- ARGV[10]   per geometry: the length in bytes of one shard's string
-- ARGV[11]   the engine's id (its hash seed, hex): a directory written by
--            another engine under the same prefix is refused
-- Returns {0, '<dir index> <window> <n>'} when a directory knows more
-- sub-filters than the plan names (the client learns and retries; nothing
-- was written), {2, '<dir index>'} when a directory the client has seen
-- is gone (nothing was written), else {1, '<one char per key>|<chain
-- reports>', '<dir indices>'}: '1' is new (i) or present (c); a chain
-- report '<dir index> <window> <n>' gives the chain length in this shard of
-- every window written; the dir indices are the directories that exist
-- after the call.
local mode = ARGV[1]
local req = ARGV[2]
-- Whether this call writes (the result key, windows, chains).
local writing = mode == 'i' or mode == 'd'
if writing then
  local done = redis.call('GET', KEYS[1])
  if done then
    local sep = string.find(done, '|', 1, true)
    if sep and string.sub(done, 1, sep - 1) == req then
      -- Written again as it is: from Redis 7.2 a connection's `WAIT`
      -- covers the replication stream up to its last command that
      -- propagated a write (before 7.2, up to its last command), so a
      -- resend on a new connection that only read its answer would be
      -- confirmed at once, before the replicas have the first send's
      -- writes. (`pcall`: a server out of memory still gives the answer.)
      redis.pcall('SET', KEYS[1], done, 'KEEPTTL')
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
local full = {}
for x in string.gmatch(ARGV[9], '%d+') do full[#full + 1] = tonumber(x) end
local len = {}
for x in string.gmatch(ARGV[10], '%d+') do len[#len + 1] = tonumber(x) end
local written = {}
-- Strings read whole by this call (see below), their changed blocks.
local whole, changed, changed_g = {}, {}, {}
-- A sub-filter new in this shard is made at its full length at once (grown
-- by writes at random offsets, Redis would allocate up to twice its length),
-- never over an existing string.
local function create(ki, g, exp)
  local n = len[g]
  if n <= 4194304 then
    redis.call('SET', KEYS[ki], string.rep('\0', n), 'NX')
  elseif redis.call('EXISTS', KEYS[ki]) == 0 then
    redis.call('SETRANGE', KEYS[ki], n - 1, '\0')
  end
  written[ki] = exp
  whole[ki] = nil
end

local tiers = {}
local tier
for rec in string.gmatch(ARGV[3], '[^;]+') do
  local f = {}
  for w in string.gmatch(rec, '%S+') do f[#f + 1] = w end
  if f[1] == 'T' then
    tier = {dir = tonumber(f[2]), prune = tonumber(f[3]), seen = f[4] == '1', windows = {}}
    tiers[#tiers + 1] = tier
  else
    tier.windows[#tier.windows + 1] = {
      w = f[2], n = tonumber(f[3]), key = tonumber(f[4]), geom = tonumber(f[5]),
      read = string.find(f[6], 'r', 1, true) ~= nil,
      write = string.find(f[6], 'w', 1, true) ~= nil,
      exp = f[7], fill = {}, dirty = false,
    }
  end
end

local id = ARGV[11]
local now = tonumber(redis.call('TIME')[1])
-- Directories: how many sub-filters each window has in this shard, the
-- bits set in each of them (fields '<window>' and '<window>:<i>'), when
-- Redis drops the window's strings ('e<window>') and the engine that
-- writes them ('id').
-- A key of the prefix changed to another type behind the engine's back
-- is an error naming it (a plain WRONGTYPE names no key).
local function wrongtype(ki, r, what)
  return redis.error_reply('timebloom: ' .. KEYS[ki] .. ' is not ' .. what .. ' (' ..
    tostring(r.err) .. '): it was overwritten by something other than timebloom')
end
for _, t in ipairs(tiers) do
  local flat = redis.pcall('HGETALL', KEYS[t.dir])
  if type(flat) == 'table' and flat.err then return wrongtype(t.dir, flat, 'a hash') end
  t.exists = #flat > 0
  local chain = {}
  local fills = {}
  local exps = {}
  local below = {}
  for i = 1, #flat, 2 do
    local f, v = flat[i], flat[i + 1]
    if f == 'id' then
      t.id = true
      if v ~= id then
        return redis.error_reply('timebloom: ' .. KEYS[t.dir] .. ' belongs to engine ' .. v ..
          ', this client opened engine ' .. id .. ': the engine under this prefix was ' ..
          'created again (its config hash was lost: a server restarted empty, a flush, ' ..
          'an eviction) while clients of the old one ran; stop every client, then ' ..
          'delete the prefix\'s keys or use another prefix')
      end
    else
      local e = string.match(f, '^e(-?%d+)$')
      local w = e or string.match(f, '^(-?%d+)')
      if w and tonumber(w) < t.prune then below[#below + 1] = {f, w} end
      if e then
        exps[e] = tonumber(v)
      elseif f == w then
        chain[w] = tonumber(v)
      else
        fills[f] = tonumber(v)
      end
    end
  end
  -- The fields of a window below the client's oldest live one minus one
  -- go once Redis has dropped its strings: a client whose clock is ahead
  -- must not take from the others a window that is live by their clocks.
  -- (A window written before its expiry was recorded goes by the window
  -- index alone.)
  local old = {}
  for _, x in ipairs(below) do
    local e = exps[x[2]]
    if e == nil or e < now then old[#old + 1] = x[1] end
  end
  t.old = old
  t.exps = exps
  for _, win in ipairs(t.windows) do
    local have = chain[win.w] or 0
    if have > win.n then
      return {0, t.dir .. ' ' .. win.w .. ' ' .. have}
    end
    -- The strings the call names: one the directory lists must exist
    -- (Redis evicts under a maxmemory-policy other than noeviction, and
    -- its keys would then read as absent); one it does not list is read
    -- too (a directory evicted or deleted while its strings remain). A
    -- string is made at its full length and keeps it: one of another
    -- length (0: missing) was overwritten, and its bits are gone.
    local function size(i)
      local ki = win.key + i
      local n = redis.pcall('STRLEN', KEYS[ki])
      if type(n) == 'table' then return nil, wrongtype(ki, n, 'a string') end
      local want = len[win.geom + i]
      if n ~= 0 and n ~= want then
        return nil, redis.error_reply('timebloom: ' .. KEYS[ki] .. ' is ' .. n ..
          ' bytes long, not the ' .. want .. ' of its sub-filter: it was overwritten by ' ..
          'something other than timebloom; the keys inserted into it are lost')
      end
      return n
    end
    local top = 0
    for i = win.n - 1, 0, -1 do
      local n, err = size(i)
      if err then return err end
      if n > 0 then
        top = i + 1
        break
      end
    end
    for i = 0, math.max(have, top) - 1 do
      local n = 1
      if i < top - 1 then
        local err
        n, err = size(i)
        if err then return err end
      end
      if i >= top or n == 0 then
        return redis.error_reply('timebloom: ' .. KEYS[win.key + i] .. ' is gone though ' ..
          KEYS[t.dir] .. ' lists it: Redis evicted it (a maxmemory-policy other than ' ..
          'noeviction) or it was deleted or expired (a client clock more than an hour ' ..
          'behind the server\'s); the keys inserted into it are lost')
      end
    end
    for i = 0, have - 1 do win.fill[i] = fills[win.w .. ':' .. i] or 0 end
    if writing and win.write then
      for i = have, top - 1 do
        win.fill[i] = redis.call('BITCOUNT', KEYS[win.key + i])
        win.dirty = true
      end
    end
    win.have = math.max(have, top)
    if top > 0 then t.strings = true end
  end
  -- A directory keeps its 'id' field for good once written: one the
  -- client has seen and Redis no longer has, with none of the strings the
  -- call names, went with everything else of this node (restarted empty,
  -- flushed, an empty replica promoted), and every key of the shard would
  -- read as absent. (A directory deleted alone leaves its strings, which
  -- are read as above.)
  if t.seen and not t.exists and not t.strings then return {2, tostring(t.dir)} end
end
if writing then
  for _, t in ipairs(tiers) do
    if #t.old > 0 then
      redis.call('HDEL', KEYS[t.dir], unpack(t.old))
      -- Never emptied (a directory written before it named its engine).
      if not t.id then redis.call('HSET', KEYS[t.dir], 'id', id) end
    end
    for _, win in ipairs(t.windows) do
      -- A written window's directory exists after the call (HSET below).
      if win.write then t.exists = true end
      if win.write and win.have == 0 then
        win.have = 1
        win.fill[0] = 0
        win.dirty = true
        create(win.key, win.geom, win.exp)
      end
    end
  end
end

-- The keys. Each key's record is unpacked into a table with one call, and
-- a cell is tested with arithmetic (bit m of byte x is set when x % 2m >=
-- m) rather than with bit.band: in Redis's Lua 5.1 a call into C costs
-- more than the few instructions it replaces, and a call per cell was most
-- of the script's time. A block this call may write is unpacked into a
-- table of its 64 bytes once per key (stamp = the key's number) and changed
-- in place; a block only read is tested byte by byte, stopping at the first
-- empty cell.
local rec = 4 * G + 2 * K
if rec > 7000 then
  return redis.error_reply('timebloom: a key record of ' .. rec .. ' bytes is longer than 7000')
end
local cells = 4 * G + 1
local r, j = nil, 0
local cache, stamp = {}, {}
local byte = string.byte
-- The byte offset of the key's block in a string of geometry g.
local function offset(g)
  local o = 4 * g
  return (r[o - 3] + r[o - 2] * 256 + r[o - 1] * 65536 + r[o] * 16777216) * 64
end
-- A string that this call's keys cover densely (at most 4 blocks per key,
-- and at most 1 MiB) is read whole with one GET and written back whole with
-- one SET at the end: two commands instead of two per key. Others are read
-- and written block by block (GETRANGE, SETRANGE).
local dense = nkeys * 256
if dense > 1048576 then dense = 1048576 end
local function whole_of(ki, g)
  local S = whole[ki]
  if S == nil then
    S = false
    if len[g] <= dense then S = redis.call('GET', KEYS[ki]) or '' end
    whole[ki] = S
  end
  return S
end
-- The key's block of string ki as a table of 64 bytes (a block changed
-- earlier in this call is that same table; a missing string reads zeros).
local function block(ki, g)
  if stamp[ki] == j then return cache[ki] end
  local off = offset(g)
  local t
  local S = whole_of(ki, g)
  if S then
    local c = changed[ki]
    t = c and c[off]
    if not t then t = {byte(S, off + 1, off + 64)} end
  else
    t = {byte(redis.call('GETRANGE', KEYS[ki], off, off + 63), 1, 64)}
  end
  if t[64] == nil then
    for x = 1, 64 do
      if t[x] == nil then t[x] = 0 end
    end
  end
  cache[ki] = t
  stamp[ki] = j
  return t
end
-- Whether string ki holds every cell of the key. rw: the string may be
-- written by this call (its block is kept as a table for set below).
local function holds(ki, g, rw)
  local p = cells
  -- changed[ki] exists only for a string read whole and written here.
  if rw or changed[ki] then
    local t = block(ki, g)
    for _ = 1, ks[g] do
      local bv = r[p + 1]
      if t[r[p]] % (bv + bv) < bv then return false end
      p = p + 2
    end
    return true
  end
  local S = whole_of(ki, g)
  local b, off = S, offset(g)
  if not S then
    b = redis.call('GETRANGE', KEYS[ki], off, off + 63)
    off = 0
  end
  for _ = 1, ks[g] do
    local x = byte(b, off + r[p])
    local bv = r[p + 1]
    if not x or x % (bv + bv) < bv then return false end
    p = p + 2
  end
  return true
end
-- Sets the key's cells in the block of string ki; returns how many were new.
local function set(ki, g)
  local t = block(ki, g)
  local newly = 0
  local p = cells
  for _ = 1, ks[g] do
    local bi, bv = r[p], r[p + 1]
    local x = t[bi]
    if x % (bv + bv) < bv then
      t[bi] = x + bv
      newly = newly + 1
    end
    p = p + 2
  end
  if newly > 0 then
    local off = offset(g)
    if whole_of(ki, g) then
      local c = changed[ki]
      if not c then
        c = {}
        changed[ki] = c
        changed_g[ki] = g
      end
      c[off] = t
    else
      redis.call('SETRANGE', KEYS[ki], off, string.char(unpack(t)))
    end
  end
  return newly
end

local out = {}
local reads, writes = {}, {}
for _, t in ipairs(tiers) do
  for _, win in ipairs(t.windows) do
    win.rw = writing and win.write
    if win.read then reads[#reads + 1] = win end
    if win.write and writing then writes[#writes + 1] = win end
  end
end
for jj = 1, nkeys do
  j = jj
  local base = (jj - 1) * rec + 1
  r = {byte(blob, base, base + rec - 1)}
  local present = false
  for q = 1, #reads do
    local win = reads[q]
    for i = win.have - 1, 0, -1 do
      if holds(win.key + i, win.geom + i, win.rw) then
        present = true
        break
      end
    end
    if present then break end
  end
  -- Mode 'd' writes only the keys no window read holds.
  local todo = #writes
  if mode == 'd' and present then todo = 0 end
  for w = 1, todo do
    local win = writes[w]
    local held = false
    for i = 0, win.have - 2 do
      if holds(win.key + i, win.geom + i, true) then
        held = true
        break
      end
    end
    if not held then
      -- A full tail gives way to the next sub-filter when the client
      -- named one (growth, decided here, atomically).
      local tail = win.have - 1
      if win.fill[tail] >= full[win.geom + tail] and win.have < win.n then
        win.have = win.have + 1
        tail = tail + 1
        win.fill[tail] = 0
        win.dirty = true
        create(win.key + tail, win.geom + tail, win.exp)
      end
      local ki = win.key + tail
      local newly = set(ki, win.geom + tail)
      if newly > 0 then
        win.fill[tail] = win.fill[tail] + newly
        win.dirty = true
        written[ki] = win.exp
      end
    end
  end
  if writing ~= present then out[jj] = '1' else out[jj] = '0' end
end

local chains = {}
if writing then
  for _, t in ipairs(tiers) do
    for _, win in ipairs(t.windows) do
      if win.write then
        if win.dirty then
          local at = tonumber(win.exp)
          if at < now + 3600 then at = now + 3600 end
          local e = t.exps[win.w]
          if e and e > at then at = e end
          local f = {win.w, win.have, 'e' .. win.w, at, 'id', id}
          for i = 0, win.have - 1 do
            f[#f + 1] = win.w .. ':' .. i
            f[#f + 1] = win.fill[i]
          end
          redis.call('HSET', KEYS[t.dir], unpack(f))
        end
        chains[#chains + 1] = t.dir .. ' ' .. win.w .. ' ' .. win.have
      end
    end
  end
  for ki, c in pairs(changed) do
    local S = whole[ki]
    local n = len[changed_g[ki]]
    if #S < n then S = S .. string.rep('\0', n - #S) end
    local offs = {}
    for off in pairs(c) do offs[#offs + 1] = off end
    table.sort(offs)
    local parts, prev = {}, 0
    for _, off in ipairs(offs) do
      parts[#parts + 1] = string.sub(S, prev + 1, off)
      parts[#parts + 1] = string.char(unpack(c[off]))
      prev = off + 64
    end
    parts[#parts + 1] = string.sub(S, prev + 1)
    redis.call('SET', KEYS[ki], table.concat(parts), 'KEEPTTL')
  end
  -- Never earlier than an hour past the server's time: a client whose
  -- clock lags (or a test clock in the past) must not make Redis drop a
  -- window it is still writing.
  local floor = now + 3600
  for ki, exp in pairs(written) do
    local at = tonumber(exp)
    if at < floor then at = floor end
    redis.call('EXPIREAT', KEYS[ki], at)
  end
end
local res = table.concat(out) .. '|' .. table.concat(chains, ';')
if writing then redis.call('SET', KEYS[1], req .. '|' .. res, 'EX', ttl) end
local exist = {}
for _, t in ipairs(tiers) do
  if t.exists then exist[#exist + 1] = t.dir end
end
return {1, res, table.concat(exist, ' ')}
