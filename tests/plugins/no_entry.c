/*
 * no_entry.c -- a test plugin that is wrong on purpose: a shared object that exports
 * no tern_plugin_entry (nothing at all, with hidden visibility).
 */
int no_entry_helper(void);

int no_entry_helper(void)
{
    return 42;
}
