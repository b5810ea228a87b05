/* docker.c - the docker backend: containers of a Docker engine, driven
 * through its Engine API over libcurl (no docker CLI) */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "execio.h"
#include "internal.h"

#define API_MAJOR 1
#define API_WANT 41   /* written against 1.41 (Docker 20.10) */
#define API_MIN 35    /* exec's WorkingDir */
#define DEFAULT_HOST "unix:///var/run/docker.sock"
#define MANAGED "io.sbx.managed"
#define LABEL_PREFIX "io.sbx."
#define EXPIRED_CODE 124 /* how the keep-alive says the idle time ran out */
/* sbx-kill --keep ends the keep-alive with this signal, so that the exit
 * code tells it from a stop (sbx-pause) and from a death. */
#define KILLED_SIGNAL "SIGUSR1"
#define KILLED_CODE (128 + SIGUSR1)
#define TAG_VAR "SBX_EXEC_TAG"

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

/* Sends signal $1 to every process whose environment holds the tag $2:
 * all an exec started, even what left its session. In pid order, the
 * order they came in: the command gets it before its children, whose end
 * it might otherwise see first and exit on, its own signal still on the
 * way (a shell in `wait`). Rounds until none is left, for what forked
 * meanwhile. Needs sh, tr, sort and kill. */
#define KILLTAG_SH \
    "n=0\n" \
    "while [ $n -lt 20 ]; do\n" \
    "\tpids=$(for d in /proc/[0-9]*; do\n" \
    "\t\tcase \"$(tr '\\0' '\\n' <\"$d/environ\" 2>/dev/null)\" in\n" \
    "\t\t*\"" TAG_VAR "=$2\"*) echo \"${d#/proc/}\" ;;\n" \
    "\t\tesac\n" \
    "\tdone | sort -n)\n" \
    "\t[ -n \"$pids\" ] || exit 0\n" \
    "\tkill -\"$1\" $pids 2>/dev/null\n" \
    "\t[ \"$1\" = 9 ] || exit 0\n" \
    "\tn=$((n + 1))\n" \
    "\tsleep 0.05\n" \
    "done\n"
static const char killtag_sh[] = KILLTAG_SH;

/* With -t: the engine can size an exec's terminal only once the exec
 * runs (before API 1.42), and by then the command may have looked at it
 * (a 0x0 terminal). So the terminal is sized in the sandbox first, with
 * rows $1 and columns $2, and the command takes the shell's place. */
static const char tty_sh[] =
    "stty rows \"$1\" cols \"$2\" 2>/dev/null\n"
    "shift 2\n"
    "exec \"$@\"\n";

struct dk {
	struct sbx_http *h;
	char *endpoint;
	int minor; /* the API version spoken: 1.minor */
};

static void
dk_close(struct dk *d)
{
	sbx_http_free(d->h);
	free(d->endpoint);
	memset(d, 0, sizeof *d);
}

/* Reach the engine of endpoint (NULL: $DOCKER_HOST, or the default) and
 * agree on an API version. */
static int
dk_open(struct dk *d, const char *endpoint, struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "GET", .path = "/_ping",
	    .in_fd = -1, .out_fd = -1, .idempotent = 1};
	struct sbx_http_resp rs;
	const char *v, *env = getenv("DOCKER_HOST");
	char ver[32];
	int major, minor;

	memset(d, 0, sizeof *d);
	if (!endpoint)
		endpoint = env && *env ? env : DEFAULT_HOST;
	d->endpoint = sbx_xstrdup(endpoint);
	if (!(d->h = sbx_http_new(endpoint, err)))
		goto fail;
	if (sbx_http_do(d->h, &rq, &rs, err) < 0) {
		char why[sizeof err->msg];
		const char *p = strstr(err->msg, "': ");

		snprintf(why, sizeof why, "%s", p ? p + 3 : err->msg);
		sbx_err_set(err, SBX_EX_FAIL, "cannot reach the Docker engine "
		    "at '%s': %s", endpoint, why);
		goto fail;
	}
	/* The cheapest request there is, and it says the version. */
	v = sbx_http_header(&rs, "Api-Version", ver, sizeof ver);
	if (rs.status != 200 || !v || sscanf(v, "%d.%d", &major, &minor) != 2) {
		sbx_err_set(err, SBX_EX_FAIL, "'%s' does not answer as a "
		    "Docker engine (status %ld)", endpoint, rs.status);
		sbx_http_resp_release(&rs);
		goto fail;
	}
	sbx_http_resp_release(&rs);
	if (major != API_MAJOR || minor < API_MIN) {
		sbx_err_set(err, SBX_EX_FAIL, "the Docker engine at '%s' "
		    "speaks API %d.%d; sbx needs %d.%d or later", endpoint,
		    major, minor, API_MAJOR, API_MIN);
		goto fail;
	}
	d->minor = minor < API_WANT ? minor : API_WANT;
	return 0;
fail:
	dk_close(d);
	return -1;
}

/* A request to the versioned API; fmt gives the path. */
static int __attribute__((format(printf, 6, 7)))
dk_req(struct dk *d, const char *method, json_t *body,
    struct sbx_http_resp *rs, struct sbx_err *err, const char *fmt, ...)
{
	struct sbx_http_req rq = {.method = method, .body = body, .in_fd = -1,
	    .out_fd = -1};
	char *path, *full;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	if (vasprintf(&path, fmt, ap) < 0)
		path = NULL;
	va_end(ap);
	if (!path)
		return sbx_err_set(err, SBX_EX_FAIL, "out of memory");
	full = sbx_xasprintf("/v%d.%d%s", API_MAJOR, d->minor, path);
	rq.path = full;
	rq.idempotent = !strcmp(method, "GET");
	rc = sbx_http_do(d->h, &rq, rs, err);
	free(full);
	free(path);
	return rc;
}

/* The engine's own words for a failed request. */
static const char *
dk_msg(const struct sbx_http_resp *rs)
{
	const char *m = sbx_json_str(rs->json, "message");

	return m ? m : rs->body.data ? rs->body.data : "no reason given";
}

