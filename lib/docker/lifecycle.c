/* lifecycle.c - the docker backend's sandboxes: create, kill, info, list,
 * pause and resume, and its table of operations */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "docker.h"

/* PID 2 of the container (docker's init is PID 1): it keeps the container
 * alive, and ends it with EXPIRED_CODE once nothing else has run in it
 * for $1 seconds (0: never). It counts its own sleeps, so time the
 * container spends paused does not count. Needs sh and sleep. */
static const char keepalive_sh[] =
    "t=$1 i=0\n"
    "while sleep 2; do\n"
    "\t[ \"$t\" -gt 0 ] || continue\n"
    "\tset -- /proc/[0-9]*\n"
    "\tif [ $# -gt 2 ]; then i=0; else i=$((i + 2)); fi\n"
    "\t[ $i -lt \"$t\" ] || exit " "124" "\n"
    "done\n";

/* --- create --------------------------------------------------------------- */

/* The engine's /info: its runtimes, and the default one. */
static json_t *
engine_info(struct dk *d, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	json_t *o = NULL;

	if (sbx_docker_req(d, "GET", NULL, &rs, err, "/info") < 0)
		return NULL;
	if (rs.status != 200 || !json_is_object(rs.json))
		sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot ask the engine for "
		    "its runtimes", err);
	else
		o = json_incref(rs.json);
	sbx_http_resp_release(&rs);
	return o;
}

static int
has_runtime(const json_t *info, const char *runtime, struct sbx_err *err)
{
	json_t *rts = json_object_get(info, "Runtimes");
	char known[128] = "";
	const char *k;
	json_t *v;
	size_t n;

	if (json_object_get(rts, runtime))
		return 0;
	sbx_err_set(err, SBX_EX_USAGE, "the engine knows no runtime '%s'",
	    runtime);
	json_object_foreach(rts, k, v) {
		n = strlen(known);
		snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "", k);
	}
	/* gVisor's package installs runsc but registers it nowhere. */
	if (!strcmp(runtime, "runsc"))
		sbx_err_hint(err, "register gVisor with the engine: sudo runsc "
		    "install (it adds runsc to /etc/docker/daemon.json), then "
		    "sudo systemctl restart docker; it has: %s", known);
	else
		sbx_err_hint(err, "the engine has: %s (more are registered in "
		    "/etc/docker/daemon.json's \"runtimes\")", known);
	return -1;
}

/* POST /images/create streams progress; a failure comes as an "error"
 * line in it, after a 200. */
static int
pull(struct dk *d, const char *image, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	char *q = sbx_http_escape(image), *e;
	int rc = 0;

	if (sbx_docker_req(d, "POST", NULL, &rs, err,
	    "/images/create?fromImage=%s",
	    q) < 0) {
		free(q);
		return -1;
	}
	free(q);
	if (rs.status != 200)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot pull '%s': %s "
		    "(status %ld)", image, sbx_docker_msg(&rs), rs.status);
	else if (rs.body.data && (e = strstr(rs.body.data, "\"error\":")))
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot pull '%s': %.300s",
		    image, e + 8);
	if (rc < 0)
		sbx_err_hint(err, "offline or no registry? build it (docker "
		    "build -t %s .), docker load it, or give a root filesystem "
		    "directory: --image ./DIR", image);
	sbx_http_resp_release(&rs);
	return rc;
}

/* Remove a container whatever its state; 404 counts as done. */
static int
dk_remove(struct dk *d, const char *id, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	int rc = 0;

	if (sbx_docker_req(d, "DELETE", NULL, &rs, err,
	    "/containers/%s?force=1&v=1",
	    id) < 0)
		return -1;
	if (rs.status == 404)
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'", id);
	else if (rs.status >= 300 && !(rs.status == 409 &&
	    strstr(sbx_docker_msg(&rs), "already in progress")))
		rc = sbx_docker_fail(&rs, SBX_EX_FAIL,
		    "cannot remove the container",
		    err);
	sbx_http_resp_release(&rs);
	return rc;
}

