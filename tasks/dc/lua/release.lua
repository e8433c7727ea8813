-- dc.release: gives back all a VM took, at once: its allocation (the server's
-- counters), its NICs and their addresses (back to the free pool), and sets its final
-- state. ARGV[1]: {"vm_uuid", "final_state": "failed"|"destroyed"}. What was held is
-- kept in "released_nics" so a re-run of the provision takes the same addresses back
-- when they are still free. A second release finds nothing held and changes nothing
-- but the state.
local a = cjson.decode(ARGV[1])
return ok(vm_release(a.vm_uuid, a.final_state))