static int
dk_fail(const struct sbx_http_resp *rs, int code, const char *what,
    struct sbx_err *err)
{
	return sbx_err_set(err, code, "%s: %s (status %ld)", what, dk_msg(rs),
	    rs->status);
}

static int
valid_ref_id(const char *id)
{
	return id && *id && strlen(id) < 128 && strspn(id,
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
	    == strlen(id);
}

/* Inspect the container a ref names, which must be one of ours: its
 * inspect object in *out, and the ref's id made its full one. */
static int
dk_find(struct dk *d, const json_t *ref, json_t **out, struct sbx_err *err)
{
	const char *id = sbx_json_str(ref, "id"), *m;
	struct sbx_http_resp rs;
	json_t *labels;

	*out = NULL;
	if (!valid_ref_id(id))
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    id ? id : "?");
	if (dk_req(d, "GET", NULL, &rs, err, "/containers/%s/json", id) < 0)
		return -1;
	if (rs.status == 404) {
		sbx_http_resp_release(&rs);
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    id);
	}
	if (rs.status != 200 || !json_is_object(rs.json)) {
		dk_fail(&rs, SBX_EX_FAIL, "cannot inspect a container", err);
		sbx_http_resp_release(&rs);
		return -1;
	}
	labels = json_object_get(json_object_get(rs.json, "Config"), "Labels");
	m = sbx_json_str(labels, MANAGED);
	if (!m || strcmp(m, "1")) {
		sbx_http_resp_release(&rs);
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' "
		    SBX_NOT_OURS "container", id);
	}
	*out = json_incref(rs.json);
	sbx_http_resp_release(&rs);
	return 0;
}

static int
ref_open(struct dk *d, const json_t *ref, json_t **c, struct sbx_err *err)
{
	if (dk_open(d, sbx_json_str(ref, "endpoint"), err) < 0)
		return -1;
	if (dk_find(d, ref, c, err) < 0) {
		dk_close(d);
		return -1;
	}
	return 0;
}

/* "2026-12-02T16:21:49.582636182Z" into seconds since the epoch. */
static long long
parse_time(const char *s)
{
	struct tm tm = {0};

	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return (long long)timegm(&tm);
}

static const char *
status_of(const json_t *c)
{
	json_t *st = json_object_get(c, "State");
	const char *s = sbx_json_str(st, "Status");
	long long code = sbx_json_int(st, "ExitCode", 0);

	if (!s)
		return "dead";
	if (json_is_true(json_object_get(st, "Paused")) || !strcmp(s,
	    "paused"))
		return "paused";
	if (!strcmp(s, "running") || !strcmp(s, "restarting") ||
	    !strcmp(s, "created"))
		return "running";
	if (!strcmp(s, "removing"))
		return "killed";
	if (code == EXPIRED_CODE)
		return "expired";
	if (code == KILLED_CODE)
		return "killed";
	/* Stopped on purpose (sbx-pause --mode stop): docker's init ends on
	 * the SIGTERM it forwards. A SIGKILL, or an OOM kill, is a death. */
	if (code == 128 + SIGTERM)
		return "stopped";
	return "dead";
}

/* The listing entry, shaped as the local backend's. */
static json_t *
info_of(const json_t *c, const char *endpoint)
{
	json_t *cfg = json_object_get(c, "Config"), *o = json_object();
	json_t *labels = json_object_get(cfg, "Labels"), *mine = json_object();
	const char *k, *name = sbx_json_str(c, "Name");
	long long now = sbx_now(), created;
	json_t *v;
	char ts[32];

	json_object_foreach(labels, k, v)
		if (strncmp(k, LABEL_PREFIX, strlen(LABEL_PREFIX)))
			json_object_set(mine, k, v);
	created = parse_time(sbx_json_str(c, "Created"));
	json_object_set_new(o, "backend", json_string("docker"));
	json_object_set_new(o, "id", json_string(sbx_json_str(c, "Id")));
	json_object_set_new(o, "name", name && name[0] == '/' && name[1] &&
	    sbx_json_str(labels, "io.sbx.named") ? json_string(name + 1) :
	    json_null());
	json_object_set_new(o, "status", json_string(status_of(c)));
	json_object_set(o, "image", json_object_get(cfg, "Image") ?
	    json_object_get(cfg, "Image") : json_null());
	json_object_set(o, "workdir", json_object_get(cfg, "WorkingDir") ?
	    json_object_get(cfg, "WorkingDir") : json_null());
	sbx_time_fmt(created, ts, sizeof ts);
	json_object_set_new(o, "created_at", json_string(ts));
	json_object_set_new(o, "created_at_epoch", json_integer(created));
	/* The engine does not say when an exec last ran: never "idle". */
	json_object_set_new(o, "last_activity_at", json_null());
	json_object_set_new(o, "last_activity_epoch", json_null());
	json_object_set_new(o, "age", json_integer(now - created));
	json_object_set_new(o, "idle", json_null());
	json_object_set_new(o, "timeout", json_integer(strtoll(
	    sbx_json_str(labels, "io.sbx.timeout") ? sbx_json_str(labels,
	    "io.sbx.timeout") : "0", NULL, 10)));
	json_object_set_new(o, "labels", mine);
	json_object_set_new(o, "processes", json_null());
	json_object_set_new(o, "memory_bytes", json_null());
	json_object_set_new(o, "cpu_s", json_null());
	json_object_set_new(o, "dir", json_null());
	json_object_set_new(o, "runtime", json_incref(json_object_get(
	    json_object_get(c, "HostConfig"), "Runtime")));
	json_object_set_new(o, "endpoint", json_string(endpoint));
	return o;
}

/* --- create --------------------------------------------------------------- */

static int
has_runtime(struct dk *d, const char *runtime, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	int rc;

	if (dk_req(d, "GET", NULL, &rs, err, "/info") < 0)
		return -1;
	if (rs.status != 200) {
		dk_fail(&rs, SBX_EX_FAIL, "cannot ask the engine for its "
		    "runtimes", err);
		sbx_http_resp_release(&rs);
		return -1;
	}
	rc = json_object_get(json_object_get(rs.json, "Runtimes"), runtime) ?
	    0 : sbx_err_set(err, SBX_EX_USAGE, "the engine knows no runtime "
	    "'%s'", runtime);
	sbx_http_resp_release(&rs);
	return rc;
}

