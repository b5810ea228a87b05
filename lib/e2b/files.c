/* files.c - sbx-sync on the e2b backend: tar streams through envd's /files
 * and the sandbox's tar */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "e2b.h"

/*
 * envd moves files over plain HTTP (/files), the shell in the sandbox
 * packs and unpacks them. A push streams the tar into a temporary file
 * in the sandbox, then tar unpacks it there; a pull uploads the list of
 * paths (no argv nor message limit for a big tree), tar packs them into
 * a temporary file, and its download streams to the caller: raw bytes,
 * not the base64 of a command's output.
 */

#define XFER_TMP "/tmp/sbx-sync-" /* the temporary files' prefix */

/* Unpack $2 in directory $1; $2 goes whatever happens. */
static const char put_sh[] =
    "cd -- \"$1\" || { rm -f -- \"$2\"; exit 3; }\n"
    "tar -x -p -o -f \"$2\"\n"
    "s=$?\n"
    "rm -f -- \"$2\"\n"
    "exit $s\n";

/* A tar in $3 of the paths listed in $2 (NUL-separated, relative to
 * directory $1) that are files or symlinks: a path gone since the scan
 * is no error. $2 goes whatever happens, $3 when tar fails. */
static const char get_sh[] =
    "cd -- \"$1\" || { rm -f -- \"$2\"; exit 3; }\n"
    "xargs -0 -r sh -c 'for f; do if [ -f \"$f\" ] || [ -L \"$f\" ]; "
    "then printf \"%s\\0\" \"$f\"; fi; done' sh <\"$2\" |\n"
    "tar -c -f \"$3\" --null --no-recursion -T -\n"
    "s=$?\n"
    "rm -f -- \"$2\"\n"
    "[ $s = 0 ] || rm -f -- \"$3\"\n"
    "exit $s\n";

/* What a transfer talks to: the API, and the envd of one of ours that
 * is running (connect would resume a paused one). */
struct xfer {
	struct eb e;
	struct envd v;
	json_t *sb;
	const char *id;
	char tmp[64];  /* the temporary file in the sandbox, or "" */
};

static void
xfer_close(struct xfer *x)
{
	sbx_e2b_envd_close(&x->v);
	if (x->sb) {
		json_object_clear(x->sb);
		json_decref(x->sb);
	}
	sbx_e2b_close(&x->e);
	memset(x, 0, sizeof *x);
}

static int
xfer_open(struct xfer *x, const json_t *ref, const char *suffix,
    struct sbx_err *err)
{
	unsigned char r[8];
	size_t i, n;

	memset(x, 0, sizeof *x);
	if (sbx_e2b_ref_open(&x->e, ref, &x->id, &x->sb, err) < 0)
		return -1;
	if (!strcmp(sbx_json_str(x->sb, "state") ? sbx_json_str(x->sb,
	    "state") : "", "paused")) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%s' is paused "
		    "(sbx-pause --resume)", x->id);
		goto fail;
	}
	json_decref(x->sb);
	x->sb = NULL;
	if (sbx_e2b_connect(&x->e, ref, x->id, &x->sb, err) < 0 ||
	    sbx_e2b_envd_open(&x->v, ref, x->id, x->sb, err) < 0)
		goto fail;
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		sbx_err_set(err, SBX_EX_FAIL, "getrandom:");
		goto fail;
	}
	n = (size_t)snprintf(x->tmp, sizeof x->tmp, "%s", XFER_TMP);
	for (i = 0; i < sizeof r; i++, n += 2)
		snprintf(x->tmp + n, sizeof x->tmp - n, "%02x", r[i]);
	snprintf(x->tmp + n, sizeof x->tmp - n, "%s", suffix);
	return 0;
fail:
	xfer_close(x);
	return -1;
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
 * data, into x->tmp. */
