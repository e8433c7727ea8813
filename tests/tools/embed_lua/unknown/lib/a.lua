-- include: missing
local function a_value()
    return 1
end
