-- include: base
local function right_value()
    return BASE + 2
end