/* POST /images/create streams progress; a failure comes as an "error"
 * line in it, after a 200. */
static int
pull(struct dk *d, const char *image, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	char *q = sbx_http_escape(image), *e;
	int rc = 0;

	if (dk_req(d, "POST", NULL, &rs, err, "/images/create?fromImage=%s",
	    q) < 0) {
		free(q);
		return -1;
	}
	free(q);
	if (rs.status != 200)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot pull '%s': %s "
		    "(status %ld)", image, dk_msg(&rs), rs.status);
	else if (rs.body.data && (e = strstr(rs.body.data, "\"error\":")))
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot pull '%s': %.300s",
		    image, e + 8);
	sbx_http_resp_release(&rs);
	return rc;
}

/* Remove a container whatever its state; 404 counts as done. */
static int
dk_remove(struct dk *d, const char *id, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	int rc = 0;

	if (dk_req(d, "DELETE", NULL, &rs, err, "/containers/%s?force=1&v=1",
	    id) < 0)
		return -1;
	if (rs.status == 404)
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'", id);
	else if (rs.status >= 300 && !(rs.status == 409 &&
	    strstr(dk_msg(&rs), "already in progress")))
		rc = dk_fail(&rs, SBX_EX_FAIL, "cannot remove the container",
		    err);
	sbx_http_resp_release(&rs);
	return rc;
}

static json_t *
create_body(const struct sbx_spec *spec)
{
	json_t *b = json_object(), *hc = json_object(), *labels = json_object();
	json_t *env = json_array();
	char t[32];
	size_t i;

	snprintf(t, sizeof t, "%llu", (unsigned long long)spec->timeout);
	json_object_update(labels, spec->labels);
	json_object_set_new(labels, MANAGED, json_string("1"));
	json_object_set_new(labels, "io.sbx.timeout", json_string(t));
	if (spec->name) {
		json_object_set_new(labels, "io.sbx.named", json_string("1"));
		json_object_set_new(b, "Hostname", json_string(spec->name));
	}
	for (i = 0; spec->env && spec->env[i]; i++)
		json_array_append_new(env, json_string(spec->env[i]));
	json_object_set_new(b, "Image", json_string(spec->image));
	json_object_set_new(b, "Entrypoint", json_pack("[ssss]", "sh", "-c",
	    keepalive_sh, "sbx-keepalive"));
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
	json_object_set_new(hc, "Init", json_true());
	json_object_set_new(hc, "CapDrop", json_pack("[s]", "ALL"));
	json_object_set_new(hc, "SecurityOpt", json_pack("[s]",
	    "no-new-privileges"));
	json_object_set_new(hc, "NetworkMode", json_string(spec->network ==
	    SBX_NET_ALLOW ? "default" : "none"));
	if (spec->memory)
		json_object_set_new(hc, "Memory", json_integer((json_int_t)
		    spec->memory));
	if (spec->cpus_milli)
		json_object_set_new(hc, "NanoCpus", json_integer((json_int_t)
		    spec->cpus_milli * 1000000));
	if (spec->pids)
		json_object_set_new(hc, "PidsLimit", json_integer((json_int_t)
		    spec->pids));
	if (spec->runtime)
		json_object_set_new(hc, "Runtime", json_string(spec->runtime));
	json_object_set_new(b, "HostConfig", hc);
	return b;
}

static int
valid_workdir(const char *w)
{
	return w[0] == '/' && !strstr(w, "/../") && !strstr(w, "/./") &&
	    strlen(w) < 1024 && (strlen(w) < 3 || strcmp(w + strlen(w) - 3,
	    "/.."));
}

static int
docker_create(const struct sbx_spec *spec, json_t **ref, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct dk d;
	json_t *body = NULL;
	char *id = NULL, *q = NULL;
	int rc = -1;

	*ref = NULL;
	if (!spec->image || !strcmp(spec->image, "host"))
		return sbx_err_set(err, SBX_EX_USAGE, "backend 'docker' needs "
		    "--image (an image of the engine)");
	if (!valid_workdir(spec->workdir))
		return sbx_err_set(err, SBX_EX_USAGE, "invalid workdir '%s' "
		    "(want an absolute, plain path)", spec->workdir);
	if (dk_open(&d, NULL, err) < 0)
		return -1;
	if (spec->runtime && has_runtime(&d, spec->runtime, err) < 0)
		goto out;
	if (spec->pull && pull(&d, spec->image, err) < 0)
		goto out;
	body = create_body(spec);
	q = spec->name ? sbx_http_escape(spec->name) : NULL;
	if (dk_req(&d, "POST", body, &rs, err, "/containers/create%s%s",
	    q ? "?name=" : "", q ? q : "") < 0)
		goto out;
	if (rs.status == 404) {
		sbx_err_set(err, SBX_EX_FAIL, "no such image '%s' (pull it, or "
		    "use --pull)", spec->image);
		goto out;
	}
	if (rs.status == 409) {
		sbx_err_set(err, SBX_EX_FAIL, "the name '%s' is in use",
		    spec->name ? spec->name : "?");
		goto out;
	}
	if (rs.status != 201 || !sbx_json_str(rs.json, "Id")) {
		dk_fail(&rs, SBX_EX_FAIL, "cannot create a container", err);
		goto out;
	}
	id = sbx_xstrdup(sbx_json_str(rs.json, "Id"));
	sbx_http_resp_release(&rs);
	if (dk_req(&d, "POST", NULL, &rs, err, "/containers/%s/start",
	    id) < 0 ||
	    (rs.status != 204 && rs.status != 304 &&
	    dk_fail(&rs, SBX_EX_FAIL, "cannot start the container", err))) {
		struct sbx_err rerr;

		/* Nothing half-made is left behind. */
		dk_remove(&d, id, &rerr);
		goto out;
	}
	*ref = json_pack("{ssssss}", "backend", "docker", "id", id, "endpoint",
	    d.endpoint);
	rc = 0;
out:
	sbx_http_resp_release(&rs);
	if (body) {
		/* It holds the values of --env. */
		json_object_clear(body);
		json_decref(body);
	}
	free(q);
	free(id);
	dk_close(&d);
	return rc;
}