static int
xfer_upload(struct xfer *x, int in, const void *data, size_t len,
    struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "POST", .in_fd = in, .out_fd = -1,
	    .in_type = "application/octet-stream", .headers = x->v.hdrs};
	struct sbx_http_resp rs;
	char *q = sbx_http_escape(x->tmp), *path;
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
xfer_remove(struct xfer *x, const char *path)
{
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
xfer_download(struct xfer *x, const char *path, int out, struct sbx_err *err)
{
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

/* A command that could not start in dir (envd says only "no such
 * file", or that the cwd does not exist), when one can start at /: dir
 * is gone, and err says so. */
static int
dir_gone(const json_t *ref, const char *dir, struct sbx_err *err)
{
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4096,
	    .cwd = "/"};
	struct sbx_exec_result res = {0};
	struct sbx_err perr;
	char *argv[] = {"sh", "-c", "exit 0", NULL};

	if ((err->code == SBX_EX_NOTFOUND || err->code == SBX_EX_EXECFAIL) &&
	    sbx_e2b_exec(ref, argv, &o, &res, &perr) == 0 && res.exit_code == 0)
		sbx_err_set(err, SBX_EX_USAGE, "no directory '%s' in the "
		    "sandbox", dir ? dir : "(workdir)");
	sbx_buf_release(&res.out);
	sbx_buf_release(&res.err);
	return -1;
}

/* The shell of put_sh or get_sh failed: 3 is dir's absence, else
 * tar's first words say why. */
static int
tar_failed(const struct sbx_exec_result *res, const char *dir,
    struct sbx_err *err)
{
	size_t n;

	if (res->exit_code == 3)
		return sbx_err_set(err, SBX_EX_USAGE, "no directory '%s' in "
		    "the sandbox", dir ? dir : "(workdir)");
	n = res->err.len ? strcspn(res->err.data, "\n") : 0;
	if (n > 200)
		n = 200;
	return sbx_err_set(err, SBX_EX_FAIL, "tar in the sandbox failed "
	    "(status %d)%s%.*s", res->exit_code, n ? ": " : "", (int)n,
	    n ? res->err.data : "");
}

/* The tar on in goes to a temporary file in the sandbox, which tar
 * unpacks in dir (paths is a get's). */
static int
put_child(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int in, struct sbx_err *err)
{
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4096};
	struct sbx_exec_result res = {0};
	struct xfer x;
	char *argv[] = {"sh", "-c", (char *)put_sh, "sh", (char *)(dir ? dir :
	    "."), NULL, NULL};
	int rc = -1;

	(void)paths;
	if (xfer_open(&x, ref, ".tar", err) < 0)
		return -1;
	argv[5] = x.tmp;
	if (xfer_upload(&x, in, NULL, 0, err) < 0) {
		xfer_remove(&x, x.tmp);
		goto out;
	}
	if (sbx_e2b_exec(ref, argv, &o, &res, err) < 0) {
		xfer_remove(&x, x.tmp);
		dir_gone(ref, dir, err);
		goto out;
	}
	if (res.exit_code)
		tar_failed(&res, dir, err);
	else {
		rc = 0;
	}
out:
	sbx_buf_release(&res.out);
	sbx_buf_release(&res.err);
	xfer_close(&x);
	return rc;
}

static int
e2b_put(const json_t *ref, const char *dir, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	return sbx_job_transfer(1, put_child, ref, dir, NULL, fd, job, err);
}

/* A tar of paths, made by tar in the sandbox, goes to out. */
static int
get_child(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int out, struct sbx_err *err)
{
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4096};
	struct sbx_exec_result res = {0};
	struct sbx_buf list = SBX_BUF_INIT;
	struct xfer x;
	char *argv[] = {"sh", "-c", (char *)get_sh, "sh", (char *)(dir ? dir :
	    "."), NULL, NULL, NULL};
	char *tar = NULL;
	size_t i;
	int rc = -1;

	if (xfer_open(&x, ref, ".list", err) < 0)
		return -1;
	tar = sbx_xasprintf("%.*s.tar", (int)(strlen(x.tmp) - 5), x.tmp);
	argv[5] = x.tmp;
	argv[6] = tar;
	for (i = 0; i < paths->n; i++)
		sbx_buf_add(&list, paths->e[i].path, strlen(paths->e[i].path) +
		    1);
	if (xfer_upload(&x, -1, list.data, list.len, err) < 0) {
		xfer_remove(&x, x.tmp);
		goto out;
	}
	if (sbx_e2b_exec(ref, argv, &o, &res, err) < 0) {
		xfer_remove(&x, x.tmp);
		xfer_remove(&x, tar);
		dir_gone(ref, dir, err);
		goto out;
	}
	if (res.exit_code)
		tar_failed(&res, dir, err);
	else {
		rc = xfer_download(&x, tar, out, err);
		xfer_remove(&x, tar);
	}
out:
	sbx_buf_release(&res.out);
	sbx_buf_release(&res.err);
	sbx_buf_release(&list);
	free(tar);
	xfer_close(&x);
	return rc;
}

static int
e2b_get(const json_t *ref, const char *dir, const struct sbx_manifest *paths,
    int *fd, struct sbx_job *job, struct sbx_err *err)
{
	return sbx_job_transfer(0, get_child, ref, dir, paths, fd, job, err);
}

static int
e2b_scan(const json_t *ref, const struct sbx_scan_opts *o,
    struct sbx_manifest *out, struct sbx_err *err)
{
	if (sbx_portable_scan(ref, o, out, err) < 0)
		return dir_gone(ref, o->dir, err);
	return 0;
}

static int
e2b_remove(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, struct sbx_err *err)
{
	if (sbx_portable_remove(ref, dir, paths, err) < 0)
		return dir_gone(ref, dir, err);
	return 0;
}

const struct sbx_files sbx_e2b_files = {
	.put_archive = e2b_put,
	.get_archive = e2b_get,
	.scan = e2b_scan,
	.hash = sbx_portable_hash,
	.remove = e2b_remove,
};
