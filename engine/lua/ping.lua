-- ping.lua: returns "PONG"; used to check that scripts load.
return "PONG"