/* --- kill, info, list, pause ---------------------------------------------- */

/* POST /containers/ID/VERB; 304 (nothing to do) is no error. */
static int
dk_post(struct dk *d, const char *id, const char *verb, const char *what,
    struct sbx_err *err)
{
	struct sbx_http_resp rs;
	int rc = 0;

	if (dk_req(d, "POST", NULL, &rs, err, "/containers/%s/%s", id,
	    verb) < 0)
		return -1;
	if (rs.status >= 300 && rs.status != 304)
		rc = dk_fail(&rs, SBX_EX_FAIL, what, err);
	sbx_http_resp_release(&rs);
	return rc;
}

/* kill --keep: the container stays, with its files, ended by
 * KILLED_SIGNAL (its init passes it to the keep-alive). One that has
 * ended already is left as it is. */
static int
kill_keep(struct dk *d, const char *id, const char *st, struct sbx_err *err)
{
	if (strcmp(st, "running") && strcmp(st, "paused"))
		return 0;
	if (dk_post(d, id, "kill?signal=" KILLED_SIGNAL, "cannot kill the "
	    "container", err) < 0)
		return -1;
	return dk_post(d, id, "wait?condition=not-running", "cannot wait for "
	    "the container", err);
}

static int
docker_kill(json_t *ref, int keep, struct sbx_err *err)
{
	struct dk d;
	json_t *c;
	const char *id;
	int rc;

	if (ref_open(&d, ref, &c, err) < 0)
		return -1;
	id = sbx_json_str(c, "Id");
	json_object_set_new(ref, "id", json_string(id));
	/* runsc can neither signal nor remove a paused container. */
	if (!strcmp(status_of(c), "paused") && dk_post(&d, id, "unpause",
	    "cannot unpause the container", err) < 0)
		rc = -1;
	else if (keep)
		rc = kill_keep(&d, id, status_of(c), err);
	else
		rc = dk_remove(&d, id, err);
	json_decref(c);
	dk_close(&d);
	return rc;
}

static json_t *
docker_info(const json_t *ref, struct sbx_err *err)
{
	struct dk d;
	json_t *c, *o;

	if (ref_open(&d, ref, &c, err) < 0)
		return NULL;
	o = info_of(c, d.endpoint);
	json_decref(c);
	dk_close(&d);
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

	if (dk_open(&d, NULL, err) < 0)
		return -1;
	q = sbx_http_escape("{\"label\":[\"" MANAGED "=1\"]}");
	rc = dk_req(&d, "GET", NULL, &rs, err, "/containers/json?all=1&"
	    "filters=%s", q);
	free(q);
	if (rc < 0)
		goto out;
	if (rs.status != 200 || !json_is_array(rs.json)) {
		rc = dk_fail(&rs, SBX_EX_FAIL, "cannot list containers", err);
		sbx_http_resp_release(&rs);
		goto out;
	}
	json_array_foreach(rs.json, i, one) {
		struct sbx_err e2;

		ref = json_pack("{ss}", "id", sbx_json_str(one, "Id"));
		/* One that went meanwhile is not listed. */
		if (dk_find(&d, ref, &c, &e2) == 0) {
			o = info_of(c, d.endpoint);
			if (!rc && fn(o, arg) < 0)
				rc = -1;
			json_decref(o);
			json_decref(c);
		}
		json_decref(ref);
	}
	sbx_http_resp_release(&rs);
out:
	dk_close(&d);
	return rc;
}

static int
docker_pause(json_t *ref, int stop, struct sbx_err *err)
{
	struct dk d;
	json_t *c;
	const char *st, *id;
	int rc = 0;

	if (ref_open(&d, ref, &c, err) < 0)
		return -1;
	id = sbx_json_str(c, "Id");
	json_object_set_new(ref, "id", json_string(id));
	st = status_of(c);
	if (!strcmp(st, "stopped") || (!stop && !strcmp(st, "paused")))
		goto out; /* already paused: nothing to do */
	if (strcmp(st, "running") && strcmp(st, "paused")) {
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is "
		    "not running", id);
		goto out;
	}
	if (stop) {
		if (!strcmp(st, "paused") && dk_post(&d, id, "unpause",
		    "cannot unpause the container", err) < 0)
			rc = -1;
		else
			rc = dk_post(&d, id, "stop?t=2", "cannot stop the "
			    "container", err);
	} else {
		rc = dk_post(&d, id, "pause", "cannot pause the container",
		    err);
	}
out:
	json_decref(c);
	dk_close(&d);
	return rc;
}

static int
docker_resume(json_t *ref, struct sbx_err *err)
{
	struct dk d;
	json_t *c;
	const char *st, *id;
	int rc = 0;

	if (ref_open(&d, ref, &c, err) < 0)
		return -1;
	id = sbx_json_str(c, "Id");
	json_object_set_new(ref, "id", json_string(id));
	st = status_of(c);
	if (!strcmp(st, "paused"))
		rc = dk_post(&d, id, "unpause", "cannot unpause the container",
		    err);
	else if (!strcmp(st, "stopped"))
		rc = dk_post(&d, id, "start", "cannot start the container",
		    err);
	else if (strcmp(st, "running"))
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is "
		    "%s", id, st);
	json_decref(c);
	dk_close(&d);
	return rc;
}

/* --- exec ----------------------------------------------------------------- */

struct demux {
	unsigned char hdr[8];
	size_t hlen;     /* header bytes held */
	size_t left;     /* payload bytes still to come of this frame */
	int stream;      /* 1 stdout, 2 stderr */
	int first;       /* no frame seen yet */
	int holding;     /* the first frame may be the engine's error */
	struct sbx_buf held;
};

/* The transport: the hijacked socket of the exec's start. */
struct xrun {
	struct dk *d;
	const json_t *ref;
	const char *cid;
	char *const *argv;
	char **cmd;      /* what runs: argv, or the pty's sizing shell */
	char **env;
	const struct sbx_exec_opts *o;
	struct sbx_xs *xs;
	char tag[33];
	struct demux dm;
	char *eid, *path;
	json_t *body;
	struct sbx_buf rest; /* what came with the engine's answer */
	int sock, gfd, started, resized;
	pid_t guard;
	long long live_at;
	char inb[65536]; /* a chunk of stdin on its way */
	size_t inlen, inoff;
};

