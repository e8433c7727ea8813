-- GET /images: the images by uuid.
return page(P .. 'images', function(u) return get_json('image:' .. u) end)
