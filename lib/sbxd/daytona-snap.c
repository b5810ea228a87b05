/* daytona-snap.c - Daytona's snapshots (/api/snapshots), which are
 * sbxd's templates, and sandboxes made from a buildInfo: pending until
 * the build of their Dockerfile (a template named by its hash, so that
 * the same Dockerfile is built once) is done, then made as any other */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "sbxd.h"

#define DT_ORG "sbxd"
#define DT_SNAP_LIMIT 100
#define DT_POLL_US 200000

/* Sandboxes being built: ID -> {"id","name","state","errorReason",
 * "snapshot","body","key","createdAt","dockerfile","deleted"}. Not kept
 * across a restart of sbxd. */
static pthread_mutex_t pend_mu = PTHREAD_MUTEX_INITIALIZER;
static json_t *pend;

/* --- snapshots ------------------------------------------------------- */

const char *
sbxd_dt_snap_state(const json_t *rec, const char **reason)
{
	const json_t *builds = json_object_get(rec, "builds");
	const json_t *last = json_array_get(builds,
	    json_array_size(builds) - 1);
	const char *st = last ? sbx_json_str(last, "status") : "ready";

	*reason = NULL;
	if (!st || !strcmp(st, "error")) {
		*reason = sbx_json_str(json_object_get(last, "reason"),
		    "message");
		if (!*reason)
			*reason = "the build failed";
		return "build_failed";
	}
	return !strcmp(st, "waiting") ? "pending" : !strcmp(st, "building") ?
	    "building" : "active";
}

/* The SnapshotDto of template id (rec NULL: sbxd's own, image its). */
static json_t *
snap_dto(const char *id, const json_t *rec, const char *image)
{
	const json_t *dt = json_object_get(rec, "daytona");
	const char *reason = NULL, *state = rec ? sbxd_dt_snap_state(rec, &reason) :
	    "active", *name = rec ? json_string_value(json_array_get(
	    json_object_get(rec, "names"), 0)) : id;
	const char *img = sbx_json_str(dt, "imageName");
	json_int_t cpus, mem, disk;
	char ts[40];
	json_t *j;

	sbxd_box_size(NULL, &cpus, &mem, &disk);
	if (!img)
		img = rec ? sbx_json_str(rec, "image") : image;
	sbxd_dt_time(sbxd_now_ms(), ts, sizeof ts);
	j = json_pack("{s:s,s:s,s:b,s:s,s:s?,s:s,s:n,s:O?,s:I,s:i,s:n,s:I,"
	    "s:I,s:s?,s:s,s:s,s:O?,s:[s],s:n,s:s?,s:s}", "id", id,
	    "organizationId", DT_ORG, "general", rec == NULL, "name",
	    name ? name : id, "imageName", img, "state", state, "size",
	    "entrypoint", json_object_get(dt, "entrypoint"), "cpu",
	    sbx_json_int(dt, "cpu", cpus), "gpu", 0, "gpuType", "mem",
	    sbx_json_int(dt, "mem", (mem + 1023) / 1024), "disk",
	    sbx_json_int(dt, "disk", (disk + 1023) / 1024), "errorReason",
	    reason, "createdAt", rec && sbx_json_str(rec, "createdAt") ?
	    sbx_json_str(rec, "createdAt") : ts, "updatedAt", rec &&
	    sbx_json_str(rec, "updatedAt") ? sbx_json_str(rec, "updatedAt") :
	    ts, "lastUsedAt", json_object_get(rec, "lastSpawnedAt"),
	    "regionIds", "local", "initialRunnerId", "ref", rec ?
	    sbx_json_str(rec, "image") : image, "sandboxClass",
	    sbx_json_str(dt, "sandboxClass") ? sbx_json_str(dt,
	    "sandboxClass") : "container");
	json_object_set_new(j, "buildInfo", sbx_json_str(dt, "dockerfile") ?
	    json_pack("{s:s,s:[],s:O,s:O,s:s}", "dockerfileContent",
	    sbx_json_str(dt, "dockerfile"), "contextHashes", "createdAt",
	    json_object_get(j, "createdAt"), "updatedAt",
	    json_object_get(j, "updatedAt"), "snapshotRef", id) :
	    json_null());
	return j;
}