/* Header injection: the variables that make clients that do not read
 * /etc/ssl/certs trust the sandbox's CA, which sbx-netd makes and
 * lib/docker/ca.c puts there. A local sandbox's come before --env, which
 * replaces them; the engine keeps both of a name, and the first is the
 * one a process sees, so one of --env's names is left out here. */
static void
ca_env(json_t *env, char *const *user)
{
	static const char *const vars[] = {"SSL_CERT_FILE=" CA_BUNDLE,
	    "REQUESTS_CA_BUNDLE=" CA_BUNDLE, "NODE_EXTRA_CA_CERTS=" CA_PEM};
	size_t i, j, n;

	for (i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		n = strcspn(vars[i], "=") + 1;
		for (j = 0; user && user[j]; j++)
			if (!strncmp(user[j], vars[i], n))
				break;
		if (!user || !user[j])
			json_array_append_new(env, json_string(vars[i]));
	}
}

/* netroot: where its network directory goes, for a container with
 * rules or ports; NULL: Docker's bridge (allow) or no network (deny).
 * agent: its agent's directory (agent.c), init the sbx-init there; NULL:
 * docker's init, execs through the engine. */
static json_t *
create_body(const struct sbx_spec *spec, const char *netroot,
    const char *agent, const char *init)
{
	json_t *b = json_object(), *hc = json_object(), *labels = json_object();
	json_t *env = json_array(), *mounts = json_array();
	char t[32], *js;
	size_t i;

	snprintf(t, sizeof t, "%llu", (unsigned long long)spec->timeout);
	json_object_update(labels, spec->labels);
	json_object_set_new(labels, MANAGED, json_string("1"));
	json_object_set_new(labels, "io.sbx.timeout", json_string(t));
	if (netroot)
		json_object_set_new(labels, NET_LABEL, json_string(netroot));
	/* What a resume after a stop starts again. */
	if (spec->start && (js = json_dumps(spec->start, JSON_COMPACT))) {
		json_object_set_new(labels, START_LABEL, json_string(js));
		free(js);
	}
	if (spec->name) {
		json_object_set_new(labels, "io.sbx.named", json_string("1"));
		json_object_set_new(b, "Hostname", json_string(spec->name));
	}
	if (netroot && json_array_size(spec->net_inject))
		ca_env(env, spec->env);
	for (i = 0; spec->env && spec->env[i]; i++)
		json_array_append_new(env, json_string(spec->env[i]));
	json_object_set_new(b, "Image", json_string(spec->image));
	if (agent) {
		char *run = sbx_xasprintf("%s/run", agent);

		/* Our init in docker's place, the keep-alive its command. */
		json_object_set_new(labels, AGENT_LABEL, json_string(agent));
		json_object_set_new(b, "Entrypoint", json_pack("[ssssssss]",
		    AGENT_INIT, "--docker", AGENT_RUN, "--", "sh", "-c",
		    keepalive_sh, "sbx-keepalive"));
		/* Under /dev, a tmpfs of the runtime's: their mount points
		 * are never in the container's layer (a commit). */
		json_array_append_new(mounts, json_pack("{sssssssb}", "Type",
		    "bind", "Source", init, "Target", AGENT_INIT, "ReadOnly",
		    1));
		json_array_append_new(mounts, json_pack("{ssssss}", "Type",
		    "bind", "Source", run, "Target", AGENT_RUN));
		free(run);
	} else {
		json_object_set_new(b, "Entrypoint", json_pack("[ssss]", "sh",
		    "-c", keepalive_sh, "sbx-keepalive"));
	}
	json_object_set_new(b, "Cmd", json_pack("[s]", t));
	json_object_set_new(b, "Env", env);
	json_object_set_new(b, "Labels", labels);
	json_object_set_new(b, "WorkingDir", json_string(spec->workdir));
	/* The workdir is a volume of its own (removed with the container):
	 * gVisor caches its root filesystem and would not see what
	 * sbx-sync puts there through the engine, but a mount it checks
	 * again. "/" cannot be one. */
	if (strcmp(spec->workdir, "/"))
		json_object_set_new(b, "Volumes", json_pack("{s{}}",
		    spec->workdir));
	json_object_set_new(b, "AttachStdin", json_false());
	json_object_set_new(b, "AttachStdout", json_false());
	json_object_set_new(b, "AttachStderr", json_false());
	json_object_set_new(hc, "Init", json_boolean(!agent));
	json_object_set_new(hc, "CapDrop", json_pack("[s]", "ALL"));
	json_object_set_new(hc, "SecurityOpt", json_pack("[s]",
	    "no-new-privileges"));
	/* With rules or ports, the only way out (or in) is sbx-netd's,
	 * which it attaches once the container runs. */
	json_object_set_new(hc, "NetworkMode", json_string(spec->network ==
	    SBX_NET_ALLOW && !netroot ? "default" : "none"));
	/* As the local backend's: no swap beyond the limit, and /dev/shm
	 * within it (else the engine's 64 MiB). */
	if (spec->memory) {
		json_object_set_new(hc, "Memory", json_integer((json_int_t)
		    spec->memory));
		json_object_set_new(hc, "MemorySwap", json_integer((json_int_t)
		    spec->memory));
		json_object_set_new(hc, "ShmSize", json_integer((json_int_t)
		    sbx_limits_shm(spec->memory)));
	}
	if (spec->cpus_milli)
		json_object_set_new(hc, "NanoCpus", json_integer((json_int_t)
		    spec->cpus_milli * 1000000));
	if (spec->pids)
		json_object_set_new(hc, "PidsLimit", json_integer((json_int_t)
		    spec->pids));
	if (spec->runtime)
		json_object_set_new(hc, "Runtime", json_string(spec->runtime));
	/* --disk: the storage driver's quota, where it has one (limits.disk's
	 * default is not asked of an engine, most of whose drivers cannot). */
	if (spec->disk && !spec->disk_default) {
		char size[32];

		snprintf(size, sizeof size, "%llu",
		    (unsigned long long)spec->disk);
		json_object_set_new(hc, "StorageOpt", json_pack("{ss}", "size",
		    size));
	}
	/* --volume: the engine's named volumes (made first, as sbx's). */
	if (spec->volumes) {
		json_t *v;

		json_array_foreach(spec->volumes, i, v)
			json_array_append_new(mounts, json_pack("{sssOsO}",
			    "Type", "volume", "Source", json_object_get(v,
			    "name"), "Target", json_object_get(v, "path")));
	}
	if (json_array_size(mounts))
		json_object_set_new(hc, "Mounts", mounts);
	else
		json_decref(mounts);
	json_object_set_new(b, "HostConfig", hc);
	return b;
}

