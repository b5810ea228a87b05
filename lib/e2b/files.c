/* files.c - sbx-sync on the e2b backend: tar streams (lib/xfer.c) through
 * envd's /files and the sandbox's tar */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2b.h"

/* What a transfer talks to: the API, and the envd of one of ours that
 * is running (connect would resume a paused one). */
struct xfer {
	struct eb e;
	struct envd v;
	json_t *sb;
	const char *id;
};

static void
xfer_close(void *arg)
{
	struct xfer *x = arg;

	sbx_e2b_envd_close(&x->v);
	if (x->sb) {
		json_object_clear(x->sb);
		json_decref(x->sb);
	}
	sbx_e2b_close(&x->e);
	free(x);
}

static int
xfer_open(const json_t *ref, void **arg, struct sbx_err *err)
{
	struct xfer *x = sbx_xcalloc(1, sizeof *x);

	*arg = x;
	if (sbx_e2b_ref_open(&x->e, ref, &x->id, &x->sb, err) < 0)
		return -1;
	if (!strcmp(sbx_json_str(x->sb, "state") ? sbx_json_str(x->sb,
	    "state") : "", "paused"))
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%s' is "
		    "paused (sbx-pause --resume)", x->id);
	json_decref(x->sb);
	x->sb = NULL;
	if (sbx_e2b_connect(&x->e, ref, x->id, &x->sb, err) < 0 ||
	    sbx_e2b_envd_open(&x->v, ref, x->id, x->sb, err) < 0)
		return -1;
	return 0;
}

/* envd's answer to a request about the sandbox's files, as an error. */
static int
xfer_fail_status(const struct sbx_http_resp *rs, const char *what,
    struct sbx_err *err)
{
	if (rs->status == 401 || rs->status == 403)
		return sbx_err_set(err, SBX_EX_CRED, "envd refused the "
		    "sandbox's access token (status %ld)", rs->status);
	if (rs->status == 507)
		return sbx_err_set(err, SBX_EX_FAIL, "%s: no space left in "
		    "the sandbox (status 507)", what);
	return sbx_e2b_fail(rs, what, NULL, err);
}

/* POST /files: the body from in (streamed, of unknown length), or
 * data, into path. */
static int
xfer_upload(void *arg, const char *dest, int in, const void *data,
    size_t len, struct sbx_err *err)
{
	struct xfer *x = arg;
	struct sbx_http_req rq = {.method = "POST", .in_fd = in, .out_fd = -1,
	    .in_type = "application/octet-stream", .headers = x->v.hdrs};
	struct sbx_http_resp rs;
	char *q = sbx_http_escape(dest), *path;
	int rc = 0;

	if (in < 0) {
		rq.data = len ? data : "";
		rq.data_len = len;
	}
	path = sbx_xasprintf("/files?path=%s", q);
	rq.path = path;
	if (sbx_http_do(x->v.h, &rq, &rs, err) < 0)
		rc = -1;
	else if (rs.status != 200 && rs.status != 201 && rs.status != 204)
		rc = xfer_fail_status(&rs, "cannot upload to the sandbox", err);
	if (rc == 0 || rs.status)
		sbx_http_resp_release(&rs);
	free(path);
	free(q);
	return rc;
}

/* The temporary file goes, when the shell that should have removed it
 * did not run (Remove of a missing path is no error). */
static void
xfer_remove(void *arg, const char *path)
{
	struct xfer *x = arg;
	struct sbx_http_req rq = {.method = "POST", .in_fd = -1, .out_fd = -1,
	    .path = "/filesystem.Filesystem/Remove", .headers = x->v.hdrs,
	    .timeout_ms = 30000};
	struct sbx_http_resp rs;
	struct sbx_err err;

	rq.body = json_pack("{ss}", "path", path);
	if (sbx_http_do(x->v.h, &rq, &rs, &err) == 0)
		sbx_http_resp_release(&rs);
	json_decref(rq.body);
}

/* GET /files: path in the sandbox, streamed to out. */
static int
xfer_download(void *arg, const char *path, int out, struct sbx_err *err)
{
	struct xfer *x = arg;
	struct sbx_http_req rq = {.method = "GET", .in_fd = -1, .out_fd = out,
	    .headers = x->v.hdrs};
	struct sbx_http_resp rs;
	char *q = sbx_http_escape(path), *p;
	int rc = 0;

	p = sbx_xasprintf("/files?path=%s", q);
	rq.path = p;
	if (sbx_http_do(x->v.h, &rq, &rs, err) < 0)
		rc = -1;
	else if (rs.status != 200)
		rc = xfer_fail_status(&rs, "cannot download from the sandbox",
		    err);
	if (rc == 0 || rs.status)
		sbx_http_resp_release(&rs);
	free(p);
	free(q);
	return rc;
}

static const struct sbx_xfer_ops e2b_xfer = {
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
	return sbx_xfer_put(&e2b_xfer, ref, dir, in, err);
}

static int
e2b_put(const json_t *ref, const char *dir, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	return sbx_job_transfer(1, put_child, ref, dir, NULL, fd, job, err);
}

static int
get_child(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int out, struct sbx_err *err)
{
	return sbx_xfer_get(&e2b_xfer, ref, dir, paths, out, err);
}

static int
e2b_get(const json_t *ref, const char *dir, const struct sbx_manifest *paths,
    int *fd, struct sbx_job *job, struct sbx_err *err)
{
	return sbx_job_transfer(0, get_child, ref, dir, paths, fd, job, err);
}

const struct sbx_files sbx_e2b_files = {
	.put_archive = e2b_put,
	.get_archive = e2b_get,
	.scan = sbx_xfer_scan,
	.hash = sbx_portable_hash,
	.remove = sbx_xfer_remove,
};
