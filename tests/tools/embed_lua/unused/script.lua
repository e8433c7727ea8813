-- include:
return 1
