/* files.c - sbx-sync and sbx-cp on the daytona backend: tar streams
 * (lib/xfer.c) through the toolbox's /files and the sandbox's tar */
#include <stdlib.h>
#include <string.h>

#include "daytona.h"

/* What a transfer talks to: the API, and the toolbox of one of ours that
 * is started. */
struct xfer {
	struct dt d;
	struct dtb t;
};

static void
xfer_close(void *arg)
{
	struct xfer *x = arg;

	sbx_dt_tb_close(&x->t);
	sbx_dt_close(&x->d);
	free(x);
}

static int
xfer_open(const json_t *ref, void **arg, struct sbx_err *err)
{
	struct xfer *x = sbx_xcalloc(1, sizeof *x);
	const char *id, *st;
	json_t *s;
	int rc;

	*arg = x;
	if (sbx_dt_ref_open(&x->d, ref, &id, &s, err) < 0)
		return -1;
	st = sbx_json_str(s, "state");
	if (st && strcmp(st, "started") && (!strcmp(sbx_dt_status(st),
	    "paused") || !strcmp(sbx_dt_status(st), "stopped")))
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%s' is %s "
		    "(sbx-pause --resume)", id, st);
	else
		rc = sbx_dt_tb_open(&x->t, &x->d, s, err);
	json_decref(s);
	return rc;
}

/* Its answer to a request about the sandbox's files, as an error. */
static int
xfer_fail(const struct sbx_http_resp *rs, const char *what,
    struct sbx_err *err)
{
	if (rs->status == 507)
		return sbx_err_set(err, SBX_EX_FAIL, "%s: no space left in "
		    "the sandbox (status 507)", what);
	return sbx_dt_tb_fail(rs, what, err);
}

/* POST /files/upload?path=: the file part of a form, from in (streamed,
 * of unknown length) or data. */
static int
xfer_upload(void *arg, const char *dest, int in, const void *data,
    size_t len, struct sbx_err *err)
{
	struct xfer *x = arg;
	struct sbx_http_req rq = {.method = "POST", .in_fd = in, .out_fd = -1,
	    .form_field = "file"};
	struct sbx_http_resp rs;
	char *q = sbx_http_escape(dest);
	int rc = 0;

	if (in < 0) {
		rq.data = len ? data : "";
		rq.data_len = len;
	}
	if (sbx_dt_tb_do(&x->t, &rq, &rs, err, "/files/upload?path=%s", q) < 0)
		rc = -1;
	else if (rs.status / 100 != 2)
		rc = xfer_fail(&rs, "cannot upload to the sandbox", err);
	if (rc == 0 || rs.status)
		sbx_http_resp_release(&rs);
	free(q);
	return rc;
}

/* DELETE /files?path=: a missing file is no error. */
static void
xfer_remove(void *arg, const char *path)
{
	struct xfer *x = arg;
	struct sbx_http_req rq = {.method = "DELETE", .in_fd = -1,
	    .out_fd = -1, .timeout_ms = 30000, .idempotent = 1};
	struct sbx_http_resp rs;
	struct sbx_err err;
	char *q = sbx_http_escape(path);

	if (sbx_dt_tb_do(&x->t, &rq, &rs, &err, "/files?path=%s", q) == 0)
		sbx_http_resp_release(&rs);
	free(q);
}

/* GET /files/download?path=, streamed to out. */
static int
xfer_download(void *arg, const char *path, int out, struct sbx_err *err)
{
	struct xfer *x = arg;
	struct sbx_http_req rq = {.method = "GET", .in_fd = -1, .out_fd = out};
	struct sbx_http_resp rs;
	char *q = sbx_http_escape(path);
	int rc = 0;

	if (sbx_dt_tb_do(&x->t, &rq, &rs, err, "/files/download?path=%s",
	    q) < 0)
		rc = -1;
	else if (rs.status != 200)
		rc = xfer_fail(&rs, "cannot download from the sandbox", err);
	if (rc == 0 || rs.status)
		sbx_http_resp_release(&rs);
	free(q);
	return rc;
}

static const struct sbx_xfer_ops dt_xfer = {
	.open = xfer_open,
	.upload = xfer_upload,
	.download = xfer_download,
	.remove = xfer_remove,
	.close = xfer_close,
};

static int
put_child(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int in, struct sbx_err *err)
{
	(void)paths;
	return sbx_xfer_put(&dt_xfer, ref, dir, in, err);
}

static int
dt_put(const json_t *ref, const char *dir, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	return sbx_job_transfer(1, put_child, ref, dir, NULL, fd, job, err);
}

static int
get_child(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int out, struct sbx_err *err)
{
	return sbx_xfer_get(&dt_xfer, ref, dir, paths, out, err);
}

static int
dt_get(const json_t *ref, const char *dir, const struct sbx_manifest *paths,
    int *fd, struct sbx_job *job, struct sbx_err *err)
{
	return sbx_job_transfer(0, get_child, ref, dir, paths, fd, job, err);
}

const struct sbx_files sbx_daytona_files = {
	.put_archive = dt_put,
	.get_archive = dt_get,
	.scan = sbx_xfer_scan,
	.hash = sbx_portable_hash,
	.remove = sbx_xfer_remove,
};
