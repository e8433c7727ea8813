-- GET /servers: the servers by uuid, with what is committed on each.
return page(P .. 'servers', server_object)
