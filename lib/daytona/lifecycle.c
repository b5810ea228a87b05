/* lifecycle.c - the daytona backend's sandboxes: create (from a snapshot
 * or an image, its size checked first), kill, info, list, pause (stop or
 * archive) and resume (start), and its table of operations */
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daytona.h"

/* What Daytona gives a sandbox at most (a default organisation's), and
 * at least: whole vCPUs and GiB. */
#define MAX_CPUS 4
#define MAX_MEMORY_GIB 8
#define MAX_DISK_GIB 10

#define GIB (1ull << 30)

/* Whole GiB, rounded up. */
static unsigned long long
gib_up(uint64_t bytes)
{
	return (bytes + GIB - 1) / GIB;
}

/* --image: none or "host" is the organisation's default snapshot; a
 * reference with a tag, a digest or a registry (python:3.12) an image,
 * built by Daytona (buildInfo); a bare word a Daytona snapshot, as an
 * E2B template is one. */
static int
is_image(const char *image)
{
	return image && strpbrk(image, ":/@") != NULL;
}

/* "user@host", who made a sandbox. */
static char *
owner(void)
{
	struct passwd *pw = getpwuid(geteuid());
	char host[256] = "";

	if (gethostname(host, sizeof host - 1) < 0)
		host[0] = '\0';
	return sbx_xasprintf("%s@%s", pw && pw->pw_name ? pw->pw_name : "?",
	    *host ? host : "?");
}

/* A sandbox made for nothing goes again. */
static void
discard(struct dt *d, const char *id)
{
	struct sbx_http_resp rs;
	struct sbx_err err;

	if (sbx_dt_req(d, "DELETE", NULL, &rs, &err, "/sandbox/%s", id) == 0)
		sbx_http_resp_release(&rs);
}

/* The size of a snapshot ({"cpu","mem","disk"} in GiB) against what the
 * spec asks: Daytona sizes a sandbox made from a snapshot by it, and
 * refuses resources beside one. Less than asked is refused before any
 * sandbox is made; *res gets what it gives. */
static int
snapshot_size(struct dt *d, const char *snap, const struct sbx_spec *spec,
    json_t **res, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	long long cpu, mem, disk;
	char *q;
	int few_cpu, few_mem, few_disk;

	*res = NULL;
	q = sbx_http_escape(snap);
	if (sbx_dt_req(d, "GET", NULL, &rs, err, "/snapshots/%s", q) < 0) {
		free(q);
		return -1;
	}
	free(q);
	if (rs.status == 404) {
		sbx_http_resp_release(&rs);
		return sbx_err_set(err, SBX_EX_USAGE, "no Daytona snapshot "
		    "'%s' (--image: a snapshot's name, or an image with a "
		    "tag, such as python:3.12)", snap);
	}
	if (rs.status != 200 || !json_is_object(rs.json)) {
		sbx_dt_fail(&rs, "cannot look at the snapshot", NULL, err);
		sbx_http_resp_release(&rs);
		return -1;
	}
	if (sbx_json_str(rs.json, "state") && strcmp(sbx_json_str(rs.json,
	    "state"), "active")) {
		sbx_err_set(err, SBX_EX_USAGE, "Daytona snapshot '%s' is %s, "
		    "not active", snap, sbx_json_str(rs.json, "state"));
		sbx_http_resp_release(&rs);
		return -1;
	}
	cpu = sbx_json_int(rs.json, "cpu", 0);
	mem = sbx_json_int(rs.json, "mem", 0);
	disk = sbx_json_int(rs.json, "disk", 0);
	sbx_http_resp_release(&rs);
	few_cpu = spec->cpus_milli && (cpu <= 0 || spec->cpus_milli >
	    (uint64_t)cpu * 1000);
	few_mem = spec->memory && (mem <= 0 || spec->memory > (uint64_t)mem *
	    GIB);
	few_disk = spec->disk && !spec->disk_default && (disk <= 0 ||
	    spec->disk > (uint64_t)disk * GIB);
	if (few_cpu || few_mem || few_disk)
		return sbx_err_set(err, SBX_EX_USAGE, "Daytona snapshot '%s' "
		    "gives %lld vCPU, %lld GiB of memory and %lld GiB of disk, "
		    "less than %s asks: a snapshot sizes its sandboxes (ask "
		    "for an image, --image python:3.12, to size one)", snap,
		    cpu, mem, disk, few_cpu ? "--cpus" : few_mem ? "--memory" :
		    "--disk");
	*res = json_pack("{s:o,s:o,s:o}", "vcpus", cpu > 0 ?
	    json_integer(cpu) : json_null(), "memory_mib", mem > 0 ?
	    json_integer(mem << 10) : json_null(), "disk_gib", disk > 0 ?
	    json_integer(disk) : json_null());
	return 0;
}

