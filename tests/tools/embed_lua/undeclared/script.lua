-- include: a b
return a_value()