/* The SnapshotDto that t (an id or a name) is, or NULL. */
static json_t *
snap_find(const char *t)
{
	json_t *f = sbxd_tpl_dt_find(t), *j;
	size_t i;

	if (f) {
		j = snap_dto(json_string_value(json_array_get(f, 0)),
		    json_array_get(f, 1), NULL);
		json_decref(f);
		return j;
	}
	for (i = 0; sbxd.tmpl[i]; i += 2)
		if (!strcmp(sbxd.tmpl[i], t))
			return snap_dto(t, NULL, sbxd.tmpl[i + 1]);
	return NULL;
}

static int
by_name(const void *x, const void *y)
{
	return strcmp(sbx_json_str(*(json_t *const *)x, "name"),
	    sbx_json_str(*(json_t *const *)y, "name"));
}

static enum MHD_Result
h_list(struct sbxd_req *r)
{
	const char *np = sbxd_query(r, "name"), *ps = sbxd_query(r, "page");
	const char *ls = sbxd_query(r, "limit"), *id, *nm;
	uint64_t page = 1, limit = DT_SNAP_LIMIT;
	json_t *all = json_array(), *recs, *rec, *items;
	json_t **v;
	size_t i, n;

	if ((ps && sbx_parse_u64(ps, 1, UINT32_MAX, &page) < 0) ||
	    (ls && sbx_parse_u64(ls, 1, 200, &limit) < 0)) {
		json_decref(all);
		return sbxd_dt_api_err(r, 400, "page must be 1 or more, and "
		    "limit 1 to 200");
	}
	for (i = 0; sbxd.tmpl[i]; i += 2)
		json_array_append_new(all, snap_dto(sbxd.tmpl[i], NULL,
		    sbxd.tmpl[i + 1]));
	recs = sbxd_tpl_dt_all();
	json_object_foreach(recs, id, rec)
		json_array_append_new(all, snap_dto(id, rec, NULL));
	json_decref(recs);
	n = json_array_size(all);
	v = sbxd_dt_sorted(all, by_name);
	items = json_array();
	for (i = 0; i < n; i++) {
		nm = sbx_json_str(v[i], "name");
		if (np && *np && !strcasestr(nm, np))
			continue;
		json_array_append(items, v[i]);
	}
	free(v);
	json_decref(all);
	n = json_array_size(items);
	all = json_array();
	for (i = (size_t)((page - 1) * limit); i < n &&
	    i < (size_t)(page * limit); i++)
		json_array_append(all, json_array_get(items, i));
	json_decref(items);
	return sbxd_reply_json(r, 200, json_pack("{s:o,s:I,s:I,s:I}", "items",
	    all, "total", (json_int_t)n, "page", (json_int_t)page,
	    "totalPages", (json_int_t)((n + limit - 1) / limit)));
}

static enum MHD_Result
h_get(struct sbxd_req *r)
{
	char *t = sbxd_path_seg(r, 2);
	json_t *j = t ? snap_find(t) : NULL;
	enum MHD_Result ret;

	ret = j ? sbxd_reply_json(r, 200, j) : sbxd_dt_api_err(r, 404,
	    "Snapshot %s not found", t ? t : "");
	free(t);
	return ret;
}

/* An image name with a tag (not latest) or a digest. */
static int
image_pinned(const char *s)
{
	const char *slash = strrchr(s, '/'), *colon;

	if (strchr(s, '@'))
		return 1;
	colon = strrchr(slash ? slash : s, ':');
	return colon && colon[1] && strcmp(colon + 1, "latest");
}

/* argv as one sh command line, each word in single quotes. */
static char *
sh_words(const json_t *a)
{
	struct sbx_buf b = SBX_BUF_INIT;
	const json_t *v;
	const char *p;
	size_t i;

	json_array_foreach(a, i, v) {
		if (i)
			sbx_buf_add(&b, " ", 1);
		sbx_buf_add(&b, "'", 1);
		for (p = json_string_value(v); *p; p++)
			if (*p == '\'')
				sbx_buf_add(&b, "'\\''", 4);
			else
				sbx_buf_add(&b, p, 1);
		sbx_buf_add(&b, "'", 1);
	}
	sbx_buf_add(&b, "", 1);
	return b.data;
}

