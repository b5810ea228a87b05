/* agent.c - sbx's own agent in a docker sandbox: the static sbx-init as
 * the container's PID 1 through a read-only bind mount, its socket in a
 * per-sandbox directory of the host bind-mounted beside it, so that an
 * exec passes our fds to it as on the local backend instead of going
 * through the engine's exec API */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "docker.h"

/* Runtimes whose containers share this kernel, and so can share a unix
 * socket with us through a bind mount. gVisor (runsc) binds a socket of
 * its own kernel there, which the host never sees; a VM's (kata) is
 * another machine's. */
static int
agent_runtime(const char *rt)
{
	static const char *const ok[] = {"runc", "crun", "youki",
	    "io.containerd.runc.v2"};
	size_t i;

	if (!rt)
		return 1;
	for (i = 0; i < sizeof ok / sizeof ok[0]; i++)
		if (!strcmp(rt, ok[i]))
			return 1;
	return 0;
}

int
sbx_docker_agent_on(void)
{
	return strcmp(sbx_config_get("docker.agent", "on"), "off") != 0;
}

json_t *
sbx_docker_about(void)
{
	return json_pack("{s{ssss}}", "exec", "runc", sbx_docker_agent_on() ?
	    "agent" : "engine", "runsc", "engine");
}

int
sbx_docker_agent_make(const struct dk *d, const struct sbx_spec *spec,
    char **dir, char **init, struct sbx_err *err)
{
	struct sbx_err e2;
	unsigned char r[8];
	char hex[17], *root, *run;
	size_t i;
	int rc;

	*dir = *init = NULL;
	/* The bind mounts' sources are paths of the engine's machine. What
	 * the container writes in its socket's directory is on the host's
	 * disk, outside the engine's quota: with --disk, no agent. */
	if (!sbx_docker_agent_on() || strncmp(d->endpoint, "unix://", 7) ||
	    !agent_runtime(spec->runtime) || (spec->disk &&
	    !spec->disk_default) || !(*init = sbx_local_init_path(&e2)))
		return 0;
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		free(*init);
		*init = NULL;
		return 0;
	}
	for (i = 0; i < sizeof r; i++)
		snprintf(hex + 2 * i, 3, "%02x", r[i]);
	root = sbx_xasprintf("%s/.docker-agent", sbx_local_root());
	rc = sbx_mkdirs(root, 0700, err);
	*dir = sbx_xasprintf("%s/%s", root, hex);
	free(root);
	if (rc < 0 || mkdir(*dir, 0700) < 0) {
		if (rc == 0)
			sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':",
			    *dir);
		goto fail;
	}
	/* Whoever the image's user is may make its socket here (the mode
	 * set again: our umask is not asked); sticky, so that no other
	 * user of the container may replace it. The host reaches it only
	 * through dir, ours alone. */
	run = sbx_xasprintf("%s/run", *dir);
	rc = mkdir(run, 0700) < 0 || chmod(run, 01777) < 0 ? -1 : 0;
	free(run);
	if (rc == 0)
		return 0;
	sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s/run':", *dir);
	sbx_rmtree(*dir);
fail:
	free(*dir);
	free(*init);
	*dir = *init = NULL;
	return -1;
}

/* Only a directory of our own store's, as sbx_docker_agent_make names
 * them: a label of a container someone else made can never make us
 * connect elsewhere, or sbx-kill remove another directory. */
const char *
sbx_docker_agent_dir(const json_t *c)
{
	const char *dir = sbx_json_str(json_object_get(json_object_get(c,
	    "Config"), "Labels"), AGENT_LABEL), *root = sbx_local_root();
	size_t n = strlen(root);

	if (!dir || strncmp(dir, root, n) || strncmp(dir + n,
	    "/.docker-agent/", 15) || strlen(dir + n + 15) != 16 ||
	    strspn(dir + n + 15, "0123456789abcdef") != 16)
		return NULL;
	return dir;
}

void
sbx_docker_agent_remove(const json_t *c)
{
	const char *dir = sbx_docker_agent_dir(c);

	if (dir)
		sbx_rmtree(dir);
}

/* The agent's socket, DIR/run/sock, where the container may put
 * anything: opened without following a link, checked to be a socket, and
 * connected through /proc/self/fd, so that what is connected to is the
 * socket looked at, never a path the container chose. Above fd 2: our
 * stdio, even closed, must stay as the exec found it. */
int
sbx_docker_agent_connect(const char *dir)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int dfd, sfd = -1, fd = -1, e;

	if ((dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return -1;
	if ((sfd = openat(dfd, "run/sock", O_PATH | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		goto out;
	if (fstat(sfd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		errno = ECONNREFUSED;
		goto out;
	}
	snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d", sfd);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
	    fd <= 2) {
		e = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		close(fd);
		fd = e;
	}
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		e = errno;
		close(fd);
		errno = e;
		fd = -1;
	}
out:
	e = errno;
	if (sfd >= 0)
		close(sfd);
	close(dfd);
	errno = e;
	return fd;
}

int
sbx_docker_agent_sweep(long long before)
{
	struct sbx_http_resp rs = {0};
	struct sbx_err err;
	struct dirent *e;
	struct stat st;
	struct dk d;
	json_t *keep, *one;
	char *root, *q, *p;
	DIR *dir;
	size_t i;
	int n = 0, rc;

	root = sbx_xasprintf("%s/.docker-agent", sbx_local_root());
	if (!(dir = opendir(root))) {
		free(root);
		return 0;
	}
	if (sbx_docker_open(&d, NULL, &err) < 0) {
		closedir(dir);
		free(root);
		return 0;
	}
	q = sbx_http_escape("{\"label\":[\"" AGENT_LABEL "\"]}");
	rc = sbx_docker_req(&d, "GET", NULL, &rs, &err,
	    "/containers/json?all=1&filters=%s", q);
	free(q);
	/* Without the list, nothing is known to be gone. */
	if (rc < 0 || rs.status != 200 || !json_is_array(rs.json))
		goto out;
	keep = json_object();
	json_array_foreach(rs.json, i, one)
		if ((p = (char *)sbx_json_str(json_object_get(one, "Labels"),
		    AGENT_LABEL)))
			json_object_set_new(keep, p, json_true());
	/* One made within the minute may be a create's, its container not
	 * made yet. */
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		p = sbx_xasprintf("%s/%s", root, e->d_name);
		if (!json_object_get(keep, p) && lstat(p, &st) == 0 &&
		    S_ISDIR(st.st_mode) && st.st_mtime < before - 60 &&
		    sbx_rmtree(p) == 0)
			n++;
		free(p);
	}
	json_decref(keep);
out:
	sbx_http_resp_release(&rs);
	sbx_docker_close(&d);
	closedir(dir);
	free(root);
	return n;
}