static int
dir_here(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int
docker_create(const struct sbx_spec *spec, json_t **ref, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct sbx_spec sp = *spec;
	struct dk d;
	json_t *body = NULL, *info = NULL, *c = NULL, *cref, *snap = NULL;
	char *id = NULL, *q = NULL, *netroot = NULL, *tag = NULL;
	char *agent = NULL, *init = NULL;
	size_t i;
	int rc = -1;

	*ref = NULL;
	if (!spec->image || !strcmp(spec->image, "host"))
		return sbx_err_set(err, SBX_EX_USAGE, "backend 'docker' needs "
		    "--image (an image of the engine, or a directory ./DIR)");
	if (!sbx_path_plain(spec->workdir))
		return sbx_err_set(err, SBX_EX_USAGE, "invalid workdir '%s' "
		    "(want an absolute, plain path)", spec->workdir);
	if (image_is_dir(spec->image) && !sbx_docker_import)
		return sbx_err_set(err, SBX_EX_FAIL, "this tool cannot import "
		    "a directory (sbx-create does)");
	if (sbx_docker_open(&d, NULL, err) < 0) {
		/* Not the other tools': they ask for a sandbox made here. */
		if (!strncmp(err->msg, "cannot reach", 12))
			sbx_err_hint(err, "start one: sudo systemctl start "
			    "docker (Debian's package docker.io), or set "
			    "DOCKER_HOST or the config key docker.host to one "
			    "that runs");
		return -1;
	}
	if (sbx_docker_net_wanted(spec))
		netroot = sbx_docker_net_root();
	if ((spec->runtime || netroot) && !(info = engine_info(&d, err)))
		goto out;
	if (spec->runtime && has_runtime(info, spec->runtime, err) < 0)
		goto out;
	if (netroot && sbx_docker_net_check(&d, info, spec, err) < 0)
		goto out;
	if (spec->from) {
		/* The snapshot's image: its files, env and workdir. */
		if (!(snap = sbx_docker_snap_find(&d, spec->from, err)))
			goto out;
		if (strcmp(spec->image, sbx_json_str(snap, "image") ?
		    sbx_json_str(snap, "image") : "")) {
			sbx_err_set(err, SBX_EX_USAGE, "a docker sandbox from "
			    "snapshot '%s' has its image '%s' (no --image)",
			    spec->from, sbx_json_str(snap, "image") ?
			    sbx_json_str(snap, "image") : "?");
			goto out;
		}
		sp.image = sbx_json_str(snap, "image_id");
	} else if (image_is_dir(spec->image)) {
		/* Nothing to pull: the directory is the image. */
		if (sbx_docker_import(&d, spec->image, &tag, err) < 0)
			goto out;
		sp.image = tag;
	} else if (spec->pull && pull(&d, spec->image, err) < 0)
		goto out;
	for (i = 0; i < json_array_size(spec->volumes); i++)
		if (sbx_docker_volume_make(&d, sbx_json_str(json_array_get(
		    spec->volumes, i), "name"), NULL, err) < 0)
			goto out;
	if (sbx_docker_agent_make(&d, spec, &agent, &init, err) < 0)
		goto out;
	body = create_body(&sp, netroot, agent, init);
	q = spec->name ? sbx_http_escape(spec->name) : NULL;
	if (sbx_docker_req(&d, "POST", body, &rs, err, "/containers/create%s%s",
	    q ? "?name=" : "", q ? q : "") < 0)
		goto out;
	/* An engine whose files are not ours (a VM's, a socket forwarded
	 * from elsewhere) has no such paths to bind: its execs go through
	 * it, as without the agent. */
	if (agent && rs.status == 400 && strstr(sbx_docker_msg(&rs),
	    "bind source path does not exist")) {
		sbx_http_resp_release(&rs);
		sbx_rmtree(agent);
		free(agent);
		agent = NULL;
		json_object_clear(body);
		json_decref(body);
		body = create_body(&sp, netroot, NULL, NULL);
		if (sbx_docker_req(&d, "POST", body, &rs, err,
		    "/containers/create%s%s", q ? "?name=" : "", q ? q : "") <
		    0)
			goto out;
	}
	if (rs.status == 404) {
		sbx_err_set(err, SBX_EX_FAIL, "no such image '%s' (pull it, or "
		    "use --pull)", spec->image);
		if (dir_here(spec->image))
			sbx_err_hint(err, "'%s' is a directory here: give it as "
			    "--image ./%s to import it", spec->image,
			    spec->image);
		else
			sbx_err_hint(err, "pull it (--pull, or docker pull %s), "
			    "build it (docker build -t %s .), or import a root "
			    "filesystem directory: --image ./DIR", spec->image,
			    spec->image);
		goto out;
	}
	if (rs.status == 409) {
		sbx_err_set(err, SBX_EX_FAIL, "the name '%s' is in use",
		    spec->name ? spec->name : "?");
		goto out;
	}
	if (rs.status != 201 && spec->disk && !spec->disk_default &&
	    strstr(sbx_docker_msg(&rs), "storage")) {
		/* overlay2 but on xfs with pquota, vfs likewise, ... */
		sbx_err_set(err, SBX_EX_USAGE, "the engine's storage driver "
		    "cannot limit disk (--disk): %s", sbx_docker_msg(&rs));
		goto out;
	}
	if (rs.status != 201 || !sbx_json_str(rs.json, "Id")) {
		sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot create a container",
		    err);
		goto out;
	}
	id = sbx_xstrdup(sbx_json_str(rs.json, "Id"));
	sbx_http_resp_release(&rs);
	if (sbx_docker_req(&d, "POST", NULL, &rs, err, "/containers/%s/start",
	    id) < 0 ||
	    (rs.status != 204 && rs.status != 304 &&
	    sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot start the container",
	    err))) {
		struct sbx_err rerr;

		/* Nothing half-made is left behind. */
		dk_remove(&d, id, &rerr);
		goto out;
	}
	if (netroot) {
		struct sbx_err rerr;

		cref = json_pack("{ss}", "id", id);
		rc = sbx_docker_find(&d, cref, &c, err);
		json_decref(cref);
		if (rc < 0 || sbx_docker_net_start(&d, c, spec, err) < 0) {
			dk_remove(&d, id, &rerr);
			rc = -1;
			goto out;
		}
		rc = -1;
	}
	*ref = json_pack("{ssssss}", "backend", "docker", "id", id, "endpoint",
	    d.endpoint);
	/* The image a directory became, for docker's own tools. */
	if (tag)
		json_object_set_new(*ref, "image", json_string(tag));
	rc = 0;
	free(agent);
	agent = NULL;
