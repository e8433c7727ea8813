/*
 * null_desc.c -- a test plugin that is wrong on purpose: tern_plugin_entry() returns
 * NULL.
 */
#include <tern/task.h>

__attribute__((visibility("default"))) const tern_plugin *tern_plugin_entry(void);

__attribute__((visibility("default"))) const tern_plugin *tern_plugin_entry(void)
{
    return NULL;
}