/* A buildInfo's Dockerfile (malloc'd), or NULL after answering 400. */
static char *
build_info(struct sbxd_req *r, const json_t *bi, enum MHD_Result *ret)
{
	const char *df = sbx_json_str(bi, "dockerfileContent");

	if (!json_is_object(bi) || !df || !*df) {
		*ret = sbxd_dt_api_err(r, 400, "buildInfo wants a "
		    "dockerfileContent");
		return NULL;
	}
	if (json_array_size(json_object_get(bi, "contextHashes"))) {
		*ret = sbxd_dt_api_err(r, 400, "sbxd does not serve "
		    "'buildInfo.contextHashes' (a build context in object "
		    "storage; see sbxd(8))");
		return NULL;
	}
	return sbx_xstrdup(df);
}

/* POST /api/snapshots {"name","imageName"|"buildInfo","cpu","memory",
 * "disk","entrypoint"} */
static enum MHD_Result
h_create(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = sbxd_body_json(r, &ret), *ep, *dt = NULL, *v, *cls;
	const char *name, *img;
	struct sbxd_new size = {0};
	char *df = NULL, *id = NULL, *cmd, msg[512];
	size_t i;
	int status, vm;

	if (!j)
		return ret;
	name = sbx_json_str(j, "name");
	img = sbx_json_str(j, "imageName");
	ep = json_object_get(j, "entrypoint");
	if (!name || !*name) {
		ret = sbxd_dt_api_err(r, 400, "name must be a string");
		goto out;
	}
	if (!img == !json_object_get(j, "buildInfo") ||
	    (json_object_get(j, "imageName") && !img)) {
		ret = sbxd_dt_api_err(r, 400, "Must specify either imageName "
		    "or buildInfo");
		goto out;
	}
	if (ep && !json_is_null(ep)) {
		json_array_foreach(ep, i, v)
			if (!json_is_string(v))
				break;
		if (!json_is_array(ep) || i < json_array_size(ep)) {
			ret = sbxd_dt_api_err(r, 400, "entrypoint must be an "
			    "array of strings");
			goto out;
		}
		if (!img) {
			ret = sbxd_dt_api_err(r, 400, "Cannot specify an "
			    "entrypoint when using a build info entry");
			goto out;
		}
	}
	if (sbxd_dt_size(r, j, &size, &ret) < 0)
		goto out;
	/* A linux-vm snapshot's sandboxes pause with their processes
	 * (frozen); sbxd has no other class. */
	cls = json_object_get(j, "sandboxClass");
	vm = json_is_string(cls) && !strcmp(json_string_value(cls),
	    "linux-vm");
	if (cls && !json_is_null(cls) && !vm && (!json_is_string(cls) ||
	    strcmp(json_string_value(cls), "container"))) {
		ret = sbxd_dt_api_err(r, 400, "sandboxClass must be container "
		    "or linux-vm (the classes sbxd has)");
		goto out;
	}
	if (!img && vm) {
		ret = sbxd_dt_api_err(r, 400, "Declarative builds are only "
		    "supported for the container class");
		goto out;
	}
	if (img && (!*img || strpbrk(img, " \t\r\n") || !image_pinned(img))) {
		ret = sbxd_dt_api_err(r, 400, "Image %s must carry a tag or a "
		    "digest, and not the tag latest", img);
		goto out;
	}
	if (img) {
		df = sbx_xasprintf("FROM %s\n", img);
	} else if (!(df = build_info(r, json_object_get(j, "buildInfo"),
	    &ret))) {
		goto out;
	}
	dt = json_object();
	if (size.cpus)
		json_object_set_new(dt, "cpu", json_integer(size.cpus));
	if (size.mem_mb)
		json_object_set_new(dt, "mem", json_integer(size.mem_mb /
		    1024));
	if (size.disk_mb)
		json_object_set_new(dt, "disk", json_integer(size.disk_mb /
		    1024));
	if (vm)
		json_object_set(dt, "sandboxClass", cls);
	if (img)
		json_object_set_new(dt, "imageName", json_string(img));
	else
		json_object_set_new(dt, "dockerfile", json_string(df));
	if (json_array_size(ep)) {
		json_object_set(dt, "entrypoint", ep);
		cmd = sh_words(ep);
		json_object_set_new(dt, "startCmd", json_string(cmd));
		free(cmd);
	}
	status = sbxd_tpl_dt_build(name, df, dt, 0, &id, msg, sizeof msg);
	if (status != 200) {
		ret = sbxd_dt_api_err(r, status, "%s", msg);
		goto out;
	}
	v = snap_find(id);
	ret = v ? sbxd_reply_json(r, 200, v) : sbxd_dt_api_err(r, 500,
	    "the snapshot went away");
out:
	free(id);
	free(df);
	json_decref(dt);
	json_decref(j);
	return ret;
}