out:
	/* Not made: nor is its agent's directory. */
	if (agent)
		sbx_rmtree(agent);
	free(agent);
	free(init);
	sbx_http_resp_release(&rs);
	if (body) {
		/* It holds the values of --env. */
		json_object_clear(body);
		json_decref(body);
	}
	json_decref(info);
	json_decref(c);
	json_decref(snap);
	free(netroot);
	free(q);
	free(id);
	free(tag);
	sbx_docker_close(&d);
	return rc;
}

/* --- kill, info, list, pause ---------------------------------------------- */

int
sbx_docker_post(struct dk *d, const char *id, const char *verb,
    const char *what, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	int rc = 0;

	if (sbx_docker_req(d, "POST", NULL, &rs, err, "/containers/%s/%s", id,
	    verb) < 0)
		return -1;
	if (rs.status >= 300 && rs.status != 304)
		rc = sbx_docker_fail(&rs, SBX_EX_FAIL, what, err);
	sbx_http_resp_release(&rs);
	return rc;
}

/* The container of ref, which must be one of ours; its full id in *id,
 * and in ref. */
static int
ref_open_id(struct dk *d, json_t *ref, json_t **c, const char **id,
    struct sbx_err *err)
{
	if (sbx_docker_ref_open(d, ref, c, err) < 0)
		return -1;
	*id = sbx_json_str(*c, "Id");
	json_object_set_new(ref, "id", json_string(*id));
	return 0;
}

