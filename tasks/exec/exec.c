/*
 * exec.c -- the "exec" plugin: runs a program on the runner's host.
 *
 * exec.run starts one child process through the host (tern_spawn: the engine's
 * child_process, stopped by the engine if the attempt is cancelled) and reports how it
 * ended. The program is executed directly, never through a shell, unless the workflow
 * says "shell": true, in which case argv is one string given to /bin/sh -c: the step
 * asks for a shell in writing, where a reviewer sees it.
 *
 * What may run is the operator's decision, in the plugin's configuration
 * ({"plugins": {"exec": {...}}} in ternd's configuration file), checked when a
 * workflow is stored (run_check, check.c) and again at every attempt (run_start,
 * run.c), since the configuration may change in between:
 *   allow_shell  shell steps are refused unless it is true (ExecNotAllowed);
 *   programs     when given, only these programs run: each entry a name (found in
 *                the default PATH when the plugin loads) or an absolute path, matched
 *                by realpath and by name (the file's name before symlinks) against argv[0]
 *                as the child's PATH and cwd resolve it,
 *                and the path found is what runs; a shell step needs /bin/sh listed;
 *   user         whom children run as when ternd is root (default "nobody", with its
 *                group and no supplementary groups); when not root, children run as
 *                ternd's user, and naming anyone else is refused at load.
 *
 * Templates never reach a shell as text: argv is an "interpolation": "parts" argument,
 * so the engine hands over the literal pieces and the values apart. A shell step's
 * script gets a positional-parameter reference in place of each template and the
 * values follow as `sh -c SCRIPT sh VALUE1 ...` (build_shell, shell.c). In an argv array each
 * element stays one argument whatever its values hold, and a value that would begin
 * an argument with '-' (an option) is refused unless a literal "--" came before; in
 * ["sh", "-c", SCRIPT] a template in the script (code) is refused.
 *
 * The child gets a minimal environment by default (PATH=/usr/local/bin:/usr/bin:/bin
 * plus the step's "env"), so what a command sees does not depend on how ternd was
 * started; "inherit_env": true passes ternd's environment, with "env" on top.
 *
 * The family owns the configuration init builds (freed by fini, config.c) and one
 * attempt's argument vectors (run.c), which live only for the tern_spawn call (the host copies
 * them). No state survives between attempts and nothing is allocated across the callback, so the
 * task needs no cancel hook. exec.h lists the family's files, one concept each; this one holds the
 * descriptor.
 */
#include <tern/task.h>

#include "exec.h"

static const char *const run_fatal[] = {"ExecSpawnError", "InvalidArgument", "ExecNotAllowed",
                                        NULL};

static const tern_task_def run_task = {
    .size = sizeof(tern_task_def),
    .name = "run",
    .summary = "Runs a program (never through a shell unless \"shell\": true) and returns "
               "its exit status and the tails of its output.",
    .args_schema = "{\"required\": [\"argv\"],"
                   " \"properties\": {"
                   "  \"argv\": {\"type\": [\"array\", \"string\"],"
                   "            \"interpolation\": \"parts\","
                   "            \"description\": \"program and arguments; a string only with "
                   "shell\"},"
                   "  \"env\": {\"type\": \"object\"},"
                   "  \"inherit_env\": {\"type\": \"boolean\"},"
                   "  \"cwd\": {\"type\": \"string\"},"
                   "  \"timeout_ms\": {\"type\": \"integer\", \"minimum\": 0,"
                   "                 \"maximum\": 31536000000},"
                   "  \"stdin\": {\"type\": \"string\"},"
                   "  \"tail_bytes\": {\"type\": \"integer\", \"minimum\": 0,"
                   "                 \"maximum\": 1048576},"
                   "  \"shell\": {\"type\": \"boolean\"}},"
                   " \"additional\": false}",
    .fatal_codes = run_fatal,
    .start = run_start,
    .check = run_check,
};

static const tern_task_def *const tasks[] = {&run_task, NULL};

static const tern_plugin exec_plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "exec",
    .version = "1.1.0",
    .init = exec_init,
    .fini = exec_fini,
    .tasks = tasks,
};

TERN_PLUGIN(exec_plugin)
