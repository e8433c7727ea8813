/*
 * lib.h -- tasks/lib, what tern's own plugin families share, one concept per file:
 *
 *   args.h       a task's arguments read by name, with defaults and messages that name
 *                the argument, the expected type and the one given
 *   json_kind.h  a JSON value's type as messages say it ("integer", "object", ...)
 *   strvec.h     a NULL-terminated vector of strings, each borrowed or owned
 *   utf8.h       UTF-8 validation, and bytes turned into a JSON string that is valid
 *
 * It is the home of code two families would otherwise copy. The datacenter is one
 * family, dc, so its model lives in tasks/dc/ (the library dc_model, which the lab
 * tool links too), not here.
 *
 * The rules that keep a plugin a plugin hold here too. This is a static library built
 * like the plugins (hidden visibility, position-independent), so each .so carries its
 * own copy and still exports only tern_plugin_entry. It includes include/tern/task.h
 * and the C library, never an engine header, and calls no engine symbol: whatever it
 * needs from the engine comes through the host table, as for any plugin. Its names
 * start with task_ (task_args_*, task_strv_*, ...) so they cannot clash with a plugin
 * author's or with tern_, the ABI's.
 *
 * Ownership follows include/tern/task.h: json_t parameters are borrowed, and each
 * function says what its results point into.
 */
#ifndef TASK_LIB_H
#define TASK_LIB_H

#include "args.h"
#include "json_kind.h"
#include "strvec.h"
#include "utf8.h"

#endif
