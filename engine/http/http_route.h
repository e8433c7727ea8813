/*
 * http_route.h -- the pure part of the HTTP API's request path: route matching,
 * percent-decoding and query strings (the api_query_* functions of http_request.h
 * live in http_route.c too). Internal to the API; exposed for unit tests and the fuzz
 * targets, which drive it without a server.
 */
#ifndef TERN_HTTP_ROUTE_H
#define TERN_HTTP_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "http/http_request.h"

/* Decodes n bytes of s: "+" is a space and "%XX" the byte XX; a "%" not followed by
 * two hex digits stays as it is. Returns a malloc'd, NUL-terminated string. */
char *api_percent_decode(const char *s, size_t n);

/* Matches a pattern ("/jobs/:uuid/cancel") against a path without its query; a
 * trailing slash on the path is tolerated. On a match fills r->params (percent-decoded,
 * malloc'd) and r->n_params and returns true; otherwise leaves r untouched. */
bool api_route_match(const char *pattern, const char *path, api_req_t *r);

/* Finds the route of `method` and `path` in the NULL-terminated route tables. Returns
 * it with r->params filled, or NULL; *path_known tells whether some route of another
 * method matches the path (405 rather than 404). */
const api_route_t *api_route_find(const api_route_t *const *tables, size_t n_tables,
                                  const char *method, const char *path, api_req_t *r,
                                  bool *path_known);

/* The methods the route tables serve on `path`, as an Allow header's value ("GET,
 * HEAD, POST"; HEAD wherever GET is), written into out (empty when none). */
void api_route_allow(const api_route_t *const *tables, size_t n_tables, const char *path, char *out,
                     size_t outlen);

#endif /* TERN_HTTP_ROUTE_H */
