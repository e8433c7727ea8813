/*
 * store_lua.h -- the Lua scripts of engine/store/lua/, embedded at build time by
 * tools/embed_lua.py. Each script's text already holds the libraries of lua/lib/ it
 * includes.
 */
#ifndef TERN_STORE_LUA_H
#define TERN_STORE_LUA_H

typedef struct store_lua_script {
    const char *name;   /* file stem: "job_create" */
    const char *source; /* the whole script */
} store_lua_script_t;

extern const store_lua_script_t store_lua_scripts[];
extern const unsigned store_lua_nscripts;

#endif /* TERN_STORE_LUA_H */