static void
emit(struct xrun *x, int stream, const char *p, size_t n)
{
	sbx_xs_output(x->xs, stream, p, n);
}

/* The engine reports a command it cannot start as text in the first
 * stdout frame: held until the exit code says which it was. */
static const char oci_err[] = "OCI runtime ";

static void
payload(struct xrun *x, const char *p, size_t n)
{
	struct demux *m = &x->dm;

	if (m->first) {
		m->first = 0;
		m->holding = m->stream == 1 && n >= 4 && !strncmp(p, oci_err,
		    n < sizeof oci_err - 1 ? n : sizeof oci_err - 1);
	}
	if (m->holding) {
		if (m->held.len < 4096) {
			sbx_buf_add(&m->held, p, n);
			return;
		}
		m->holding = 0;
		emit(x, 1, m->held.data, m->held.len);
	}
	emit(x, m->stream, p, n);
}

/* Split the multiplexed stream into its frames as the bytes come. */
static void
demux(struct xrun *x, const char *p, size_t n)
{
	struct demux *m = &x->dm;
	size_t k;

	if (x->o->tty) {
		/* One stream, no frames: its start may be the engine's
		 * error all the same. */
		m->stream = 1;
		payload(x, p, n);
		return;
	}
	while (n) {
		if (m->left) {
			k = n < m->left ? n : m->left;
			payload(x, p, k);
			m->left -= k;
			p += k;
			n -= k;
			continue;
		}
		k = 8 - m->hlen;
		k = n < k ? n : k;
		memcpy(m->hdr + m->hlen, p, k);
		m->hlen += k;
		p += k;
		n -= k;
		if (m->hlen == 8) {
			m->stream = m->hdr[0] == 2 ? 2 : 1;
			m->left = (size_t)m->hdr[4] << 24 |
			    (size_t)m->hdr[5] << 16 | (size_t)m->hdr[6] << 8 |
			    m->hdr[7];
			m->hlen = 0;
		}
	}
}

/* Create an exec; its id in *eid. */
static int
exec_create(struct dk *d, const char *cid, char *const argv[], char **env,
    const char *cwd, int in, int tty, char **eid, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	json_t *b = json_object(), *cmd = json_array(), *e = json_array();
	size_t i;
	int rc = 0;

	for (i = 0; argv[i]; i++)
		json_array_append_new(cmd, json_string(argv[i]));
	for (i = 0; env && env[i]; i++)
		json_array_append_new(e, json_string(env[i]));
	json_object_set_new(b, "AttachStdin", json_boolean(in));
	json_object_set_new(b, "AttachStdout", json_true());
	json_object_set_new(b, "AttachStderr", json_true());
	json_object_set_new(b, "Tty", json_boolean(tty));
	json_object_set_new(b, "Cmd", cmd);
	json_object_set_new(b, "Env", e);
	if (cwd)
		json_object_set_new(b, "WorkingDir", json_string(cwd));
	*eid = NULL;
	if (dk_req(d, "POST", b, &rs, err, "/containers/%s/exec", cid) < 0) {
		rc = -1;
	} else if (rs.status == 404) {
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' does "
		    "not exist", cid);
	} else if (rs.status == 409) {
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is "
		    "not running (%s)", cid, dk_msg(&rs));
	} else if (rs.status != 201 || !sbx_json_str(rs.json, "Id")) {
		rc = dk_fail(&rs, SBX_EX_EXECFAIL, "cannot create an exec",
		    err);
	} else {
		*eid = sbx_xstrdup(sbx_json_str(rs.json, "Id"));
	}
	if (rc == 0 || rs.status)
		sbx_http_resp_release(&rs);
	json_object_clear(b);
	json_decref(b);
	return rc;
}

/* The exec's exit code, once it has ended (bounded wait). */
static int
exec_wait(struct dk *d, const char *eid, long long *code, int wait_ms,
    struct sbx_err *err)
{
	struct sbx_http_resp rs;
	long long until = sbx_mono_ms() + wait_ms;

	for (;;) {
		if (dk_req(d, "GET", NULL, &rs, err, "/exec/%s/json", eid) < 0)
			return -1;
		if (rs.status != 200) {
			dk_fail(&rs, SBX_EX_EXECFAIL, "cannot inspect the exec",
			    err);
			sbx_http_resp_release(&rs);
			return -1;
		}
		if (!json_is_true(json_object_get(rs.json, "Running")) &&
		    json_is_integer(json_object_get(rs.json, "ExitCode"))) {
			*code = sbx_json_int(rs.json, "ExitCode", 0);
			sbx_http_resp_release(&rs);
			return 0;
		}
		sbx_http_resp_release(&rs);
		if (sbx_mono_ms() > until)
			return sbx_err_set(err, SBX_EX_EXECFAIL, "the exec did "
			    "not end");
		usleep(10000);
	}
}

/* Signal everything an exec started (by its tag), in a second exec. */
static int
signal_tagged(struct dk *d, const char *cid, int sig, const char *tag,
    struct sbx_err *err)
{
	char s[16], *eid = NULL;
	char *const argv[] = {"sh", "-c", (char *)killtag_sh, "sbx-kill", s,
	    (char *)tag, NULL};
	struct sbx_http_resp rs;
	json_t *b;
	long long code;
	int rc;

	snprintf(s, sizeof s, "%d", sig);
	if (exec_create(d, cid, argv, NULL, "/", 0, 0, &eid, err) < 0)
		return -1;
	b = json_pack("{sbsb}", "Detach", 1, "Tty", 0);
	rc = dk_req(d, "POST", b, &rs, err, "/exec/%s/start", eid);
	json_decref(b);
	if (rc == 0) {
		if (rs.status >= 300)
			rc = dk_fail(&rs, SBX_EX_EXECFAIL, "cannot stop the "
			    "command", err);
		sbx_http_resp_release(&rs);
	}
	if (rc == 0)
		rc = exec_wait(d, eid, &code, 10000, err);
	free(eid);
	return rc;
}