/* What an image's sandbox is given: whole vCPUs and GiB, rounded up
 * (said, since it is billed), within Daytona's maximum per sandbox. */
static int
image_size(const struct sbx_spec *spec, json_t *body, json_t **res,
    struct sbx_err *err)
{
	unsigned long long cpu = (spec->cpus_milli + 999) / 1000;
	unsigned long long mem = gib_up(spec->memory), disk = 0;

	*res = NULL;
	if (spec->disk && !spec->disk_default)
		disk = gib_up(spec->disk);
	if (cpu > MAX_CPUS || mem > MAX_MEMORY_GIB || disk > MAX_DISK_GIB)
		return sbx_err_set(err, SBX_EX_USAGE, "Daytona gives a sandbox "
		    "at most %d vCPU, %d GiB of memory and %d GiB of disk "
		    "(%s)", MAX_CPUS, MAX_MEMORY_GIB, MAX_DISK_GIB, cpu >
		    MAX_CPUS ? "--cpus" : mem > MAX_MEMORY_GIB ? "--memory" :
		    "--disk");
	if ((cpu && spec->cpus_milli % 1000) || (mem && spec->memory % GIB) ||
	    (disk && spec->disk % GIB))
		sbx_warn("Daytona sizes in whole vCPUs and GiB: given %llu "
		    "vCPU, %llu GiB of memory%s, and billed as such", cpu ?
		    cpu : 1, mem ? mem : 1, disk ? "and disk rounded up" : "");
	if (cpu)
		json_object_set_new(body, "cpu", json_integer((json_int_t)cpu));
	if (mem)
		json_object_set_new(body, "memory", json_integer((json_int_t)
		    mem));
	if (disk)
		json_object_set_new(body, "disk", json_integer((json_int_t)
		    disk));
	*res = json_pack("{s:o,s:o,s:o}", "vcpus", cpu ? json_integer(
	    (json_int_t)cpu) : json_null(), "memory_mib", mem ?
	    json_integer((json_int_t)(mem << 10)) : json_null(), "disk_gib",
	    disk ? json_integer((json_int_t)disk) : json_null());
	return 0;
}

/* Minutes a stopped sandbox of sbx lives: daytona.auto_delete, else a
 * week; -1 never. */
static long long
auto_delete(void)
{
	const char *v = sbx_config_get("daytona.auto_delete", NULL);
	char *e;
	long long n;

	if (!v || !*v)
		return DT_AUTO_DELETE_MIN;
	n = strtoll(v, &e, 10);
	if (*e || n < -1) {
		sbx_warn("daytona.auto_delete must be minutes (-1: never), not "
		    "'%s': a week it is", v);
		return DT_AUTO_DELETE_MIN;
	}
	return n;
}

/* POST /sandbox/ID/autodelete/N. */
static int
set_auto_delete(struct dt *d, const char *id, long long n,
    struct sbx_err *err)
{
	struct sbx_http_resp rs;
	int rc = 0;

	if (sbx_dt_req(d, "POST", NULL, &rs, err, "/sandbox/%s/autodelete/%lld",
	    id, n) < 0)
		return -1;
	if (rs.status / 100 != 2)
		rc = sbx_dt_fail(&rs, "cannot set the sandbox's auto-delete", id,
		    err);
	sbx_http_resp_release(&rs);
	return rc;
}

