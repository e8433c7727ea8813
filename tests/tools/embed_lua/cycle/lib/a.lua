-- include: b
local function a_value()
    return b_value()
end
