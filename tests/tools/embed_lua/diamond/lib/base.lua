-- include:
local BASE = 10
local function shift_common_args()
end