static enum MHD_Result
h_delete(struct sbxd_req *r)
{
	char *t = sbxd_path_seg(r, 2);
	json_t *f = t ? sbxd_tpl_dt_find(t) : NULL;
	enum MHD_Result ret;
	size_t i;

	for (i = 0; t && sbxd.tmpl[i]; i += 2)
		if (!strcmp(sbxd.tmpl[i], t))
			break;
	if (t && sbxd.tmpl[i])
		ret = sbxd_dt_api_err(r, 403, "Snapshot %s is a general "
		    "snapshot (sbxd's own) and cannot be deleted", t);
	else if (!f || sbxd_tpl_remove(json_string_value(json_array_get(f,
	    0))) < 0)
		ret = sbxd_dt_api_err(r, 404, "Snapshot %s not found", t ? t :
		    "");
	else
		ret = sbxd_reply_empty(r, 200);
	json_decref(f);
	free(t);
	return ret;
}

const struct sbxd_route sbxd_dt_snap_routes[] = {
	{"GET", "/api/snapshots", 0, h_list, NULL},
	{"POST", "/api/snapshots", 0, h_create, NULL},
	{"GET", "/api/snapshots/*", 0, h_get, NULL},
	{"DELETE", "/api/snapshots/*", 0, h_delete, NULL},
	{NULL, NULL, 0, NULL, NULL},
};

/* --- sandboxes from a buildInfo ------------------------------------- */

/* The DTO of pending entry p (pend_mu held). */
static json_t *
pending_dto(const json_t *p, const char *proxy)
{
	const json_t *body = json_object_get(p, "body");
	json_int_t cpus, mem, disk;
	const char *st = sbx_json_str(p, "state");
	char ts[40];
	json_t *j;

	sbxd_box_size(NULL, &cpus, &mem, &disk);
	sbxd_dt_time(sbx_json_int(p, "createdAt", 0), ts, sizeof ts);
	j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:O,s:O,s:b,s:b,s:s,s:I,s:i,s:I,"
	    "s:I,s:s,s:s,s:s,s:O?,s:I,s:I,s:I,s:s,s:s,s:s,s:s,s:s,s:b,s:[],"
	    "s:{s:s,s:[],s:s,s:s,s:s}}", "id", sbx_json_str(p, "id"),
	    "organizationId", DT_ORG, "name", sbx_json_str(p, "name"),
	    "snapshot", sbx_json_str(p, "snapshot"), "user",
	    sbx_json_str(body, "user") ? sbx_json_str(body, "user") : "user",
	    "env", json_object_get(body, "env") ? json_object_get(body, "env")
	    : json_object_get(p, "empty"), "labels", json_object_get(body,
	    "labels") ? json_object_get(body, "labels") :
	    json_object_get(p, "empty"), "public",
	    json_is_true(json_object_get(body, "public")), "networkBlockAll",
	    json_is_true(json_object_get(body, "networkBlockAll")), "target",
	    "local", "cpu", sbx_json_int(body, "cpu", cpus), "gpu", 0,
	    "memory", sbx_json_int(body, "memory", (mem + 1023) / 1024),
	    "disk", sbx_json_int(body, "disk", (disk + 1023) / 1024), "state",
	    st, "desiredState", "started", "backupState", "None",
	    "errorReason", json_object_get(p, "errorReason"),
	    "autoStopInterval", sbx_json_int(body, "autoStopInterval", 15),
	    "autoArchiveInterval", sbx_json_int(body, "autoArchiveInterval",
	    10080), "autoDeleteInterval", sbx_json_int(body,
	    "autoDeleteInterval", -1), "createdAt", ts, "updatedAt", ts,
	    "lastActivityAt", ts, "toolboxProxyUrl", proxy, "sandboxClass",
	    "container", "recoverable", 0, "volumes", "buildInfo",
	    "dockerfileContent", sbx_json_str(p, "dockerfile"),
	    "contextHashes", "createdAt", ts, "updatedAt", ts, "snapshotRef",
	    sbx_json_str(p, "snapshot"));
	return j;
}

