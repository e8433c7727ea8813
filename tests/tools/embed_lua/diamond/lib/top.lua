-- include: left right
local function top_value()
    return left_value() + right_value()
end
