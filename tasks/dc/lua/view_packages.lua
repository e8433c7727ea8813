-- GET /packages: the packages by uuid.
return page(P .. 'packages', function(u) return get_json('package:' .. u) end)