static json_t *
create_body(const struct sbx_spec *spec)
{
	json_t *b = json_object(), *labels = json_object();
	json_t *env = json_object();
	char t[32], *k;
	size_t i;

	json_object_update(labels, spec->labels);
	json_object_set_new(labels, DT_MANAGED, json_string("1"));
	snprintf(t, sizeof t, "%llu", (unsigned long long)spec->timeout);
	json_object_set_new(labels, DT_TIMEOUT, json_string(t));
	snprintf(t, sizeof t, "%lld", sbx_now());
	json_object_set_new(labels, DT_CREATED, json_string(t));
	k = owner();
	json_object_set_new(labels, DT_OWNER, json_string(k));
	free(k);
	if (spec->workdir)
		json_object_set_new(labels, DT_WORKDIR,
		    json_string(spec->workdir));
	if (spec->start && (k = json_dumps(spec->start, JSON_COMPACT))) {
		json_object_set_new(labels, DT_START, json_string(k));
		free(k);
	}
	for (i = 0; spec->env && spec->env[i]; i++) {
		k = sbx_xstrdup(spec->env[i]);
		k[strcspn(k, "=")] = '\0';
		json_object_set_new(env, k, json_string(spec->env[i] +
		    strlen(k) + (spec->env[i][strlen(k)] == '=')));
		free(k);
	}
	if (spec->name)
		json_object_set_new(b, "name", json_string(spec->name));
	json_object_set_new(b, "labels", labels);
	json_object_set_new(b, "env", env);
	/* Commands run as root, as on every backend (sbx-exec(1)). */
	json_object_set_new(b, "user", json_string("root"));
	json_object_set_new(b, "networkBlockAll",
	    json_boolean(spec->network != SBX_NET_ALLOW));
	/* --timeout kills a sandbox once idle so long: Daytona's
	 * auto-stop (whole minutes) of an ephemeral sandbox, deleted as it
	 * stops. sbx-pause makes it lasting first (auto_delete). Without
	 * one, it never stops on its own (0). */
	if (spec->timeout && spec->timeout % 60)
		sbx_note("Daytona stops an idle sandbox in whole minutes: "
		    "--timeout %llus is %llu min", (unsigned long long)
		    spec->timeout, (unsigned long long)(spec->timeout + 59) /
		    60);
	json_object_set_new(b, "autoStopInterval", json_integer(
	    (json_int_t)((spec->timeout + 59) / 60)));
	json_object_set_new(b, "autoDeleteInterval", spec->timeout ?
	    json_integer(0) : json_integer(auto_delete()));
	return b;
}

/* The env of a create body holds --env's values: wiped before it goes. */
static void
body_free(json_t *b)
{
	json_t *env = json_object_get(b, "env"), *v;
	const char *k;

	json_object_foreach(env, k, v)
		if (json_is_string(v) && json_string_length(v))
			explicit_bzero((char *)json_string_value(v),
			    json_string_length(v));
	json_decref(b);
}

/* The workdir, made in the new sandbox (mkdir -p). */
static int
make_workdir(struct dt *d, const json_t *s, const char *dir,
    struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "POST", .in_fd = -1, .out_fd = -1,
	    .timeout_ms = 30000};
	struct sbx_http_resp rs;
	struct dtb t;
	char *q;
	int rc = 0;

	if (sbx_dt_tb_open(&t, d, s, err) < 0)
		return -1;
	q = sbx_http_escape(dir);
	rc = sbx_dt_tb_do(&t, &rq, &rs, err, "/files/folder?path=%s&mode=0755",
	    q);
	free(q);
	if (rc == 0 && rs.status / 100 != 2)
		rc = sbx_dt_tb_fail(&rs, "cannot make the workdir", err);
	if (rc == 0 || rs.status)
		sbx_http_resp_release(&rs);
	sbx_dt_tb_close(&t);
	return rc;
}

