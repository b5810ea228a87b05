/* xfer.c - sbx-sync's tar streams for backends that can move one whole
 * file in and out of a sandbox and run its shell (e2b's envd, Daytona's
 * toolbox): the sandbox's own tar packs and unpacks */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "internal.h"

/*
 * A push streams the tar into a temporary file in the sandbox, then tar
 * unpacks it there; a pull uploads the list of paths (no argv nor
 * message limit for a big tree), tar packs them into a temporary file,
 * and its download streams to the caller: raw bytes, not the base64 of
 * a command's output.
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

static int
run(const json_t *ref, char **argv, struct sbx_exec_result *res,
    struct sbx_err *err)
{
	const struct sbx_backend *be = sbx_backend_of(ref, err);
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4096};

	return !be ? -1 : be->ops->exec(ref, argv, &o, res, err);
}

int
sbx_xfer_dir_gone(const json_t *ref, const char *dir, struct sbx_err *err)
{
	struct sbx_exec_result res = {0};
	struct sbx_err perr;
	const struct sbx_backend *be = sbx_backend_of(ref, &perr);
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4096,
	    .cwd = "/"};
	char *argv[] = {"sh", "-c", "exit 0", NULL};

	if ((err->code == SBX_EX_NOTFOUND || err->code == SBX_EX_EXECFAIL) &&
	    be && be->ops->exec(ref, argv, &o, &res, &perr) == 0 &&
	    res.exit_code == 0)
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

/* The transfer opened, and a temporary name of ours with suffix. */
static int
begin(const struct sbx_xfer_ops *xo, const json_t *ref, const char *suffix,
    void **x, char *tmp, size_t n, struct sbx_err *err)
{
	unsigned char r[8];
	size_t i, len;

	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		return sbx_err_set(err, SBX_EX_FAIL, "getrandom:");
	len = (size_t)snprintf(tmp, n, "%s", XFER_TMP);
	for (i = 0; i < sizeof r && len + 2 < n; i++, len += 2)
		snprintf(tmp + len, n - len, "%02x", r[i]);
	snprintf(tmp + len, n - len, "%s", suffix);
	*x = NULL;
	if (xo->open(ref, x, err) < 0) {
		if (*x)
			xo->close(*x);
		return -1;
	}
	return 0;
}

int
sbx_xfer_put(const struct sbx_xfer_ops *xo, const json_t *ref,
    const char *dir, int in, struct sbx_err *err)
{
	struct sbx_exec_result res = {0};
	char tmp[64];
	char *argv[] = {"sh", "-c", (char *)put_sh, "sh", (char *)(dir ? dir :
	    "."), tmp, NULL};
	void *x;
	int rc = -1;

	if (begin(xo, ref, ".tar", &x, tmp, sizeof tmp, err) < 0)
		return -1;
	if (xo->upload(x, tmp, in, NULL, 0, err) < 0) {
		xo->remove(x, tmp);
		goto out;
	}
	if (run(ref, argv, &res, err) < 0) {
		xo->remove(x, tmp);
		sbx_xfer_dir_gone(ref, dir, err);
		goto out;
	}
	if (res.exit_code)
		tar_failed(&res, dir, err);
	else
		rc = 0;
out:
	sbx_buf_release(&res.out);
	sbx_buf_release(&res.err);
	xo->close(x);
	return rc;
}

int
sbx_xfer_get(const struct sbx_xfer_ops *xo, const json_t *ref,
    const char *dir, const struct sbx_manifest *paths, int out,
    struct sbx_err *err)
{
	struct sbx_exec_result res = {0};
	struct sbx_buf list = SBX_BUF_INIT;
	char tmp[64], tar[64];
	char *argv[] = {"sh", "-c", (char *)get_sh, "sh", (char *)(dir ? dir :
	    "."), tmp, tar, NULL};
	size_t i;
	void *x;
	int rc = -1;

