-- GET /networks: the networks by uuid, with their count of free and taken addresses.
return page(P .. 'networks', network_object)
