-- include: a
return a_value()