/* kill --keep: the container stays, with its files, ended by
 * KILLED_SIGNAL (its init passes it to the keep-alive). One that has
 * ended already is left as it is. */
static int
kill_keep(struct dk *d, const char *id, const char *st, struct sbx_err *err)
{
	if (strcmp(st, "running") && strcmp(st, "paused"))
		return 0;
	if (sbx_docker_post(d, id, "kill?signal=" KILLED_SIGNAL, "cannot kill "
	    "the container", err) < 0)
		return -1;
	return sbx_docker_post(d, id, "wait?condition=not-running", "cannot "
	    "wait for the container", err);
}

static int
docker_kill(json_t *ref, int keep, struct sbx_err *err)
{
	struct dk d;
	json_t *c;
	const char *id;
	int rc;

	if (ref_open_id(&d, ref, &c, &id, err) < 0)
		return -1;
	/* Its network first: none at all is what a container with rules
	 * falls back to. */
	sbx_docker_net_stop(c, 0);
	/* runsc can neither signal nor remove a paused container. */
	if (!strcmp(sbx_docker_status_of(c), "paused") && sbx_docker_post(&d,
	    id, "unpause", "cannot unpause the container", err) < 0)
		rc = -1;
	else if (keep)
		rc = kill_keep(&d, id, sbx_docker_status_of(c), err);
	else
		rc = dk_remove(&d, id, err);
	/* Its directory goes with it; kept with the files, it holds the
	 * log. So does its agent's. */
	if (!keep && (rc == 0 || err->code == SBX_EX_NOSANDBOX)) {
		sbx_docker_net_stop(c, 1);
		sbx_docker_agent_remove(c);
	}
	json_decref(c);
	sbx_docker_close(&d);
	return rc;
}

