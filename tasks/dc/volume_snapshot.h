/*
 * volume_snapshot.h -- what the agent's start needs of a storage instance's snapshots
 * and rollback (volume_snapshot.c, dc.volume_snapshot).
 */
#ifndef DC_VOLUME_SNAPSHOT_H
#define DC_VOLUME_SNAPSHOT_H

#include <stddef.h>

/* Puts right what steps killed midway left in the instance directory `dir` (checked
 * by instance_paths): every snapshots/<name>.part/ removed; of a rollback, a partial
 * export.rollback/ beside export/ removed (the old data stays), a whole
 * export.rollback/ with export.old/ and no export/ renamed into place (the new data),
 * export.old/ beside export/ removed. Nothing to do for an instance without those.
 * 0, or a negative errno with the message in err. Only while no step runs on the
 * instance: at the agent's start, or from the instance's own file job. */
int volume_leftovers_recover(const char *dir, char *err, size_t errlen);

#endif
