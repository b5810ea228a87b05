/* files.c - sbx-sync on the docker backend: tar streams through the
 * engine's archive API */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "docker.h"

/* Lists the files it is given that are files or symlinks (a path gone
 * since the scan is no error) as a tar on stdout, from directory $1. */
static const char get_sh[] =
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
static const char put_sh[] =
    "cd -- \"$1\" || exit 3\n"
    "exec tar -xf -\n";

/* Runs argv (a tar script whose $1 is dir) in the sandbox, its stdin
 * and stdout already set: exit 3 is a missing dir, any other failure
 * tar's. */
static int
tar_exec(const json_t *ref, char **argv, int interactive, const char *dir,
    struct sbx_err *err)
{
	struct sbx_exec_opts o = {.interactive = interactive};
	struct sbx_exec_result res;

	if (sbx_docker_exec(ref, argv, &o, &res, err) < 0)
		return -1;
	if (res.exit_code == 3)
		return sbx_err_set(err, SBX_EX_USAGE, "no directory '%s' in "
		    "the sandbox", dir ? dir : "(workdir)");
	if (res.exit_code)
		return sbx_err_set(err, SBX_EX_FAIL, "tar in the sandbox "
		    "failed (status %d)", res.exit_code);
	return 0;
}

/* Under gVisor (runsc) the engine's archive API writes beneath the
 * sandbox's own overlay, where it sees nothing but its volumes: tar in
 * the sandbox unpacks there instead. */
static int
put_exec(const json_t *ref, const char *dir, int in, struct sbx_err *err)
{
	char *argv[] = {"sh", "-c", (char *)put_sh, "sh", (char *)dir, NULL};
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (dup2(in, 0) < 0 || null < 0 || dup2(null, 1) < 0 ||
	    dup2(null, 2) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot set up a "
		    "transfer:");
	return tar_exec(ref, argv, 1, dir, err);
}

/* Whether dir is at or under one of the container's mounts (its
 * workdir volume among them), where the archive API writes through. */
static int
on_volume(json_t *c, const char *dir)
{
	json_t *m;
	size_t i, n;
	const char *dst;

	if (!dir)
		return 0;
	json_array_foreach(json_object_get(c, "Mounts"), i, m) {
		dst = sbx_json_str(m, "Destination");
		if (!dst || !*dst)
			continue;
		n = strlen(dst);
		while (n > 1 && dst[n - 1] == '/')
			n--;
		if (!strncmp(dir, dst, n) && (dir[n] == '\0' ||
		    dir[n] == '/' || (n == 1 && dst[0] == '/')))
			return 1;
	}
	return 0;
}

/* The tar on in goes to the engine, which unpacks it in dir (paths is
 * a get's). */
static int
put_child(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int in, struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "PUT", .in_fd = in, .out_fd = -1,
	    .in_type = "application/x-tar"};
	struct sbx_http_resp rs;
	struct dk d;
	json_t *c;
	const char *rt;
	char *q, *path;
	int rc;

	(void)paths;
	if (sbx_docker_ref_open(&d, ref, &c, err) < 0)
		return -1;
	if (!dir)
		dir = sbx_json_str(json_object_get(c, "Config"), "WorkingDir");
	rt = sbx_json_str(json_object_get(c, "HostConfig"), "Runtime");
	if (rt && !strcmp(rt, "runsc") && !on_volume(c, dir)) {
		rc = put_exec(ref, dir && *dir ? dir : "/", in, err);
		json_decref(c);
		sbx_docker_close(&d);
		return rc;
	}
	q = sbx_http_escape(dir && *dir ? dir : "/");
	path = sbx_xasprintf("/v%d.%d/containers/%s/archive?path=%s",
	    API_MAJOR, d.minor, sbx_json_str(c, "Id"), q);
	rq.path = path;
	rc = sbx_http_do(d.h, &rq, &rs, err);
	if (rc == 0 && rs.status == 404)
		rc = sbx_err_set(err, SBX_EX_USAGE, "no directory '%s' in the "
		    "sandbox", dir);
	else if (rc == 0 && rs.status >= 300)
		rc = sbx_docker_fail(&rs, SBX_EX_FAIL,
		    "cannot put files in the "
		    "sandbox", err);
	if (rc == 0 || rs.status)
		sbx_http_resp_release(&rs);
	free(path);
	free(q);
	json_decref(c);
	sbx_docker_close(&d);
	return rc;
}

static int
docker_put(const json_t *ref, const char *dir, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	return sbx_job_transfer(1, put_child, ref, dir, NULL, fd, job, err);
}

/* A tar of paths, made by tar in the sandbox, goes to out. */
static int
get_child(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int out, struct sbx_err *err)
{
	char **argv = sbx_xcalloc(paths->n + 6, sizeof *argv);
	size_t i;
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC), rc;

	argv[0] = "sh";
	argv[1] = "-c";
	argv[2] = (char *)get_sh;
	argv[3] = "sh";
	argv[4] = (char *)(dir ? dir : ".");
	for (i = 0; i < paths->n; i++)
		argv[5 + i] = paths->e[i].path;
	if (dup2(out, 1) < 0 || null < 0 || dup2(null, 2) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot set up a "
		    "transfer:");
	rc = tar_exec(ref, argv, 0, dir, err);
	free(argv);
	return rc;
}

static int
docker_get(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	return sbx_job_transfer(0, get_child, ref, dir, paths, fd, job, err);
}

const struct sbx_files sbx_docker_files = {
	.put_archive = docker_put,
	.get_archive = docker_get,
	.scan = sbx_portable_scan,
	.hash = sbx_portable_hash,
	.remove = sbx_portable_remove,
};