/* The CPU time the container's cgroup used, from the engine's stats
 * (sbx-cost prices it); stays null where it has none. */
static void
cpu_stats(struct dk *d, const json_t *c, json_t *o)
{
	struct sbx_http_resp rs = {0};
	struct sbx_err e = {0};
	json_t *v;
	const char *st = sbx_docker_status_of(c);

	if (strcmp(st, "running") && strcmp(st, "paused"))
		return;
	if (sbx_docker_req(d, "GET", NULL, &rs, &e,
	    "/containers/%s/stats?stream=false&one-shot=true",
	    sbx_json_str(c, "Id")) == 0 && rs.status == 200) {
		v = json_object_get(json_object_get(json_object_get(rs.json,
		    "cpu_stats"), "cpu_usage"), "total_usage");
		if (json_is_integer(v) && json_integer_value(v) > 0)
			json_object_set_new(o, "cpu_s", json_real((double)
			    json_integer_value(v) / 1e9));
	}
	sbx_http_resp_release(&rs);
}

static json_t *
docker_info(const json_t *ref, struct sbx_err *err)
{
	struct dk d;
	json_t *c, *o;

	if (sbx_docker_ref_open(&d, ref, &c, err) < 0)
		return NULL;
	o = sbx_docker_info_of(c, d.endpoint);
	cpu_stats(&d, c, o);
	json_decref(c);
	sbx_docker_close(&d);
	return o;
}

static int
docker_list(int (*fn)(json_t *info, void *arg), void *arg, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	struct dk d;
	json_t *one, *ref, *c, *o;
	size_t i;
	int rc = 0;
	char *q;

	if (sbx_docker_open(&d, NULL, err) < 0)
		return -1;
	q = sbx_http_escape("{\"label\":[\"" MANAGED "=1\"]}");
	rc = sbx_docker_req(&d, "GET", NULL, &rs, err, "/containers/json?all=1&"
	    "filters=%s", q);
	free(q);
	if (rc < 0)
		goto out;
	if (rs.status != 200 || !json_is_array(rs.json)) {
		rc = sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot list containers",
		    err);
		sbx_http_resp_release(&rs);
		goto out;
	}
	json_array_foreach(rs.json, i, one) {
		struct sbx_err e2;

		ref = json_pack("{ss}", "id", sbx_json_str(one, "Id"));
		/* One that went meanwhile is not listed. */
		if (sbx_docker_find(&d, ref, &c, &e2) == 0) {
			o = sbx_docker_info_of(c, d.endpoint);
			if (!rc && fn(o, arg) < 0)
				rc = -1;
			json_decref(o);
			json_decref(c);
		}
		json_decref(ref);
	}
	sbx_http_resp_release(&rs);
out:
	sbx_docker_close(&d);
	return rc;
}

static int
docker_pause(json_t *ref, int stop, struct sbx_err *err)
{
	struct dk d;
	json_t *c;
	const char *st, *id;
	int rc = 0;

	if (ref_open_id(&d, ref, &c, &id, err) < 0)
		return -1;
	st = sbx_docker_status_of(c);
	if (!strcmp(st, "stopped") || (!stop && !strcmp(st, "paused")))
		goto out; /* already paused: nothing to do */
	if (strcmp(st, "running") && strcmp(st, "paused")) {
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is "
		    "not running", id);
		goto out;
	}
	if (stop) {
		if (!strcmp(st, "paused") && sbx_docker_post(&d, id, "unpause",
		    "cannot unpause the container", err) < 0)
			rc = -1;
		else
			rc = sbx_docker_post(&d, id, "stop?t=2", "cannot stop "
			    "the container", err);
	} else {
		rc = sbx_docker_post(&d, id, "pause", "cannot pause the "
		    "container", err);
	}