json_t *
sbxd_dt_pending(const char *id, const char *proxy)
{
	json_t *p, *j = NULL;

	pthread_mutex_lock(&pend_mu);
	if ((p = json_object_get(pend, id)) &&
	    !json_is_true(json_object_get(p, "deleted")))
		j = pending_dto(p, proxy);
	pthread_mutex_unlock(&pend_mu);
	return j;
}

json_t *
sbxd_dt_pending_all(const char *name, const char *proxy)
{
	json_t *a = json_array(), *p;
	const char *id;

	pthread_mutex_lock(&pend_mu);
	json_object_foreach(pend, id, p)
		if (!json_is_true(json_object_get(p, "deleted")) && (!name ||
		    !strncasecmp(sbx_json_str(p, "name"), name,
		    strlen(name))))
			json_array_append_new(a, pending_dto(p, proxy));
	pthread_mutex_unlock(&pend_mu);
	return a;
}

int
sbxd_dt_pending_name(const char *name)
{
	const char *id;
	json_t *p;
	int taken = 0;

	pthread_mutex_lock(&pend_mu);
	json_object_foreach(pend, id, p)
		taken |= !json_is_true(json_object_get(p, "deleted")) &&
		    (!strcmp(sbx_json_str(p, "name"), name) ||
		    !strcmp(id, name));
	pthread_mutex_unlock(&pend_mu);
	return taken;
}

int
sbxd_dt_pending_delete(struct sbxd_req *r, const char *id,
    enum MHD_Result *ret)
{
	char *proxy = sbxd_dt_proxy_url(r);
	json_t *p, *j = NULL;

	pthread_mutex_lock(&pend_mu);
	if ((p = json_object_get(pend, id)) &&
	    !json_is_true(json_object_get(p, "deleted"))) {
		j = pending_dto(p, proxy);
		json_object_set_new(j, "state", json_string("destroyed"));
		json_object_set_new(j, "desiredState",
		    json_string("destroyed"));
		/* Its builder's thread lets it go (and kills what it may
		 * have made meanwhile). */
		json_object_set_new(p, "deleted", json_true());
	}
	pthread_mutex_unlock(&pend_mu);
	free(proxy);
	if (!j)
		return 0;
	*ret = sbxd_reply_json(r, 200, j);
	return 1;
}

static void
pend_set(const char *id, const char *state, const char *reason)
{
	json_t *p;

	pthread_mutex_lock(&pend_mu);
	if ((p = json_object_get(pend, id))) {
		json_object_set_new(p, "state", json_string(state));
		if (reason)
			json_object_set_new(p, "errorReason",
			    json_string(reason));
	}
	pthread_mutex_unlock(&pend_mu);
}

/* Whether the entry was deleted (and then it is gone). */
static int
pend_deleted(const char *id, int drop)
{
	json_t *p;
	int del;

	pthread_mutex_lock(&pend_mu);
	p = json_object_get(pend, id);
	del = !p || json_is_true(json_object_get(p, "deleted"));
	if (p && (del || drop))
		json_object_del(pend, id);
	pthread_mutex_unlock(&pend_mu);
	return del;
}

