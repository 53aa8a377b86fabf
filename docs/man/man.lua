-- man.lua: pandoc filter for hwid's man pages, made from the same Markdown
-- as the docs (docs/man/*.md, docs/CONFIG.md).
--  * A link shows its text only: a man page has no anchors to point at, and
--    "CONFIG.md (CONFIG.md#clocks)" reads worse than the words alone.
--  * With -M man-include=ID, the level-1 heading whose identifier is ID (the
--    title of a document given after the page's own head, CONFIG.md's
--    "# hwidd configuration") is dropped and every heading after it goes up
--    one level, so that its "##" parts become the page's sections.

function Link(el)
  return el.content
end

-- A pipe table's widths come from its dashes, all alike in the docs
-- (|---|---|): each column gets a share by its longest cell (capped), and
-- the column with the longest text (the prose: "meaning") at least half.
function Table(tbl)
  local longest, raw = {}, {}
  local function measure(rows)
    for _, row in ipairs(rows) do
      for i, cell in ipairs(row.cells) do
        local n = #pandoc.utils.stringify(cell.contents)
        raw[i] = math.max(raw[i] or 0, n)
        longest[i] = math.max(longest[i] or 4, math.min(n, 20))
      end
    end
  end
  measure(tbl.head.rows)
  for _, body in ipairs(tbl.bodies) do
    measure(body.body)
  end
  local prose, total = 1, 0
  for i, n in ipairs(raw) do
    if n > raw[prose] then prose = i end
  end
  for i, n in ipairs(longest) do
    if i ~= prose then total = total + n end
  end
  local rest = 1.0
  if #longest > 1 and raw[prose] > 40 then
    rest = math.min(1.0 - 0.5, total / (total + longest[prose]))
  end
  for i, spec in ipairs(tbl.colspecs) do
    local w
    if #longest == 1 then w = 1.0
    elseif i == prose then w = 1.0 - rest
    else w = rest * (longest[i] or 4) / total end
    tbl.colspecs[i] = { spec[1], w }
  end
  return tbl
end

function Pandoc(doc)
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