static int
dt_create(const struct sbx_spec *spec, json_t **ref, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct dt d;
	json_t *body = NULL, *res = NULL, *s = NULL;
	const char *id, *image = spec->image;
	char *df;
	int rc = -1, made = 0;

	*ref = NULL;
	if (spec->workdir && !sbx_path_plain(spec->workdir))
		return sbx_err_set(err, SBX_EX_USAGE, "invalid workdir '%s' "
		    "(want an absolute, plain path)", spec->workdir);
	if (image && !strcmp(image, "host"))
		image = NULL;
	if (image && !*image)
		return sbx_err_set(err, SBX_EX_USAGE, "an empty --image");
	if (sbx_dt_open(&d, spec->endpoint, err) < 0)
		return -1;
	body = create_body(spec);
	if (sbx_dt_net_create(spec, body, err) < 0)
		goto out;
	if (is_image(image)) {
		if (strchr(image, '\n') || strchr(image, '\r')) {
			sbx_err_set(err, SBX_EX_USAGE, "invalid image '%s'",
			    image);
			goto out;
		}
		if (image_size(spec, body, &res, err) < 0)
			goto out;
		df = sbx_xasprintf("FROM %s\n", image);
		json_object_set_new(body, "buildInfo", json_pack("{s:s}",
		    "dockerfileContent", df));
		free(df);
	} else {
		if (image)
			json_object_set_new(body, "snapshot",
			    json_string(image));
		if (image && snapshot_size(&d, image, spec, &res, err) < 0)
			goto out;
		if (!image && (spec->cpus_milli || spec->memory ||
		    (spec->disk && !spec->disk_default))) {
			sbx_err_set(err, SBX_EX_USAGE, "Daytona sizes a sandbox "
			    "by its snapshot: --cpus, --memory and --disk need "
			    "--image (a snapshot, or an image such as "
			    "python:3.12)");
			goto out;
		}
	}
	if (sbx_dt_req(&d, "POST", body, &rs, err, "/sandbox") < 0)
		goto out;
	if (rs.status / 100 != 2 || !json_is_object(rs.json)) {
		if (rs.status == 409 && spec->name)
			sbx_err_set(err, SBX_EX_FAIL, "a Daytona sandbox named "
			    "'%s' exists already", spec->name);
		else
			sbx_dt_fail(&rs, "cannot create a sandbox", NULL, err);
		goto out;
	}
	id = sbx_json_str(rs.json, "id");
	if (!sbx_dt_valid_id(id)) {
		sbx_err_set(err, SBX_EX_FAIL, "'%s' created a sandbox but did "
		    "not say its id", d.endpoint);
		goto out;
	}
	made = 1;
	*ref = json_pack("{ssssss}", "backend", "daytona", "id", id,
	    "endpoint", d.endpoint);
	json_object_set_new(*ref, "timeout", json_integer((json_int_t)
	    spec->timeout));
	if (!res)
		res = json_pack("{s:o,s:o,s:o}", "vcpus", sbx_json_int(rs.json,
		    "cpu", 0) > 0 ? json_integer(sbx_json_int(rs.json, "cpu",
		    0)) : json_null(), "memory_mib", sbx_json_int(rs.json,
		    "memory", 0) > 0 ? json_integer(sbx_json_int(rs.json,
		    "memory", 0) << 10) : json_null(), "disk_gib",
		    sbx_json_int(rs.json, "disk", 0) > 0 ?
		    json_integer(sbx_json_int(rs.json, "disk", 0)) :
		    json_null());
	json_object_set(*ref, "resources", res);
	/* An image is built first: that takes longer than a start. */
	if (sbx_dt_wait(&d, id, "started", is_image(image) ? 10 * DT_WAIT_MS :
	    DT_WAIT_MS, &s, err) < 0)
		goto out;
	if (spec->workdir && make_workdir(&d, s, spec->workdir, err) < 0)
		goto out;
	/* Where sbx-exec goes without asking for the sandbox first. */
	if (sbx_json_str(s, "toolboxProxyUrl"))
		json_object_set_new(*ref, "toolbox", json_string(sbx_json_str(s,
		    "toolboxProxyUrl")));
	if (spec->workdir)
		json_object_set_new(*ref, "workdir",
		    json_string(spec->workdir));
	rc = 0;
out:
	if (rc < 0 && made) {
		/* Not made whole: not made. */
		discard(&d, sbx_json_str(*ref, "id"));
		json_decref(*ref);
		*ref = NULL;
	}
	json_decref(s);
	json_decref(res);
	sbx_http_resp_release(&rs);
	if (body)
		body_free(body);
	sbx_dt_close(&d);
	return rc;
}

/* --- kill, info, list, pause ---------------------------------------------- */

static int
dt_kill(json_t *ref, int keep, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	struct dt d;
	json_t *s;
	const char *id;
	int rc = 0;

	(void)keep; /* no KEEP: the caps say so */
	if (sbx_dt_ref_open(&d, ref, &id, &s, err) < 0)
		return -1;
	json_decref(s);
	if (sbx_dt_req(&d, "DELETE", NULL, &rs, err, "/sandbox/%s", id) < 0) {
		sbx_dt_close(&d);
		return -1;
	}
	/* 409: a change of state in progress (an auto-stop); wait for it,
	 * then once more. */
	if (rs.status == 409) {
		sbx_http_resp_release(&rs);
		usleep(500000);
		if (sbx_dt_req(&d, "DELETE", NULL, &rs, err, "/sandbox/%s",
		    id) < 0) {
			sbx_dt_close(&d);
			return -1;
		}
	}
	if (rs.status / 100 != 2)
		rc = sbx_dt_fail(&rs, "cannot kill the sandbox", id, err);
	sbx_http_resp_release(&rs);
	sbx_dt_close(&d);
	return rc;
}