static void
resize(struct dk *d, const char *eid)
{
	struct winsize ws;
	struct sbx_http_resp rs;
	struct sbx_err err;

	if (sbx_xs_winsize(&ws) < 0)
		return;
	if (dk_req(d, "POST", NULL, &rs, &err, "/exec/%s/resize?h=%u&w=%u",
	    eid, ws.ws_row, ws.ws_col) == 0)
		sbx_http_resp_release(&rs);
}

/* What the engine said when it could not start the command. */
static int
start_error(struct xrun *x, long long code, struct sbx_err *err)
{
	const char *t = x->dm.held.data;
	enum sbx_xs_why why = sbx_xs_start_why(t);
	char detail[301];

	if (why == SBX_XS_START_WORKDIR)
		return sbx_err_set(err, SBX_EX_EXECFAIL, "workdir '%s' does "
		    "not exist in the sandbox", x->o->cwd ? x->o->cwd :
		    "(default)");
	if (why == SBX_XS_START_OTHER && code == SBX_EX_NOEXEC)
		why = SBX_XS_START_NOEXEC;
	snprintf(detail, sizeof detail, "%s", t);
	return sbx_xs_start_fail(err, why, x->argv[0], detail);
}

static void
tag_new(char *tag)
{
	unsigned char r[16];
	size_t i;

	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		for (i = 0; i < sizeof r; i++)
			r[i] = (unsigned char)(rand() ^ getpid());
	for (i = 0; i < sizeof r; i++)
		snprintf(tag + 2 * i, 3, "%02x", r[i]);
}

/* The guard of an exec: a child of ours, in a session of its own, that
 * waits on a socket from us. "ok" comes once the command has ended; an
 * end without it means we died (even by SIGKILL), and the guard kills
 * everything tagged tag on a connection of its own, for the engine never
 * ends an exec whose client is gone. So a command ends with sbx-exec, at
 * the cost of a fork. *fd is our end; the guard's pid is returned. */
static pid_t
guard_start(const struct dk *d, const char *cid, const char *tag, int *fd,
    struct sbx_err *err)
{
	static const int quiet[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
	struct sbx_err e2;
	struct dk g;
	char ok[2] = "";
	int sv[2], null;
	size_t i, n;
	ssize_t r;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return sbx_err_set(err, SBX_EX_EXECFAIL, "socketpair:");
	if ((pid = fork()) < 0) {
		close(sv[0]);
		close(sv[1]);
		return sbx_err_set(err, SBX_EX_EXECFAIL, "fork:");
	}
	if (pid > 0) {
		close(sv[1]);
		*fd = sv[0];
		return pid;
	}
	close(sv[0]);
	setsid();
	for (i = 0; i < sizeof quiet / sizeof quiet[0]; i++)
		signal(quiet[i], SIG_IGN);
	/* Holding no pipe of the caller's open: a reader sees our EOF. */
	if ((null = open("/dev/null", O_RDWR)) >= 0)
		for (i = 0; i < 3; i++)
			dup2(null, (int)i);
	for (n = 0; n < 2; n += (size_t)r)
		if ((r = read(sv[1], ok + n, 2 - n)) <= 0 && !(r < 0 &&
		    errno == EINTR))
			break;
		else if (r < 0)
			r = 0;
	if (memcmp(ok, "ok", 2) && dk_open(&g, d->endpoint, &e2) == 0)
		signal_tagged(&g, cid, 9, tag, &e2);
	_exit(0);
}

/* Whether the container's environment (the image's and create's) sets
 * the variable "name=" names. */
static int
has_env(const json_t *c, const char *name)
{
	json_t *e = json_object_get(json_object_get(c, "Config"), "Env"), *v;
	size_t i;

	json_array_foreach(e, i, v)
		if (json_is_string(v) && !strncmp(json_string_value(v), name,
		    strlen(name)))
			return 1;
	return 0;
}

/* How often a running exec asks whether its container still runs: an
 * engine may hold the stream of a container that ended open (runsc). */
#define LIVE_MS 2000

/* 0 while the sandbox a command runs in is running or paused. */
static int
still_running(struct dk *d, const json_t *ref, struct sbx_err *err)
{
	const char *st;
	json_t *c;
	int rc = 0;

	if (dk_find(d, ref, &c, err) < 0)
		return err->code != SBX_EX_NOSANDBOX ? -1 : sbx_err_set(err,
		    SBX_EX_NOSANDBOX, "sandbox '%s' ended under the command "
		    "(gone)", sbx_json_str(ref, "id"));
	st = status_of(c);
	if (strcmp(st, "running") && strcmp(st, "paused"))
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%s' ended "
		    "under the command (%s)", sbx_json_str(ref, "id"), st);
	json_decref(c);
	return rc;
}

static int
dx_start(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct xrun *x = t;
	struct sbx_http_req rq = {.method = "POST", .in_fd = -1, .out_fd = -1};
	long status;
	int fl;

	if ((x->guard = guard_start(x->d, x->cid, x->tag, &x->gfd, err)) < 0 ||
	    exec_create(x->d, x->cid, x->cmd, x->env, xs->o->cwd,
	    sbx_xs_forwards_input(xs), xs->o->tty, &x->eid, err) < 0)
		return -1;
	x->path = sbx_xasprintf("/v%d.%d/exec/%s/start", API_MAJOR,
	    x->d->minor, x->eid);
	rq.path = x->path;
	rq.body = x->body = json_pack("{sbsb}", "Detach", 0, "Tty",
	    xs->o->tty);
	x->started = 1;
	if (sbx_http_hijack(x->d->h, &rq, &x->sock, &status, &x->rest,
	    err) < 0) {
		err->code = SBX_EX_EXECFAIL;
		return -1;
	}
	if (status >= 300)
		return sbx_err_set(err, status == 409 ? SBX_EX_NOSANDBOX :
		    SBX_EX_EXECFAIL, "cannot start the command: %.300s (status "
		    "%ld)", x->rest.data ? x->rest.data : "", status);
	if (xs->o->tty)
		resize(x->d, x->eid);
	/* Never blocked on a write: an engine that stops reading our stdin
	 * must not keep us from seeing the command end. */
	if ((fl = fcntl(x->sock, F_GETFL)) >= 0)
		fcntl(x->sock, F_SETFL, fl | O_NONBLOCK);
	return 0;
}

