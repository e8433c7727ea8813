-- include: top
return top_value()