	if (begin(xo, ref, ".list", &x, tmp, sizeof tmp, err) < 0)
		return -1;
	snprintf(tar, sizeof tar, "%.*s.tar", (int)(strlen(tmp) - 5), tmp);
	for (i = 0; i < paths->n; i++)
		sbx_buf_add(&list, paths->e[i].path, strlen(paths->e[i].path) +
		    1);
	if (xo->upload(x, tmp, -1, list.data, list.len, err) < 0) {
		xo->remove(x, tmp);
		goto out;
	}
	if (run(ref, argv, &res, err) < 0) {
		xo->remove(x, tmp);
		xo->remove(x, tar);
		sbx_xfer_dir_gone(ref, dir, err);
		goto out;
	}
	if (res.exit_code)
		tar_failed(&res, dir, err);
	else {
		rc = xo->download(x, tar, out, err);
		xo->remove(x, tar);
	}
out:
	sbx_buf_release(&res.out);
	sbx_buf_release(&res.err);
	sbx_buf_release(&list);
	xo->close(x);
	return rc;
}

int
sbx_xfer_scan(const json_t *ref, const struct sbx_scan_opts *o,
    struct sbx_manifest *out, struct sbx_err *err)
{
	if (sbx_portable_scan(ref, o, out, err) < 0)
		return sbx_xfer_dir_gone(ref, o->dir, err);
	return 0;
}

int
sbx_xfer_remove(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, struct sbx_err *err)
{
	if (sbx_portable_remove(ref, dir, paths, err) < 0)
		return sbx_xfer_dir_gone(ref, dir, err);
	return 0;
}

/* --- tar in the sandbox over exec's stdin and stdout ------------------ */

/* Lists the files it is given that are files or symlinks (a path gone
 * since the scan is no error) as a tar on stdout, from directory $1. */
static const char exec_get_sh[] =
    "cd -- \"$1\" || exit 3\n"
    "shift\n"
    "n=$#\n"
    "while [ $n -gt 0 ]; do\n"
    "\tif [ -f \"$1\" ] || [ -L \"$1\" ]; then set -- \"$@\" \"$1\"; fi\n"
    "\tshift\n"
    "\tn=$((n - 1))\n"
    "done\n"
    "[ $# -gt 0 ] || exec dd if=/dev/zero bs=512 count=2 2>/dev/null\n"
    "exec tar -cf - -- \"$@\"\n";

/* Unpacks the tar on stdin in directory $1. */
static const char exec_put_sh[] =
    "cd -- \"$1\" || exit 3\n"
    "exec tar -xf -\n";

/* Runs argv (a tar script whose $1 is dir) in the sandbox, its stdin
 * and stdout already set: exit 3 is a missing dir, any other failure
 * tar's. */
static int
tar_exec(const json_t *ref, char **argv, int interactive, const char *dir,
    struct sbx_err *err)
{
	const struct sbx_backend *be = sbx_backend_of(ref, err);
	struct sbx_exec_opts o = {.interactive = interactive};
	struct sbx_exec_result res;

	if (!be || be->ops->exec(ref, argv, &o, &res, err) < 0)
		return -1;
	if (res.exit_code == 3)
		return sbx_err_set(err, SBX_EX_USAGE, "no directory '%s' in "
		    "the sandbox", dir ? dir : "(workdir)");
	if (res.exit_code)
		return sbx_err_set(err, SBX_EX_FAIL, "tar in the sandbox "
		    "failed (status %d)", res.exit_code);
	return 0;
}

int
sbx_xfer_exec_put(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int in, struct sbx_err *err)
{
	char *argv[] = {"sh", "-c", (char *)exec_put_sh, "sh", (char *)(dir ?
	    dir : "."), NULL};
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	(void)paths;
	if (dup2(in, 0) < 0 || null < 0 || dup2(null, 1) < 0 ||
	    dup2(null, 2) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot set up a "
		    "transfer:");
	return tar_exec(ref, argv, 1, dir, err);
}

int
sbx_xfer_exec_get(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int out, struct sbx_err *err)
{
	char **argv = sbx_xcalloc(paths->n + 6, sizeof *argv);
	size_t i;
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC), rc;

	argv[0] = "sh";
	argv[1] = "-c";
	argv[2] = (char *)exec_get_sh;
	argv[3] = "sh";
	argv[4] = (char *)(dir ? dir : ".");
	for (i = 0; i < paths->n; i++)
		argv[5 + i] = paths->e[i].path;
	if (dup2(out, 1) < 0 || null < 0 || dup2(null, 2) < 0) {
		free(argv);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot set up a "
		    "transfer:");
	}
	rc = tar_exec(ref, argv, 0, dir, err);
	free(argv);
	return rc;
}