static int
dx_fds(void *t, struct pollfd *p, long long *wake)
{
	struct xrun *x = t;

	p[0] = (struct pollfd){x->sock, POLLIN | (x->inlen ? POLLOUT : 0), 0};
	if (x->rest.len)
		*wake = 0;
	/* Once killed at the deadline, only its end is awaited. */
	if (!x->xs->res->timed_out && (*wake < 0 || *wake > x->live_at))
		*wake = x->live_at;
	return 1;
}

static int
dx_ready(void *t, struct sbx_xs *xs, const struct pollfd *p, int n,
    struct sbx_err *err)
{
	struct xrun *x = t;
	char buf[65536];
	ssize_t r;

	(void)n;
	/* What came with the answer, once the terminal is as it will be. */
	if (x->rest.len) {
		demux(x, x->rest.data, x->rest.len);
		x->rest.len = 0;
	}
	if (!xs->res->timed_out && sbx_mono_ms() >= x->live_at) {
		if (still_running(x->d, x->ref, err) < 0)
			return -1;
		x->live_at = sbx_mono_ms() + LIVE_MS;
	}
	if (x->inlen && (p[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
		r = write(x->sock, x->inb + x->inoff, x->inlen - x->inoff);
		if (r > 0 && (x->inoff += (size_t)r) == x->inlen) {
			x->inlen = 0;
			sbx_xs_hold_input(xs, 0);
		}
		/* The command takes no more: stdin stays held. */
		if (r < 0 && errno != EINTR && errno != EAGAIN)
			x->inlen = 0;
	}
	if (p[0].revents) {
		r = read(x->sock, buf, sizeof buf);
		/* The first resize may come before the command's pty
		 * exists: once it writes, it surely does. */
		if (r > 0 && xs->o->tty && !x->resized) {
			resize(x->d, x->eid);
			x->resized = 1;
		}
		if (r > 0)
			demux(x, buf, (size_t)r);
		else if (r == 0 || (errno != EINTR && errno != EAGAIN))
			sbx_xs_done(xs);
	}
	return 0;
}

static int
dx_input(void *t, struct sbx_xs *xs, const char *p, size_t n)
{
	struct xrun *x = t;

	if (!n) {
		/* The end of our stdin: the command's too. */
		shutdown(x->sock, SHUT_WR);
		return 0;
	}
	if (n > sizeof x->inb)
		n = sizeof x->inb;
	memcpy(x->inb, p, n);
	x->inlen = n;
	x->inoff = 0;
	sbx_xs_hold_input(xs, 1);
	return 0;
}

static void
dx_signal(void *t, int sig)
{
	struct xrun *x = t;
	struct sbx_err e2;

	signal_tagged(x->d, x->cid, sig, x->tag, &e2);
}

static void
dx_resize(void *t)
{
	struct xrun *x = t;

	resize(x->d, x->eid);
}

static int
dx_expire(void *t, struct sbx_err *err)
{
	struct xrun *x = t;

	return signal_tagged(x->d, x->cid, 9, x->tag, err);
}

static int
dx_finish(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct xrun *x = t;
	struct sbx_exec_result *res = xs->res;
	long long code = 0;
	size_t i;
	int slow;

	if (exec_wait(x->d, x->eid, &code, 10000, err) < 0)
		return -1;
	/* A command killed with its sandbox: the sandbox is what failed.
	 * The engine may tell the exec's end (137, or 126 as the container
	 * stops) before the container's, so for those it waits half a
	 * second. */
	slow = code == 128 + SIGKILL || code == SBX_EX_NOEXEC;
	for (i = 0; (code > 128 || slow) && i < (slow ? 10u : 1u); i++) {
		if (i)
			usleep(50000);
		if (still_running(x->d, x->ref, err) < 0)
			return -1;
	}
	/* It has ended: what it left running stays. */
	send(x->gfd, "ok\n", 3, MSG_NOSIGNAL);
	if (x->dm.holding) {
		if ((code == SBX_EX_NOEXEC || code == SBX_EX_NOTFOUND) &&
		    !res->out.len && !res->err.len)
			return start_error(x, code, err);
		emit(x, 1, x->dm.held.data, x->dm.held.len);
	}
	if (res->timed_out)
		sbx_xs_end(res, SBX_XS_TIMEDOUT, 0);
	else if (code > 128 && code < 128 + 65)
		sbx_xs_end(res, SBX_XS_KILLED, (int)code - 128);
	else
		sbx_xs_end(res, SBX_XS_EXITED, (int)code);
	return 0;
}

static const struct sbx_xs_transport dx_transport = {
	.signals = SBX_XS_SIGS_END,
	/* The engine never ends an exec at a deadline: we kill by tag. */
	.flags = SBX_XS_DEADLINE,
	.start = dx_start,
	.fds = dx_fds,
	.ready = dx_ready,
	.input = dx_input,
	.signal = dx_signal,
	.resize = dx_resize,
	.expire = dx_expire,
	.finish = dx_finish,
};

static int
docker_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err)
{
	struct xrun x = {.sock = -1, .gfd = -1, .guard = -1,
	    .rest = SBX_BUF_INIT};
	struct sbx_xs xs;
	struct dk d;
	char *term = NULL, *tag = NULL, rows[12], cols[12];
	struct winsize ws;
	json_t *c = NULL;
	size_t n = 0, i, k = 0;
	int rc = -1;

	sbx_xs_init(&xs, o, res, &dx_transport, &x);
	if (ref_open(&d, ref, &c, err) < 0) {
		if (err->code != SBX_EX_NOSANDBOX)
			err->code = SBX_EX_EXECFAIL;
		return -1;
	}
	x.cid = sbx_json_str(c, "Id");
	if (!strcmp(status_of(c), "paused") || !strcmp(status_of(c),
	    "stopped")) {
		sbx_xs_paused(err, sbx_json_str(ref, "id"), status_of(c));
		goto out;
	}
	if (strcmp(status_of(c), "running")) {
		sbx_xs_not_running(err, sbx_json_str(ref, "id"), status_of(c));
		goto out;
	}
	x.d = &d;
	x.ref = ref;
	x.o = o;
	x.xs = &xs;
	x.argv = argv;
	x.cmd = (char **)argv;
	x.dm.first = 1;
	x.live_at = xs.t0 + LIVE_MS;
	/* Everything the command starts carries the tag: --timeout and our
	 * signals reach them all through it. */
	tag_new(x.tag);
	while (o->env && o->env[n])
		n++;
	x.env = sbx_xcalloc(n + 4, sizeof *x.env);
	/* With a tty the engine sets TERM=xterm: the caller's replaces it,
	 * and -e TERM=..., later in the list, replaces that. */
	if (o->tty)
		x.env[k++] = term = sbx_xasprintf("TERM=%s", sbx_xs_term());
	/* As on every backend, a UTF-8 locale, unless the image has one. */
	if (!has_env(c, "LANG="))
		x.env[k++] = "LANG=C.UTF-8";
	for (i = 0; i < n; i++)
		x.env[k++] = o->env[i];
	x.env[k] = tag = sbx_xasprintf(TAG_VAR "=%s", x.tag);
	if (o->tty && sbx_xs_winsize(&ws) == 0) {
		for (i = 0; argv[i]; i++)
			;
		x.cmd = sbx_xcalloc(i + 7, sizeof *x.cmd);
		x.cmd[0] = "sh";
		x.cmd[1] = "-c";
		x.cmd[2] = (char *)tty_sh;
		x.cmd[3] = "sbx-exec";
		x.cmd[4] = rows;
		x.cmd[5] = cols;
		snprintf(rows, sizeof rows, "%u", ws.ws_row);
		snprintf(cols, sizeof cols, "%u", ws.ws_col);
		memcpy(x.cmd + 6, argv, (i + 1) * sizeof *argv);
	}
	rc = sbx_xs_run(&xs, err);
out:
	/* x.sock is the client's: dk_close closes it. */
	if (x.guard > 0) {
		/* A command that never started needs no killing. */
		if (!x.started)
			send(x.gfd, "ok\n", 3, MSG_NOSIGNAL);
		close(x.gfd);
		waitpid(x.guard, NULL, 0);
	}
	if (x.cmd != argv)
		free(x.cmd);
	free(term);
	free(tag);
	free(x.env);
	sbx_buf_release(&x.dm.held);
	sbx_buf_release(&x.rest);
	json_decref(x.body);
	json_decref(c);
	free(x.eid);
	free(x.path);
	dk_close(&d);
	return rc;
}

/* --- files: sbx-sync's transfers ----------------------------------------- */

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

/* The tar on in goes to the engine, which unpacks it in dir. */
static int
put_child(const json_t *ref, const char *dir, int in, struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "PUT", .in_fd = in, .out_fd = -1,
	    .in_type = "application/x-tar"};
	struct sbx_http_resp rs;
	struct dk d;
	json_t *c;
	char *q, *path;
	int rc;

