-- include: c
local function b_value()
    return c_value()
end
