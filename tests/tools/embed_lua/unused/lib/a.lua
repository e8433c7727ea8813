-- include:
local function a_value()
    return 1
end
