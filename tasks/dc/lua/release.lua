-- dc.release: gives back all a VM took, at once (vm_release in volume_rules.lua: its
-- allocation, its NICs and their addresses), drops its volume references and
-- reservations, and sets its final state. ARGV[1]: {"vm_uuid", "final_state":
-- "failed"|"destroyed"}. A second release finds nothing held and changes nothing but
-- the state.
local a = cjson.decode(ARGV[1])
local before = get_json('vm:' .. a.vm_uuid)
if not before then return ok({released = false}) end
if before.state == 'destroyed' then return ok({released = false, state = 'destroyed'}) end
local vm, released = vm_release(a.vm_uuid, a.final_state)
return ok({released = released, state = vm.state})
