/* files.c - sbx-sync and sbx-cp on the qemu backend: tar in the VM, its
 * stream over the port as a command's stdin or stdout (lib/xfer.c); the
 * agent sets a push's mtimes after it */
#include <stdio.h>
#include <string.h>

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

/* The image's tar (busybox's) keeps whole seconds: the agent sets the
 * mtimes the push sent, run as /proc/self/exe (the VM's /init, outside
 * the commands' root: a magic link). */
static int
qemu_set_times(const json_t *ref, const char *dir,
    const struct sbx_manifest *m, struct sbx_err *err)
{
	static char *const argv[] = {"/proc/self/exe", "--set-times", NULL};
	const struct sbx_backend *be = sbx_backend_of(ref, err);
	struct sbx_buf in = SBX_BUF_INIT;
	struct sbx_exec_result r;
	char num[32];
	size_t i;
	int n, c;

	if (!be)
		return -1;
	if (!m->n)
		return 0;
	for (i = 0; i < m->n; i++) {
		n = snprintf(num, sizeof num, "%lld ",
		    (long long)m->e[i].mtime);
		sbx_buf_add(&in, num, (size_t)n);
		sbx_buf_add(&in, m->e[i].path, strlen(m->e[i].path) + 1);
	}
	c = sbx_exec_in(be, ref, argv, dir, NULL, &in, 0, &r, err);
	sbx_buf_release(&in);
	if (c > 0 && !err->code) {
		struct sbx_buf *e = &r.err;

		sbx_err_set(err, SBX_EX_FAIL, "cannot set the files' times "
		    "in the sandbox (exit %d)%s%.*s", c, e->len ? ": " : "",
		    (int)(e->len && e->data[e->len - 1] == '\n' ? e->len - 1 :
		    e->len), e->data ? e->data : "");
	}
	sbx_buf_release(&r.out);
	sbx_buf_release(&r.err);
	return c ? -1 : 0;
}

const struct sbx_files sbx_qemu_files = {
	.put_archive = qemu_put,
	.get_archive = qemu_get,
	.scan = sbx_portable_scan,
	.hash = sbx_portable_hash,
	.remove = sbx_portable_remove,
	.set_times = qemu_set_times,
	.plain = 1,
};