/* A pending sandbox's wait for its build, then its create. */
static void *
builder(void *arg)
{
	char *id = arg, emsg[512];
	const char *reason, *st;
	json_t *p, *body = NULL, *f;
	struct sbxd_new o = {0};
	struct sbxd_box *b = NULL;
	struct sbx_err err;
	int key = -1;

	pthread_mutex_lock(&pend_mu);
	if ((p = json_object_get(pend, id))) {
		body = json_deep_copy(json_object_get(p, "body"));
		key = (int)sbx_json_int(p, "key", -1);
	}
	pthread_mutex_unlock(&pend_mu);
	for (;;) {
		if (!body || pend_deleted(id, 0) || sbxd.stopping)
			goto out;
		f = sbxd_tpl_dt_find(sbx_json_str(body, "snapshot"));
		st = f ? sbxd_dt_snap_state(json_array_get(f, 1), &reason) :
		    "build_failed";
		if (!f)
			reason = "its snapshot was deleted";
		if (!strcmp(st, "building"))
			pend_set(id, "building_snapshot", NULL);
		if (!strcmp(st, "build_failed"))
			pend_set(id, "build_failed", reason);
		json_decref(f);
		if (!strcmp(st, "active") || !strcmp(st, "build_failed"))
			break;
		usleep(DT_POLL_US);
	}
	if (strcmp(st, "active"))
		goto out;
	pend_set(id, "starting", NULL);
	o.id = id;
	o.cpus = sbx_json_int(body, "cpu", 0);
	o.mem_mb = sbx_json_int(body, "memory", 0) * 1024;
	o.disk_mb = sbx_json_int(body, "disk", 0) * 1024;
	if (sbxd_dt_new(NULL, key, body, &o, &b, emsg, sizeof emsg)) {
		pend_set(id, "error", emsg);
		goto out;
	}
	/* Deleted while it was being made: it goes too. */
	if (pend_deleted(id, 1) && sbxd_box_take(b) == 0) {
		if (sbxd_box_kill(b, &err) < 0)
			sbxd_log("cannot kill sandbox %s: %s", b->id,
			    err.msg);
		sbxd_box_give(b);
	}
	sbxd_box_put(b);
out:
	json_decref(body);
	free(id);
	return NULL;
}

enum MHD_Result
sbxd_dt_create_built(struct sbxd_req *r, json_t *j)
{
	enum MHD_Result ret;
	unsigned char h[SHA256_DIGEST_LENGTH];
	char name[40], id[SBXD_ID_LEN + 1], msg[512], *df, *tid = NULL;
	char *proxy;
	const char *reason;
	json_t *body, *f, *e;
	pthread_t th;
	int status, i;

	if (!(df = build_info(r, json_object_get(j, "buildInfo"), &ret)))
		return ret;
	/* One template per Dockerfile: the same one twice is one build. */
	SHA256((const unsigned char *)df, strlen(df), h);
	memcpy(name, "dt-", 3);
	for (i = 0; i < 12; i++)
		snprintf(name + 3 + 2 * i, 3, "%02x", h[i]);
	/* A failed build of it is built again. */
	if ((f = sbxd_tpl_dt_find(name))) {
		if (!strcmp(sbxd_dt_snap_state(json_array_get(f, 1), &reason),
		    "build_failed"))
			sbxd_tpl_remove(name);
		json_decref(f);
	}
	e = json_pack("{s:s}", "dockerfile", df);
	status = sbxd_tpl_dt_build(name, df, e, 1, &tid, msg, sizeof msg);
	json_decref(e);
	free(tid);
	if (status != 200) {
		free(df);
		return sbxd_dt_api_err(r, status, "%s", msg);
	}
	sbxd_random_id(id, SBXD_ID_LEN);
	body = json_deep_copy(j);
	json_object_del(body, "buildInfo");
	json_object_set_new(body, "snapshot", json_string(name));
	pthread_mutex_lock(&pend_mu);
	if (!pend)
		pend = json_object();
	json_object_set_new(pend, id, json_pack("{s:s,s:s,s:s,s:s,s:o,s:i,"
	    "s:I,s:s,s:{}}", "id", id, "name", sbx_json_str(j, "name") &&
	    *sbx_json_str(j, "name") ? sbx_json_str(j, "name") : id, "state",
	    "pending_build", "snapshot", name, "body", body, "key", r->key,
	    "createdAt", (json_int_t)sbxd_now_ms(), "dockerfile", df,
	    "empty"));
	pthread_mutex_unlock(&pend_mu);
	free(df);
	tid = sbx_xstrdup(id);
	if (pthread_create(&th, NULL, builder, tid) != 0) {
		free(tid);
		pend_set(id, "error", "cannot start the build's waiter");
	} else {
		pthread_detach(th);
	}
	proxy = sbxd_dt_proxy_url(r);
	pthread_mutex_lock(&pend_mu);
	e = pending_dto(json_object_get(pend, id), proxy);
	pthread_mutex_unlock(&pend_mu);
	free(proxy);
	return sbxd_reply_json(r, 200, e);
}