	if (ref_open(&d, ref, &c, err) < 0)
		return -1;
	if (!dir)
		dir = sbx_json_str(json_object_get(c, "Config"), "WorkingDir");
	q = sbx_http_escape(dir && *dir ? dir : "/");
	path = sbx_xasprintf("/v%d.%d/containers/%s/archive?path=%s",
	    API_MAJOR, d.minor, sbx_json_str(c, "Id"), q);
	rq.path = path;
	rc = sbx_http_do(d.h, &rq, &rs, err);
	if (rc == 0 && rs.status == 404)
		rc = sbx_err_set(err, SBX_EX_USAGE, "no directory '%s' in the "
		    "sandbox", dir);
	else if (rc == 0 && rs.status >= 300)
		rc = dk_fail(&rs, SBX_EX_FAIL, "cannot put files in the "
		    "sandbox", err);
	if (rc == 0 || rs.status)
		sbx_http_resp_release(&rs);
	free(path);
	free(q);
	json_decref(c);
	dk_close(&d);
	return rc;
}

static int
docker_put(const json_t *ref, const char *dir, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	struct sbx_err cerr = {0};
	int in;
	pid_t pid = sbx_job_fork(1, fd, &in, job, err);

	if (pid == 0) {
		if (put_child(ref, dir, in, &cerr) < 0)
			sbx_job_fail(job->errfd, &cerr);
		_exit(0);
	}
	return pid < 0 ? -1 : 0;
}

/* A tar of paths, made by tar in the sandbox, goes to out. */
static int
get_child(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int out, struct sbx_err *err)
{
	struct sbx_exec_opts o = {0};
	struct sbx_exec_result res;
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
	rc = docker_exec(ref, argv, &o, &res, err);
	free(argv);
	if (rc < 0)
		return -1;
	if (res.exit_code == 3)
		return sbx_err_set(err, SBX_EX_USAGE, "no directory '%s' in "
		    "the sandbox", dir ? dir : "(workdir)");
	if (res.exit_code)
		return sbx_err_set(err, SBX_EX_FAIL, "tar in the sandbox "
		    "failed (status %d)", res.exit_code);
	return 0;
}

static int
docker_get(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	struct sbx_err cerr = {0};
	int out;
	pid_t pid = sbx_job_fork(0, fd, &out, job, err);

	if (pid == 0) {
		if (get_child(ref, dir, paths, out, &cerr) < 0)
			sbx_job_fail(job->errfd, &cerr);
		_exit(0);
	}
	return pid < 0 ? -1 : 0;
}

static const struct sbx_files docker_files = {
	.put_archive = docker_put,
	.get_archive = docker_get,
	.scan = sbx_portable_scan,
	.hash = sbx_portable_hash,
	.remove = sbx_portable_remove,
};

const struct sbx_backend_ops sbx_docker_ops = {
	.pause = docker_pause,
	.resume = docker_resume,
	.create = docker_create,
	.exec = docker_exec,
	.kill = docker_kill,
	.list = docker_list,
	.info = docker_info,
	.files = &docker_files,
};
