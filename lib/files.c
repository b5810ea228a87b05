/* files.c - the file operations of the backends (sbx-sync's contract),
 * apart from the backend table so that only sbx-sync links libarchive */
#include <stdlib.h>
#include <string.h>

#include "sbx.h"

const struct sbx_files *
sbx_files_of(const json_t *ref, struct sbx_err *err)
{
	const struct sbx_backend *b = sbx_backend_of(ref, err);

	if (!b)
		return NULL;
	/* SBX_SYNC_PORTABLE=1: list and remove through the sandbox's shell,
	 * as a backend that can only exec does; tests run both ways. */
	static struct sbx_files portable;

	if (!strcmp(b->name, "local")) {
		const char *e = getenv("SBX_SYNC_PORTABLE");

		if (!e || strcmp(e, "1"))
			return &sbx_local_files;
		portable = sbx_local_files;
		portable.scan = sbx_portable_scan;
		portable.hash = sbx_portable_hash;
		portable.remove = sbx_portable_remove;
		return &portable;
	}
	if (b->files)
		return b->files;
	sbx_err_set(err, SBX_EX_USAGE, "backend '%s' cannot move files yet",
	    b->name);
	return NULL;
}