out:
	json_decref(c);
	sbx_docker_close(&d);
	return rc;
}

/* A stopped container started again, its network too: a new init in a
 * new namespace, for a new sbx-netd. */
static int
start_again(struct dk *d, const char *id, struct sbx_err *err)
{
	json_t *c, *ref;
	int rc;

	if (sbx_docker_post(d, id, "start", "cannot start the container",
	    err) < 0)
		return -1;
	ref = json_pack("{ss}", "id", id);
	rc = sbx_docker_find(d, ref, &c, err);
	json_decref(ref);
	if (rc < 0)
		return -1;
	if ((rc = sbx_docker_net_start(d, c, NULL, err)) < 0) {
		struct sbx_err e2;

		/* Not running without the network it was made with. */
		sbx_docker_post(d, id, "stop?t=2", "cannot stop the container",
		    &e2);
	}
	json_decref(c);
	return rc;
}

/* A container's processes end with its stop: its start command
 * (START_LABEL) is started again (its post-create is not). */
static int
restart(const json_t *ref, const json_t *c, struct sbx_err *err)
{
	return sbx_start_again(ref, sbx_json_str(json_object_get(
	    json_object_get(c, "Config"), "Labels"), START_LABEL), err);
}

static int
docker_resume(json_t *ref, struct sbx_err *err)
{
	struct dk d;
	json_t *c;
	const char *st, *id;
	int rc = 0;

	if (ref_open_id(&d, ref, &c, &id, err) < 0)
		return -1;
	st = sbx_docker_status_of(c);
	if (!strcmp(st, "paused"))
		rc = sbx_docker_post(&d, id, "unpause", "cannot unpause the "
		    "container", err);
	else if (!strcmp(st, "stopped") && !(rc = start_again(&d, id, err)))
		rc = restart(ref, c, err);
	else if (strcmp(st, "running"))
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is "
		    "%s", id, st);
	json_decref(c);
	sbx_docker_close(&d);
	return rc;
}

/* The image's Entrypoint and Cmd, which the container's own replace. */
static json_t *
docker_image_cmd(const json_t *ref, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct dk d;
	json_t *c, *a = NULL;
	const char *img;

	if (sbx_docker_ref_open(&d, ref, &c, err) < 0)
		return NULL;
	if (!(img = sbx_json_str(c, "Image")))
		goto out;
	if (sbx_docker_req(&d, "GET", NULL, &rs, err, "/images/%s/json",
	    img) < 0)
		goto out;
	if (rs.status != 200)
		sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot inspect the image",
		    err);
	else
		a = sbx_start_image_argv(json_object_get(rs.json, "Config"));
out:
	sbx_http_resp_release(&rs);
	json_decref(c);
	sbx_docker_close(&d);
	return a;
}

const struct sbx_backend_ops sbx_docker_ops = {
	.about = sbx_docker_about,
	.sweep = sbx_docker_agent_sweep,
	.pause = docker_pause,
	.resume = docker_resume,
	.create = docker_create,
	.exec = sbx_docker_exec,
	.kill = docker_kill,
	.list = docker_list,
	.info = docker_info,
	.files = &sbx_docker_files,
	.net_rules = sbx_docker_net_rules,
	.net_log = sbx_docker_net_log,
	.ports = sbx_docker_ports,
	.answers = sbx_docker_answers,
	.image_cmd = docker_image_cmd,
	.shell = sbx_shell_remote,
	.stats = sbx_docker_stats,
	.volume = sbx_docker_volume,
	.snapshot = sbx_docker_snapshot,
	.snapshots = sbx_docker_snapshots,
	.snap_export = sbx_docker_snap_export_op,
};
