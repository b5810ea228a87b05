/* portable.c - for the tests' own sbx-sync (bin/test/sbx-sync): the local
 * backend's files listed, hashed and removed through the sandbox's shell,
 * as a backend that can only exec does it (lib/portable.c). Linked in
 * place of lib/files.c, so nothing of it is in the tools. */
#include "internal.h"

const struct sbx_files *
sbx_files_of(const json_t *ref, struct sbx_err *err)
{
	static struct sbx_files portable;
	const struct sbx_backend *b = sbx_backend_of(ref, err);

	if (!b)
		return NULL;
	portable = sbx_local_files;
	portable.scan = sbx_portable_scan;
	portable.hash = sbx_portable_hash;
	portable.remove = sbx_portable_remove;
	return &portable;
}
