/* files.c - sbx-sync on the docker backend: tar streams through the
 * engine's archive API in, through tar in the sandbox out */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "docker.h"

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
		rc = sbx_xfer_exec_put(ref, dir && *dir ? dir : "/", NULL, in,
		    err);
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

static int
docker_get(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	return sbx_job_transfer(0, sbx_xfer_exec_get, ref, dir, paths, fd, job,
	    err);
}

const struct sbx_files sbx_docker_files = {
	.put_archive = docker_put,
	.get_archive = docker_get,
	.scan = sbx_portable_scan,
	.hash = sbx_portable_hash,
	.remove = sbx_portable_remove,
};
