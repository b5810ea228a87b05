/* files.c - the file operations of the backends (sbx-sync's contract),
 * apart from the backend table so that only sbx-sync links libarchive */
#include "internal.h"

/* The one strong reference to the local and qemu backends' file
 * operations: a tool that calls sbx_files_of links them (and
 * libarchive, nettle). */
static const struct sbx_files *const local_files[]
    __attribute__((used)) = {&sbx_local_files, &sbx_qemu_files};

const struct sbx_files *
sbx_files_of(const json_t *ref, struct sbx_err *err)
{
	const struct sbx_backend *b = sbx_backend_of(ref, err);

	if (!b)
		return NULL;
	if (b->ops->files)
		return b->ops->files;
	sbx_err_set(err, SBX_EX_USAGE, "backend '%s' cannot move files yet",
	    b->name);
	return NULL;
}
