-- include:
-- Uses b's helper without including b: it works only after a script included b first.
local function a_value()
    return b_value()
end
