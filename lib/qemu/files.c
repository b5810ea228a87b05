/* files.c - sbx-sync and sbx-cp on the qemu backend: tar in the VM, its
 * stream over the port as a command's stdin or stdout (lib/xfer.c) */
#include "qemu.h"

static int
qemu_put(const json_t *ref, const char *dir, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	return sbx_job_transfer(1, sbx_xfer_exec_put, ref, dir, NULL, fd, job,
	    err);
}

static int
qemu_get(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	return sbx_job_transfer(0, sbx_xfer_exec_get, ref, dir, paths, fd, job,
	    err);
}

const struct sbx_files sbx_qemu_files = {
	.put_archive = qemu_put,
	.get_archive = qemu_get,
	.scan = sbx_portable_scan,
	.hash = sbx_portable_hash,
	.remove = sbx_portable_remove,
};
