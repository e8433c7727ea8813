/*
 * fuzz_workflow.c -- libFuzzer target for the workflow loader and validator
 * (workflow_parse_text), once with no task checker and once with a fake one.
 *
 * A definition that is accepted must be accepted again from its normalized document,
 * since that document is what is stored and frozen into jobs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/workflow.h"

/* Accepts the tasks of the "core" and "disk" families whose args are an object without
 * a member "bad", in the shape plugin_registry_check_task reports faults. */
static int fake_check(void *data, const char *task, const json_t *args, const char *path, char *err,
                      size_t errlen)
{
    (void)data;
    if (strncmp(task, "core.", 5) != 0 && strncmp(task, "disk.", 5) != 0)
        return err_set(err, errlen, TERN_ENOENT, "%s.task: unknown task \"%s\"", path, task);
    if (!json_is_object(args))
        return err_set(err, errlen, TERN_EINVAL, "%s.args: expected an object", path);
    if (json_object_get(args, "bad") != NULL)
        return err_set(err, errlen, TERN_EINVAL, "%s.args.bad: not allowed", path);
    return 0;
}

static void parse_once(const uint8_t *data, size_t size, workflow_task_check_fn check)
{
    char err[512];
    err[0] = '\0';
    workflow_t *wf = NULL;
    int rc = workflow_parse_text((const char *)data, size, check, NULL, &wf, err, sizeof err);
    if (rc != 0) {
        if (wf != NULL || err[0] == '\0')
            abort(); /* A failure returns no model and always names its fault. */
        return;
    }
    for (int phase = 0; phase < WF_NPHASES; phase++)
        for (size_t i = 0; workflow_step_get(wf, (wf_phase_t)phase, i) != NULL; i++)
            (void)workflow_step_get(wf, (wf_phase_t)phase, i)->name;
    char *text = json_dumps(wf->doc, JSON_COMPACT);
    if (text == NULL)
        abort();
    workflow_t *again = NULL;
    if (workflow_parse_text(text, strlen(text), check, NULL, &again, err, sizeof err) != 0) {
        fprintf(stderr, "normalized document refused: %s\n%s\n", err, text);
        abort();
    }
    if (!json_equal(again->doc, wf->doc))
        abort(); /* Normalizing a normalized document changes nothing. */
    workflow_free(again);
    free(text);
    workflow_free(wf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse_once(data, size, NULL);
    parse_once(data, size, fake_check);
    return 0;
}