static json_t *
dt_info(const json_t *ref, struct sbx_err *err)
{
	struct dt d;
	json_t *s, *o;
	const char *id;

	if (sbx_dt_ref_open(&d, ref, &id, &s, err) < 0)
		return NULL;
	o = sbx_dt_info_of(s, d.endpoint);
	json_decref(s);
	sbx_dt_close(&d);
	return o;
}

/* GET /sandbox with the label filter for sbx's own, cursor after
 * cursor (an older server's bare array is one page). */
static int
dt_list(int (*fn)(json_t *info, void *arg), void *arg, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	struct dt d;
	json_t *items, *one, *o;
	char *labels, *cur = NULL, *cq;
	const char *next;
	size_t i;
	int rc = 0;

	if (sbx_dt_open(&d, NULL, err) < 0)
		return -1;
	labels = sbx_http_escape("{\"" DT_MANAGED "\":\"1\"}");
	for (;;) {
		cq = cur ? sbx_http_escape(cur) : NULL;
		rc = sbx_dt_req(&d, "GET", NULL, &rs, err, "/sandbox?labels=%s"
		    "&limit=100%s%s", labels, cq ? "&cursor=" : "", cq ? cq :
		    "");
		free(cq);
		free(cur);
		cur = NULL;
		if (rc < 0)
			break;
		items = json_is_array(rs.json) ? rs.json :
		    json_object_get(rs.json, "items");
		if (rs.status != 200 || !json_is_array(items)) {
			rc = sbx_dt_fail(&rs, "cannot list sandboxes", NULL,
			    err);
			sbx_http_resp_release(&rs);
			break;
		}
		json_array_foreach(items, i, one) {
			const char *st = sbx_json_str(one, "state");

			if (rc || sbx_labels_ours(json_object_get(one,
			    "labels"), NULL, NULL, NULL) < 0 || (st &&
			    (!strcmp(st, "destroyed") || !strcmp(st,
			    "destroying"))))
				continue;
			o = sbx_dt_info_of(one, d.endpoint);
			if (fn(o, arg) < 0)
				rc = -1;
			json_decref(o);
		}
		next = json_is_object(rs.json) ? sbx_json_str(rs.json,
		    "nextCursor") : NULL;
		if (next && *next && json_array_size(items) && !rc)
			cur = sbx_xstrdup(next);
		sbx_http_resp_release(&rs);
		if (!cur)
			break;
	}
	free(labels);
	sbx_dt_close(&d);
	return rc;
}

/* An action (start, stop, archive) on the sandbox; a 409 (a change of
 * state on its way) is waited out and the action asked again. */
static int
action(struct dt *d, const char *id, const char *what, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	int tries, rc = 0;

	for (tries = 0;; tries++) {
		if (sbx_dt_req(d, "POST", NULL, &rs, err, "/sandbox/%s/%s", id,
		    what) < 0)
			return -1;
		if (rs.status != 409 || tries >= 20)
			break;
		sbx_http_resp_release(&rs);
		usleep(500000);
	}
	if (rs.status / 100 != 2) {
		char w[64];

		snprintf(w, sizeof w, "cannot %s the sandbox", what);
		rc = sbx_dt_fail(&rs, w, id, err);
	}
	sbx_http_resp_release(&rs);
	return rc;
}

/* Daytona's VM classes keep memory and processes through its pause;
 * a container cannot pause, only stop. */
static int
vm_class(const json_t *s)
{
	const char *c = sbx_json_str(s, "sandboxClass");

	return c && (!strcmp(c, "linux-vm") || !strcmp(c, "windows"));
}

static unsigned
dt_sandbox_caps(const json_t *ref, struct sbx_err *err)
{
	struct dt d;
	json_t *s;
	const char *id;
	unsigned caps;

	if (sbx_dt_ref_open(&d, ref, &id, &s, err) < 0)
		return 0;
	caps = vm_class(s) ? SBX_CAP_SUSPEND : 0;
	json_decref(s);
	sbx_dt_close(&d);
	return caps;
}

