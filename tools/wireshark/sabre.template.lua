--@@HEADER@@
--
-- Wireshark / tshark dissector for sabre's RDMA-over-UDP framing (mechanism M5): the
-- reliability header (udpHdr) and SACK list, the engine envelope of every frame packed in a DATA
-- datagram (udpEnv, udpEnvSeg), the CRC32C trailer (checked), and each DDP segment handed to
-- Wireshark's own iWARP dissector (iwarp_ddp_rdmap), which decodes DDP and RDMAP as on TCP.
--
-- Use:   tshark -X lua_script:sabre.lua -r capture.pcap
--        (or copy to ~/.local/lib/wireshark/plugins/). Datagrams are recognised by a heuristic
--        (version, type, context ids, and a correct CRC32C); "Decode As… sabre" on a UDP port
--        forces it.
--
-- Every layout comes from the SPEC table below, generated from src/wire/spec.ts: fields added
-- to a layout there show up here after `npm run gen:wireshark` without touching this logic.

--@@SPEC@@

local B = bit32 or bit

local sabre = Proto("sabre", "sabre RDMA over UDP")
local iwarp = Dissector.get("iwarp_ddp_rdmap")

-- ProtoFields: one per layout field ("sabre.<layout>.<field>") and per named bit inside it.
local F = {}
local fields = {}
local function pf(abbrev, name, size, mask, vals, desc)
  -- Bit fields and bare bytes in hex; numbers and named values in decimal.
  local base_ = base.DEC
  if mask or (size <= 1 and not vals) then base_ = base.HEX end
  local f
  if size == 1 then f = ProtoField.uint8(abbrev, name, base_, vals, mask, desc)
  elseif size == 2 then f = ProtoField.uint16(abbrev, name, base_, vals, mask, desc)
  elseif size == 4 then f = ProtoField.uint32(abbrev, name, base_, vals, mask, desc)
  elseif size == 8 then f = ProtoField.uint64(abbrev, name, base.DEC, nil, nil, desc)
  else f = ProtoField.bytes(abbrev, name, base.NONE, desc) end
  fields[#fields + 1] = f
  return f
end

local function invert(t)
  local r = {}
  for k, v in pairs(t) do r[v] = k end
  return r
end
local TYPE_NAME = invert(SPEC.enums.UdpType)
local ENV_KIND_NAME = invert(SPEC.enums.UdpEnvKind)

-- Value names where the spec gives them.
local VALS = {
  ["udpHdr.verType.Type"] = TYPE_NAME,
  ["udpEnv.kind"] = ENV_KIND_NAME,
}

for _, lname in ipairs(SPEC.order) do
  local l = SPEC.layouts[lname]
  for _, fd in ipairs(l.fields) do
    local key = lname .. "." .. fd.name
    local abbrev = "sabre." .. key
    -- Short names in the tree (the spec's field names); the spec's meaning as each field's description.
    if fd.bits and #fd.bits > 0 then
      F[key] = pf(abbrev, fd.name, fd.size, nil, nil, fd.meaning)
      for _, bt in ipairs(fd.bits) do
        F[key .. "." .. bt.name] = pf(abbrev .. "." .. bt.name, bt.name, fd.size, bt.mask, VALS[key .. "." .. bt.name], bt.meaning)
      end
    else
      F[key] = pf(abbrev, fd.name, fd.size, nil, VALS[key], fd.meaning)
    end
  end
end
F.type = pf("sabre.type", "Datagram type", 1, nil, TYPE_NAME)
F.crc = pf("sabre.crc", "CRC32C trailer (least-significant byte first)", 4, nil, nil)
F.crc_ok = ProtoField.bool("sabre.crc_ok", "CRC32C correct")
fields[#fields + 1] = F.crc_ok
F.xxh3 = pf("sabre.xxh3", "XXH3-64 trailer (least-significant byte first; not checked here)", 8, nil, nil)
F.integrity = ProtoField.string("sabre.integrity", "Trailer")
fields[#fields + 1] = F.integrity
F.frames = pf("sabre.frames", "Frames in this datagram", 2, nil, nil)
local OPCODE_NAME = {}
for code, o in pairs(SPEC.opcodes) do OPCODE_NAME[code] = o.name end
F.opcode = pf("sabre.rdmap_opcode", "RDMAP opcode (sabre's name)", 1, nil, OPCODE_NAME)
F.ext = ProtoField.string("sabre.extension", "sabre RDMAP extension")
fields[#fields + 1] = F.ext
sabre.fields = fields

local E_BAD_CRC = ProtoExpert.new("sabre.crc_bad", "CRC32C trailer does not match the datagram", expert.group.CHECKSUM, expert.severity.ERROR)
local E_MALFORMED = ProtoExpert.new("sabre.malformed", "Frame runs past the datagram", expert.group.MALFORMED, expert.severity.ERROR)
sabre.experts = { E_BAD_CRC, E_MALFORMED }

sabre.prefs.check_crc = Pref.bool("Check the CRC32C trailer", true, "Compute the CRC32C of every datagram (slow on large captures)")
sabre.prefs.heuristic_crc = Pref.bool("Heuristic requires a correct CRC32C", true, "Only claim UDP datagrams whose CRC32C trailer is correct")

-- CRC32C (Castagnoli, reflected polynomial 0x82F63B78), one table, byte at a time.
local CRC_TABLE = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if B.band(c, 1) ~= 0 then c = B.bxor(B.rshift(c, 1), 0x82F63B78) else c = B.rshift(c, 1) end
  end
  CRC_TABLE[i] = c
end

local function crc32c(tvb, off, len)
  local crc = 0xFFFFFFFF
  local bytes = tvb:bytes(off, len)
  for i = 0, len - 1 do
    crc = B.bxor(CRC_TABLE[B.band(B.bxor(crc, bytes:get_index(i)), 0xFF)], B.rshift(crc, 8))
  end
  return B.bxor(crc, 0xFFFFFFFF)
end

-- The trailer flags.Trailer names (docs/integrity.md): its value (CRC32C as a number, XXH3-64
-- as a UInt64, none: nil), where it starts, and the kind (nil: reserved kind 3).
local function trailer(tvb)
  local flags = tvb(1, 1):uint()
  local kind = B.rshift(B.band(flags, SPEC.const.UDP_TRAILER_MASK), SPEC.const.UDP_TRAILER_SHIFT)
  local tl = SPEC.const.UDP_TRAILER_LENS[kind]
  if tl == nil or tvb:len() < tl then return nil, tvb:len(), nil end
  local at = tvb:len() - tl
  if kind == 0 then
    if SPEC.const.UDP_CRC_LITTLE_ENDIAN then return tvb(at, 4):le_uint(), at, kind end
    return tvb(at, 4):uint(), at, kind
  end
  if kind == 1 then return tvb(at, 8):le_uint64(), at, kind end
  return nil, at, kind
end

local function uint(tvb, off, size)
  if size == 8 then return tvb(off, 8):uint64() end
  return tvb(off, size):uint()
end

-- Add every field of layout `lname` at `off` under `tree`; returns the values by field name.
local function add_layout(tree, tvb, off, lname)
  local l = SPEC.layouts[lname]
  local v = {}
  for _, fd in ipairs(l.fields) do
    local r = tvb(off + fd.offset, fd.size)
    local key = lname .. "." .. fd.name
    if fd.size <= 8 and fd.size ~= 3 then v[fd.name] = uint(tvb, off + fd.offset, fd.size) end
    if fd.bits and #fd.bits > 0 then
      local st = tree:add(F[key], r)
      for _, bt in ipairs(fd.bits) do st:add(F[key .. "." .. bt.name], r) end
    else
      tree:add(F[key], r)
    end
  end
  return v
end

local HDR = SPEC.layouts.udpHdr
local SACK = SPEC.layouts.udpSack
local COOKIE = SPEC.layouts.udpCookie
local TOKEN = SPEC.layouts.udpToken
local INTEG = SPEC.layouts.udpInteg
local SACK_BLOCK = SPEC.layouts.udpSackBlock
local ENV = SPEC.layouts.udpEnv
local ENV_SEG = SPEC.layouts.udpEnvSeg
local C = SPEC.const

local function field(l, name)
  for _, fd in ipairs(l.fields) do if fd.name == name then return fd end end
  error("sabre.lua: the spec has no field " .. l.name .. "." .. name .. " (regenerate the dissector)")
end
local F_VERTYPE = field(HDR, "verType")
local F_FLAGS = field(HDR, "flags")
local F_SRCCTX = field(HDR, "srcCtx")
local F_DSTQPN = field(HDR, "dstQpn")
local F_SRCQPN = field(HDR, "srcQpn")
local F_SACK_COUNT = field(SACK, "count")
local F_ENV_KIND = field(ENV, "kind")
local F_ENV_LEN = field(ENV, "len")

local function header_ok(tvb)
  local len = tvb:len()
  if len < HDR.size then return false end
  local _, _, kind = trailer(tvb)
  if kind == nil then return false end
  local vt = tvb(F_VERTYPE.offset, 1):uint()
  if B.rshift(vt, C.UDP_VER_SHIFT) ~= C.UDP_VERSION then return false end
  local t = B.band(vt, C.UDP_TYPE_MASK)
  if not TYPE_NAME[t] then return false end
  if tvb(F_SRCCTX.offset, 4):uint() == 0 then return false end
  return true
end

function sabre.dissector(tvb, pinfo, tree)
  if not header_ok(tvb) then return 0 end
  local len = tvb:len()
  local vt = tvb(F_VERTYPE.offset, 1):uint()
  local t = B.band(vt, C.UDP_TYPE_MASK)
  local flags = tvb(F_FLAGS.offset, 1):uint()
  local crc, crcAt = trailer(tvb)

  local root = tree:add(sabre, tvb(), "sabre RDMA over UDP")
  root:add(F.type, tvb(F_VERTYPE.offset, 1), t)
  local hv = add_layout(root:add(sabre, tvb(0, HDR.size), "Reliability header (udpHdr)"), tvb, 0, "udpHdr")
  local off = HDR.size
  -- The handshake blocks come first (cookie, token, integrity wish), then the SACK list (docs/wire.md).
  if B.band(flags, SPEC.enums.UdpFlag.Cookie) ~= 0 and off + COOKIE.size <= crcAt then
    add_layout(root:add(sabre, tvb(off, COOKIE.size), COOKIE.title), tvb, off, "udpCookie")
    off = off + COOKIE.size
  end
  if B.band(flags, SPEC.enums.UdpFlag.Token) ~= 0 and off + TOKEN.size <= crcAt then
    add_layout(root:add(sabre, tvb(off, TOKEN.size), TOKEN.title), tvb, off, "udpToken")
    off = off + TOKEN.size
  end
  if B.band(flags, SPEC.enums.UdpFlag.Integ) ~= 0 and off + INTEG.size <= crcAt then
    add_layout(root:add(sabre, tvb(off, INTEG.size), INTEG.title), tvb, off, "udpInteg")
    off = off + INTEG.size
  end
  if B.band(flags, SPEC.enums.UdpFlag.Sack) ~= 0 and off + SACK.size <= crcAt then
    local n = tvb(off + F_SACK_COUNT.offset, 1):uint()
    local st = root:add(sabre, tvb(off, math.min(SACK.size + n * SACK_BLOCK.size, crcAt - off)), SACK.title)
    add_layout(st, tvb, off, "udpSack")
    off = off + SACK.size
    for _ = 1, n do
      if off + SACK_BLOCK.size > crcAt then break end
      add_layout(st:add(sabre, tvb(off, SACK_BLOCK.size), SACK_BLOCK.title), tvb, off, "udpSackBlock")
      off = off + SACK_BLOCK.size
    end
  end

  local info = string.format("%s psn=%d ack=%d QP %d→%d", TYPE_NAME[t], hv.psn or 0, hv.ackPsn or 0, hv.srcQpn or 0, hv.dstQpn or 0)
  local nframes = 0
  local ops = {}
  if t == SPEC.enums.UdpType.Data then
    -- Frames packed back to back: udpEnv.len chains them; 0 means "to the end of the payload".
    while off + ENV.size <= crcAt do
      local kind = tvb(off + F_ENV_KIND.offset, 1):uint()
      local flen = tvb(off + F_ENV_LEN.offset, 2):uint()
      local fend = (flen ~= 0) and (off + flen) or crcAt
      local ft = root:add(sabre, tvb(off, math.max(0, math.min(fend, crcAt) - off)), "Frame: " .. (ENV_KIND_NAME[kind] or ("kind " .. kind)))
      if fend > crcAt or fend < off + ENV.size then
        ft:add_proto_expert_info(E_MALFORMED)
        break
      end
      nframes = nframes + 1
      add_layout(ft, tvb, off, "udpEnv")
      if kind == SPEC.enums.UdpEnvKind.Seg and off + ENV.size + ENV_SEG.size <= fend then
        add_layout(ft, tvb, off + ENV.size, "udpEnvSeg")
        local ddp = off + ENV.size + ENV_SEG.size
        if fend >= ddp + 2 then
          local op = B.band(tvb(ddp + 1, 1):uint(), C.RDMAP_OPCODE_MASK)
          ft:add(F.opcode, tvb(ddp + 1, 1), op)
          local o = SPEC.opcodes[op]
          if o and o.sabre then
            -- Opcodes 12-15 are sabre's (IANA: unassigned/reserved); Wireshark shows only the number.
            ft:add(F.ext, tvb(ddp, fend - ddp), o.name .. ": " .. o.payload)
          end
          ops[#ops + 1] = o and o.name or tostring(op)
        end
        if fend > ddp and iwarp then
          -- Wireshark's iWARP dissector takes the DDP segment (what an MPA FPDU's ULPDU holds).
          iwarp:call(tvb(ddp, fend - ddp):tvb(), pinfo, tree)
        end
      end
      off = fend
    end
  end
  root:add(F.frames, tvb(0, 0), nframes)

  local _, _, tkind = trailer(tvb)
  if tkind == 0 then
    local crcItem = root:add(F.crc, tvb(crcAt, C.UDP_CRC_LEN), crc)
    if sabre.prefs.check_crc then
      local ok = crc32c(tvb, 0, crcAt) == crc
      root:add(F.crc_ok, tvb(crcAt, C.UDP_CRC_LEN), ok)
      if not ok then crcItem:add_proto_expert_info(E_BAD_CRC) end
    end
  elseif tkind == 1 then
    root:add(F.xxh3, tvb(crcAt, 8))
  else
    root:add(F.integrity, tvb(0, 0), "none (integrity none: the UDP checksum only)")
  end
  pinfo.cols.protocol = (#ops > 0 and iwarp) and "sabre/iWARP" or "sabre"
  if #ops > 0 then info = info .. " " .. table.concat(ops, ",") end
  root:append_text(": " .. info)
  pinfo.cols.info:set(info)
  return len
end

local function heuristic(tvb, pinfo, tree)
  if not header_ok(tvb) then return false end
  local vt = tvb(F_VERTYPE.offset, 1):uint()
  if B.band(vt, C.UDP_TYPE_MASK) == SPEC.enums.UdpType.Data then
    if tvb(F_DSTQPN.offset, 4):uint() == 0 or tvb(F_SRCQPN.offset, 4):uint() == 0 then return false end
  end
  if sabre.prefs.heuristic_crc then
    -- Only a CRC32C trailer can be checked here; XXH3-64 and none datagrams pass on the header.
    local crc, crcAt, kind = trailer(tvb)
    if kind == 0 and crc32c(tvb, 0, crcAt) ~= crc then return false end
  end
  sabre.dissector(tvb, pinfo, tree)
  return true
end

sabre:register_heuristic("udp", heuristic)
DissectorTable.get("udp.port"):add_for_decode_as(sabre)
