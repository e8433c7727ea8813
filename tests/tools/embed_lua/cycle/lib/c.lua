-- include: a
local function c_value()
    return 1
end
