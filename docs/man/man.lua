-- man.lua: pandoc filter for hwid's man pages, made from the same Markdown
-- as the docs (docs/man/*.md, docs/CONFIG.md).
--  * A link shows its text only: a man page has no anchors to point at, and
--    "CONFIG.md (CONFIG.md#clocks)" reads worse than the words alone.
--  * With -M man-include=ID, the level-1 heading whose identifier is ID (the
--    title of a document given after the page's own head, CONFIG.md's
--    "# hwidd configuration") is dropped and every heading after it goes up
--    one level, so that its "##" parts become the page's sections.
--  * With -M docdir=DIR, the documentation's directory as the sources
--    spell it, /usr/share/doc/hwid, becomes DIR: where this build installs
--    it (docs/meson.build), which the Debian packages keep (debian/).
--  * Tables fit 80 columns without a warning of groff's (below).

local function Link(el)
  return el.content
end

local SOURCE_DOCDIR = '/usr/share/doc/hwid'
local docdir = SOURCE_DOCDIR

local function read_docdir(meta)
  if meta.docdir then
    docdir = pandoc.utils.stringify(meta.docdir)
  end
end

local function in_docdir(text)
  local out, n = text:gsub(SOURCE_DOCDIR:gsub('%p', '%%%0'), (docdir:gsub('%%', '%%%%')))
  return n > 0 and out or nil
end

local function relocate(el)
  local text = in_docdir(el.text)
  if text then
    el.text = text
    return el
  end
end

-- Tables must fit the 80 columns man formats for when it writes to no
-- terminal (`man --warnings`; install-man.sh fails on any warning of
-- groff's), less the 7 of the section's indent and one: pandoc makes a
-- column of w(70 * share)n and tbl puts 3n between two, so the shares are
-- of WIDTH less the gutters. Every column is as wide as its longest piece
-- that cannot break (else "can't break line"); a code span in a table may
-- break, without a hyphen (\:), after '_', '.', '/', ':', ',', '=', '-'
-- and '[', and between the words of a camelCase name, so that a key such
-- as reenroll_by_attestation needs no column of its own width. The cells
-- are set ragged right (.ad l, then the page's adjustment again):
-- justified, a narrow column "cannot adjust line".
local WIDTH = 70

-- Code as pandoc's man writer sets it (\f[V]...\f[R], its escapes), with
-- the break points.
local function breakable_code(text)
  local out = {}
  local n = utf8.len(text) or #text
  local i = 0
  for pos, c in utf8.codes(text) do
    i = i + 1
    local ch = utf8.char(c)
    local breaks = ch:match('^[_./:,=%[%-]$') or (ch:match('^%l$') and text:sub(pos + 1, pos + 1):match('^%u$'))
    if ch == '\\' then ch = '\\[rs]'
    elseif ch == '-' then ch = '\\-'
    elseif ch == "'" then ch = '\\[aq]'
    elseif ch == '@' then ch = '\\[at]'
    elseif ch == '.' and i == 1 then ch = '\\&.'
    elseif c > 127 then ch = string.format('\\[u%04X]', c) end
    out[#out + 1] = ch
    if i < n and breaks then out[#out + 1] = '\\:' end
  end
  return pandoc.RawInline('man', '\\f[V]' .. table.concat(out) .. '\\f[R]')
end

-- The longest piece of a code span or a word that a line cannot break.
local function longest_piece(inlines)
  local longest = 0
  local function piece(s)
    s = s:gsub('(%l)(%u)', '%1 %2')
    for p in s:gmatch('[^_./:,=%[%- ]*[_./:,=%[%-]?') do
      longest = math.max(longest, utf8.len(p) or #p)
    end
  end
  pandoc.walk_block(pandoc.Plain(inlines), {
    Str = function(el) longest = math.max(longest, utf8.len(el.text) or #el.text) end,
    Code = function(el) piece(el.text) end,
  })
  return longest
end

local function cells_each(tbl, fn)
  for _, row in ipairs(tbl.head.rows) do
    for i, cell in ipairs(row.cells) do fn(i, cell) end
  end
  for _, body in ipairs(tbl.bodies) do
    for _, row in ipairs(body.body) do
      for i, cell in ipairs(row.cells) do fn(i, cell) end
    end
  end
end

-- Each column's share: by its longest cell (capped), the column with the
-- longest text (the prose: "meaning") at least half; then every column at
-- least its longest piece, taken from the prose.
local function shares(tbl)
  local longest, raw, piece = {}, {}, {}
  cells_each(tbl, function(i, cell)
    local n = #pandoc.utils.stringify(cell.contents)
    raw[i] = math.max(raw[i] or 0, n)
    longest[i] = math.max(longest[i] or 4, math.min(n, 20))
    for _, b in ipairs(cell.contents) do
      if b.content then piece[i] = math.max(piece[i] or 0, longest_piece(b.content)) end
    end
  end)
  local k = #tbl.colspecs
  local room = WIDTH - 3 * (k - 1)
  local prose, total = 1, 0
  for i, n in ipairs(raw) do
    if n > raw[prose] then prose = i end
  end
  for i, n in ipairs(longest) do
    if i ~= prose then total = total + n end
  end
  local rest = 1.0
  if k > 1 and raw[prose] > 40 then
    rest = math.min(1.0 - 0.5, total / (total + longest[prose]))
  end
  local cols, used = {}, 0
  for i = 1, k do
    local w
    if k == 1 then w = 1.0
    elseif i == prose then w = 1.0 - rest
    else w = rest * (longest[i] or 4) / total end
    cols[i] = math.max(w * room, (piece[i] or 0) + 1)
    if i ~= prose then used = used + cols[i] end
  end
  if k > 1 then cols[prose] = room - used end
  return cols, room
end

-- The table as pandoc's man writer sets it, but with tbl's "nokeep": kept
-- together, a table's rows are moved whole to the next page when they do
-- not fit, and tbl warns that a "table text block will not fit on one
-- page" even for a table of three lines, wherever the page breaks fall
-- (each width of the terminal its own). A man page's reader scrolls.
local has_tables = false

local function Table(tbl)
  local cols = shares(tbl)
  for i, spec in ipairs(tbl.colspecs) do
    tbl.colspecs[i] = { spec[1], cols[i] / 70 }
  end
  cells_each(tbl, function(_, cell)
    cell.contents = pandoc.walk_block(pandoc.Div(cell.contents), { Code = function(el)
      return breakable_code(el.text)
    end }).content
  end)
  local roff = pandoc.write(pandoc.Pandoc({ tbl }), 'man')
  local kept
  roff, kept = roff:gsub('\n%.TS\ntab%(@%);\n', '\n.TS\nnokeep tab(@);\n', 1)
  if kept ~= 1 then
    error('man.lua: pandoc no longer writes a table as .TS and tab(@);')
  end
  has_tables = true
  return pandoc.RawBlock('man', '.nr hwid-adjust \\n[.j]\n.ad l\n' .. roff .. '\n.ad \\n[hwid-adjust]')
end

local function Pandoc(doc)
  -- Tables written raw: the page still says that it needs tbl ('\" t).
  if has_tables then
    doc.meta['has-tables'] = true
  end
  local include = doc.meta['man-include']
  if not include then
    return doc
  end
  include = pandoc.utils.stringify(include)
  local blocks, raising = {}, false
  for _, b in ipairs(doc.blocks) do
    if b.t == 'Header' and b.level == 1 and b.identifier == include then
      raising = true
    else
      if raising and b.t == 'Header' and b.level > 1 then
        b.level = b.level - 1
      end
      table.insert(blocks, b)
    end
  end
  if not raising then
    error('man.lua: no level-1 heading with the identifier ' .. include)
  end
  return pandoc.Pandoc(blocks, doc.meta)
end

return {
  { Meta = read_docdir },
  { Str = relocate, Code = relocate, CodeBlock = relocate, Link = Link },
  { Table = Table },
  { Pandoc = Pandoc },
}