/* Suspend (stop 0) is Daytona's pause, a VM class's alone: memory and
 * processes kept. Otherwise pause is Daytona's stop: the files stay, the
 * processes end; stop 2 (sbx-pause --archive) then archives it, to object
 * storage. */
static int
dt_pause(json_t *ref, int stop, struct sbx_err *err)
{
	struct dt d;
	json_t *s;
	const char *id, *st;
	int rc = 0;

	if (sbx_dt_ref_open(&d, ref, &id, &s, err) < 0)
		return -1;
	st = sbx_json_str(s, "state");
	if (!stop && !vm_class(s))
		rc = sbx_err_set(err, SBX_EX_USAGE, "a sandbox of class %s "
		    "cannot suspend, only stop (--mode stop)",
		    sbx_json_str(s, "sandboxClass") ? sbx_json_str(s,
		    "sandboxClass") : "container");
	/* An ephemeral one (--timeout) would be deleted as it stops: kept
	 * as a stopped one is first. */
	else if (sbx_json_int(s, "autoDeleteInterval", -1) == 0 &&
	    set_auto_delete(&d, id, auto_delete(), err) < 0)
		rc = -1;
	else if (!stop)
		rc = (st && (!strcmp(st, "paused") || !strcmp(st, "pausing")) ?
		    0 : action(&d, id, "pause", err)) < 0 || sbx_dt_wait(&d, id,
		    "paused", DT_WAIT_MS, NULL, err) < 0 ? -1 : 0;
	else if (!st || (strcmp(st, "stopped") && strcmp(st, "archived") &&
	    strcmp(st, "archiving")))
		rc = (st && !strcmp(st, "stopping") ? 0 : action(&d, id,
		    "stop", err)) < 0 || sbx_dt_wait(&d, id, "stopped",
		    DT_WAIT_MS, NULL, err) < 0 ? -1 : 0;
	if (rc == 0 && stop == 2 && (!st || strcmp(st, "archived")))
		rc = action(&d, id, "archive", err) < 0 || sbx_dt_wait(&d, id,
		    "archived", 10 * DT_WAIT_MS, NULL, err) < 0 ? -1 : 0;
	json_decref(s);
	sbx_dt_close(&d);
	return rc;
}

static int
dt_resume(json_t *ref, struct sbx_err *err)
{
	struct dt d;
	json_t *s;
	const char *id, *st;
	int rc = 0;

	if (sbx_dt_ref_open(&d, ref, &id, &s, err) < 0)
		return -1;
	st = sbx_json_str(s, "state");
	if (!st || strcmp(st, "started")) {
		rc = action(&d, id, "start", err) < 0 || sbx_dt_wait(&d, id,
		    "started", 10 * DT_WAIT_MS, NULL, err) < 0 ? -1 : 0;
		/* Its processes ended with a stop (not with a VM's pause):
		 * its start command starts again (its post-create does
		 * not). */
		if (rc == 0 && strcmp(sbx_dt_status(st ? st : ""), "paused"))
			rc = sbx_start_again(ref, sbx_json_str(json_object_get(s,
			    "labels"), DT_START), err);
	}
	/* Running again with --timeout: killed once idle so long, as it
	 * was made. */
	if (rc == 0 && strtoll(sbx_json_str(json_object_get(s, "labels"),
	    DT_TIMEOUT) ? sbx_json_str(json_object_get(s, "labels"),
	    DT_TIMEOUT) : "0", NULL, 10) > 0 && sbx_json_int(s,
	    "autoDeleteInterval", -1) != 0)
		rc = set_auto_delete(&d, id, 0, err);
	json_decref(s);
	sbx_dt_close(&d);
	return rc;
}

const struct sbx_backend_ops sbx_daytona_ops = {
	.create = dt_create,
	.exec = sbx_dt_exec,
	.shell = sbx_shell_remote,
	.sandbox_caps = dt_sandbox_caps,
	.kill = dt_kill,
	.info = dt_info,
	.pause = dt_pause,
	.resume = dt_resume,
	.list = dt_list,
	.files = &sbx_daytona_files,
	.ports = sbx_dt_ports,
	.net_rules = sbx_dt_net_rules,
	.stats = sbx_dt_stats,
	.answers = sbx_dt_answers,
};
