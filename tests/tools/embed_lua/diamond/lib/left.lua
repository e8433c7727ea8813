-- include: base
local function left_value()
    return BASE + 1
end
