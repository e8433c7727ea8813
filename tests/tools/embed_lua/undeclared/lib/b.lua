-- include:
local function b_value()
    return 2
end
