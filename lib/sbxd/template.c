/* template.c - E2B's template builds, served by sbxd: a template is an
 * image of the local image store, built by `sbx-image build` from a
 * Dockerfile made of the build's steps, its context the tars the SDK
 * uploaded for its COPY steps.
 *
 *   STORE/templates/index.json     {"templates":{ID:record}}
 *   STORE/templates/files/HASH     an upload (a tar, maybe gzipped),
 *                                  named once whole
 *   STORE/templates/builds/BUILD/  Dockerfile, ctx/, log (a JSON line
 *                                  per entry: {"t":ms,"l":level,"m":...}),
 *                                  result (sbx-image's JSON)
 *
 * A record: {"templateID","names":[NAME],"tags":[...],"cpuCount",
 * "memoryMB","createdAt","updatedAt","spawnCount","lastSpawnedAt",
 * "image" (the last ready build's), "startCmd","readyCmd",
 * "builds":[{"buildID","status","createdAt","updatedAt","finishedAt",
 * "reason","image","startCmd","readyCmd"}] (the newest last)}. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "sbxd.h"
#include "../image/image.h"

#define TPL_LOG_LIMIT 100 /* entries a status answer carries at most */

static pthread_mutex_t tpl_mu = PTHREAD_MUTEX_INITIALIZER;
static json_t *tpls;            /* ID -> record, under tpl_mu */
static char *tdir;              /* STORE/templates */
static unsigned char upkey[32]; /* signs the upload links */

static char *
iso_now(void)
{
	char ts[32];

	sbx_time_fmt(sbx_now(), ts, sizeof ts);
	return sbx_xstrdup(ts);
}

static void
set_now(json_t *o, const char *key)
{
	char *ts = iso_now();

	json_object_set_new(o, key, json_string(ts));
	free(ts);
}

/* tpl_mu held. durable: fsync'd (a template or build changed); a
 * create's spawn count is not worth a sync on its path. */
static int
save_as(int durable)
{
	json_t *o = json_pack("{s:O}", "templates", tpls);
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS), *p;
	struct sbx_err err;
	int rc;

	json_decref(o);
	if (!s)
		return -1;
	p = sbx_xasprintf("%s/index.json", tdir);
	if ((rc = sbx_file_write_atomic(p, s, strlen(s), 0600, durable,
	    &err)) < 0)
		sbxd_log("cannot save the templates: %s", err.msg);
	free(p);
	free(s);
	return rc;
}

static int
save(void)
{
	return save_as(1);
}

int
sbxd_tpl_init(struct sbx_err *err)
{
	json_t *o, *rec, *b, *t;
	const char *id, *st;
	char *p;
	size_t i;

	tdir = sbx_xasprintf("%s/templates", sbxd.store);
	p = sbx_xasprintf("%s/files", tdir);
	if (sbx_mkdirs(p, 0700, err) < 0) {
		free(p);
		return -1;
	}
	free(p);
	p = sbx_xasprintf("%s/builds", tdir);
	if (sbx_mkdirs(p, 0700, err) < 0) {
		free(p);
		return -1;
	}
	free(p);
	if (RAND_bytes(upkey, sizeof upkey) != 1)
		return sbx_err_set(err, SBX_EX_FAIL, "no random bytes for the "
		    "upload links");
	p = sbx_xasprintf("%s/index.json", tdir);
	o = sbx_json_load_object(p, err);
	free(p);
	if (!o && err->code != SBX_EX_NOSANDBOX)
		return -1;
	t = o ? json_object_get(o, "templates") : NULL;
	tpls = json_is_object(t) ? json_incref(t) : json_object();
	json_decref(o);
	/* A build that was under way when sbxd stopped has no builder now. */
	json_object_foreach(tpls, id, rec)
		json_array_foreach(json_object_get(rec, "builds"), i, b) {
			st = sbx_json_str(b, "status");
			if (st && (!strcmp(st, "building") ||
			    !strcmp(st, "waiting"))) {
				json_object_set_new(b, "status",
				    json_string("error"));
				json_object_set_new(b, "reason", json_pack(
				    "{s:s}", "message", "sbxd stopped during "
				    "the build"));
			}
		}
	return 0;
}

/* A name of E2B's ("my-tpl" or "my-tpl:v1") that is also an image
 * name: lowercase letters and digits, joined by '-', '_' or '.'; the
 * tag letters, digits, '-', '_' and '.'. */
static int
valid_name(const char *s)
{
	const char *colon = strchr(s, ':'), *p;
	size_t n = colon ? (size_t)(colon - s) : strlen(s), i;

	if (n == 0 || n > 64)
		return 0;
	for (i = 0; i < n; i++) {
		if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9'))
			continue;
		if ((s[i] == '-' || s[i] == '_' || s[i] == '.') && i > 0 &&
		    i + 1 < n)
			continue;
		return 0;
	}
	if (!colon)
		return 1;
	if (!colon[1] || strlen(colon + 1) > 64)
		return 0;
	for (p = colon + 1; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
		    *p == '.'))
			return 0;
	return 1;
}

/* The record whose ID, name or name:tag is t (tpl_mu held), or NULL. */
static json_t *
find(const char *t, const char **idp)
{
	json_t *rec, *v;
	const char *id;
	size_t i, n;

	if ((rec = json_object_get(tpls, t))) {
		if (idp)
			*idp = json_object_iter_key(json_object_iter_at(tpls,
			    t));
		return rec;
	}
	json_object_foreach(tpls, id, rec)
		json_array_foreach(json_object_get(rec, "names"), i, v) {
			const char *nm = json_string_value(v);

			n = nm ? strlen(nm) : 0;
			if (!nm || strncmp(t, nm, n) || (t[n] && t[n] != ':'))
				continue;
			if (idp)
				*idp = id;
			return rec;
		}
	return NULL;
}

static json_t *
build_of(json_t *rec, const char *bid)
{
	json_t *b;
	size_t i;

	json_array_foreach(json_object_get(rec, "builds"), i, b)
		if (!strcmp(sbx_json_str(b, "buildID") ?
		    sbx_json_str(b, "buildID") : "", bid))
			return b;
	return NULL;
}

static void
uuid4(char *out)
{
	unsigned char r[16];
	int i, k = 0;

	if (RAND_bytes(r, sizeof r) != 1)
		memset(r, 0, sizeof r);
	r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
	r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
	for (i = 0; i < 16; i++) {
		k += snprintf(out + k, 3, "%02x", r[i]);
		if (i == 3 || i == 5 || i == 7 || i == 9)
			out[k++] = '-';
	}
	out[k] = 0;
}

/* The image and the start and ready commands of a ready template t, for
 * a create (malloc'd); NULL when there is none. */
char *
sbxd_tpl_image(const char *t, char **id, char **start, char **ready)
{
	json_t *rec;
	const char *img, *s, *tid = NULL;
	char *out = NULL;

	*id = *start = *ready = NULL;
	pthread_mutex_lock(&tpl_mu);
	if ((rec = find(t, &tid)) && (img = sbx_json_str(rec, "image"))) {
		out = sbx_xstrdup(img);
		*id = sbx_xstrdup(tid);
		if ((s = sbx_json_str(rec, "startCmd")) && *s)
			*start = sbx_xstrdup(s);
		if ((s = sbx_json_str(rec, "readyCmd")) && *s)
			*ready = sbx_xstrdup(s);
		json_object_set_new(rec, "spawnCount", json_integer(
		    sbx_json_int(rec, "spawnCount", 0) + 1));
		set_now(rec, "lastSpawnedAt");
		save_as(0);
	}
	pthread_mutex_unlock(&tpl_mu);
	return out;
}

/* The id of the built template whose ID, name or name:tag is t
 * (malloc'd), or NULL. */
char *
sbxd_tpl_id(const char *t)
{
	const char *id = NULL;
	char *out = NULL;

	pthread_mutex_lock(&tpl_mu);
	if (find(t, &id))
		out = sbx_xstrdup(id);
	pthread_mutex_unlock(&tpl_mu);
	return out;
}

/* --- the routes ----------------------------------------------------- */

/* Template records as E2B lists them. */
static json_t *
listed(const char *id, const json_t *rec)
{
	json_t *builds = json_object_get(rec, "builds");
	json_t *last = json_array_get(builds, json_array_size(builds) - 1);
	const char *st = last ? sbx_json_str(last, "status") : "ready";

	return json_pack("{s:s,s:s,s:I,s:I,s:i,s:b,s:s,s:s,s:n,s:O?,s:I,"
	    "s:I,s:s,s:O,s:O,s:s}", "templateID", id, "buildID",
	    last && sbx_json_str(last, "buildID") ?
	    sbx_json_str(last, "buildID") : "", "cpuCount",
	    sbx_json_int(rec, "cpuCount", 2), "memoryMB",
	    sbx_json_int(rec, "memoryMB", 1024), "diskSizeMB", 0, "public", 0,
	    "createdAt", sbx_json_str(rec, "createdAt") ?
	    sbx_json_str(rec, "createdAt") : "", "updatedAt",
	    sbx_json_str(rec, "updatedAt") ? sbx_json_str(rec, "updatedAt") :
	    "", "createdBy", "lastSpawnedAt",
	    json_object_get(rec, "lastSpawnedAt"), "spawnCount",
	    sbx_json_int(rec, "spawnCount", 0), "buildCount",
	    (json_int_t)json_array_size(builds), "envdVersion",
	    SBXD_ENVD_VERSION, "aliases", json_object_get(rec, "names"),
	    "names", json_object_get(rec, "names"), "buildStatus",
	    st ? st : "error");
}

/* The templates sbxd was started with (base and --template): ready,
 * never built here. */
static json_t *
static_rec(const char *name)
{
	char ts[32];

	sbx_time_fmt(sbx_now(), ts, sizeof ts);
	return json_pack("{s:[s],s:[],s:s,s:s,s:[]}", "names", name, "tags",
	    "createdAt", ts, "updatedAt", ts, "builds");
}

static int
static_tpl(const char *t)
{
	size_t i;

	for (i = 0; sbxd.tmpl[i]; i += 2)
		if (!strcmp(sbxd.tmpl[i], t))
			return 1;
	return 0;
}

static enum MHD_Result
h_list(struct sbxd_req *r)
{
	json_t *out = json_array(), *rec;
	const char *id;
	size_t i;

	for (i = 0; sbxd.tmpl[i]; i += 2) {
		rec = static_rec(sbxd.tmpl[i]);
		json_array_append_new(out, listed(sbxd.tmpl[i], rec));
		json_decref(rec);
	}
	pthread_mutex_lock(&tpl_mu);
	json_object_foreach(tpls, id, rec)
		json_array_append_new(out, listed(id, rec));
	pthread_mutex_unlock(&tpl_mu);
	return sbxd_reply_json(r, 200, out);
}

static enum MHD_Result
h_get(struct sbxd_req *r)
{
	char *t = sbxd_path_seg(r, 1);
	json_t *rec, *out, *builds, *b;
	const char *id = NULL;
	size_t i;

	pthread_mutex_lock(&tpl_mu);
	if (!(rec = find(t, &id))) {
		pthread_mutex_unlock(&tpl_mu);
		if (!static_tpl(t)) {
			enum MHD_Result ret = sbxd_reply_err(r, 404,
			    "template '%s' not found", t);

			free(t);
			return ret;
		}
		rec = static_rec(t);
		out = listed(t, rec);
		json_decref(rec);
		json_object_set_new(out, "builds", json_array());
		free(t);
		return sbxd_reply_json(r, 200, out);
	}
	out = listed(id, rec);
	builds = json_array();
	json_array_foreach(json_object_get(rec, "builds"), i, b)
		json_array_append_new(builds, json_pack("{s:O,s:O,s:O,s:O?,"
		    "s:O?,s:I,s:I,s:i,s:s}", "buildID",
		    json_object_get(b, "buildID"), "status",
		    json_object_get(b, "status"), "createdAt",
		    json_object_get(b, "createdAt"), "updatedAt",
		    json_object_get(b, "updatedAt"), "finishedAt",
		    json_object_get(b, "finishedAt"), "cpuCount",
		    sbx_json_int(rec, "cpuCount", 2), "memoryMB",
		    sbx_json_int(rec, "memoryMB", 1024), "diskSizeMB", 0,
		    "envdVersion", SBXD_ENVD_VERSION));
	pthread_mutex_unlock(&tpl_mu);
	json_object_set_new(out, "builds", builds);
	free(t);
	return sbxd_reply_json(r, 200, out);
}

static enum MHD_Result
h_alias(struct sbxd_req *r)
{
	char *a = sbxd_path_seg(r, 2);
	const char *id = NULL;
	enum MHD_Result ret;
	json_t *out = NULL;

	pthread_mutex_lock(&tpl_mu);
	if (find(a, &id))
		out = json_pack("{s:s,s:b}", "templateID", id, "public", 0);
	pthread_mutex_unlock(&tpl_mu);
	if (!out && static_tpl(a))
		out = json_pack("{s:s,s:b}", "templateID", a, "public", 0);
	ret = out ? sbxd_reply_json(r, 200, out) : sbxd_reply_err(r, 404,
	    "template alias '%s' not found", a);
	free(a);
	return ret;
}

/* The images of template record rec (its builds'), in a set. */
static void
images_of(const json_t *rec, json_t *set)
{
	const json_t *b;
	const char *img;
	size_t i;

	if ((img = sbx_json_str(rec, "image")))
		json_object_set_new(set, img, json_true());
	json_array_foreach(json_object_get(rec, "builds"), i, b)
		if ((img = sbx_json_str(b, "image")))
			json_object_set_new(set, img, json_true());
}

/* Remove the record of t, then its images that no other template names
 * (the store keeps the tree and config of one a sandbox stands on until
 * that sandbox is gone: sbx-image(1) rm). 0, or -1 when none is t. */
int
sbxd_tpl_remove(const char *t)
{
	const char *id = NULL, *img, *k;
	json_t *rec, *mine = json_object(), *others = json_object(), *o, *v;
	struct sbx_err err;

	pthread_mutex_lock(&tpl_mu);
	if ((rec = find(t, &id))) {
		images_of(rec, mine);
		json_object_del(tpls, id);
		save();
		json_object_foreach(tpls, k, o)
			images_of(o, others);
	}
	pthread_mutex_unlock(&tpl_mu);
	json_object_foreach(mine, img, v) {
		json_t *out = NULL;

		if (json_object_get(others, img))
			continue;
		memset(&err, 0, sizeof err);
		if (sbx_image_drop(img, &out, &err) < 0)
			sbxd_log("template '%s': cannot remove image '%s': %s",
			    t, img, err.msg);
		json_decref(out);
	}
	json_decref(mine);
	json_decref(others);
	return rec ? 0 : -1;
}

/* DELETE /templates/ID */
static enum MHD_Result
h_delete(struct sbxd_req *r)
{
	char *t = sbxd_path_seg(r, 1);
	enum MHD_Result ret;
	struct sbx_err err;
	int had = sbxd_tpl_remove(t) == 0;

	/* A snapshot is deleted as a template (E2B's SDK: deleteSnapshot);
	 * one a sandbox stands on stays. */
	memset(&err, 0, sizeof err);
	if (!had && !static_tpl(t) && (!strncmp(t, "snp-", 4) ||
	    sbx_snap_valid_name(t)) && sbx_snap_rm(t, &err) == 0)
		ret = sbxd_reply_empty(r, 204);
	else if (!had && err.code && err.code != SBX_EX_NOSANDBOX)
		ret = sbxd_reply_err(r, err.code == SBX_EX_FAIL ? 409 : 400,
		    "%s", err.msg);
	else if (had)
		ret = sbxd_reply_empty(r, 204);
	else if (static_tpl(t))
		ret = sbxd_reply_err(r, 400, "template '%s' is sbxd's own "
		    "(--template): it cannot be deleted", t);
	else
		ret = sbxd_reply_err(r, 404, "template '%s' not found", t);
	free(t);
	return ret;
}

/* POST /v3/templates {"name","tags","cpuCount","memoryMB"}: a new build
 * of the template of that name (made when new). legacy: POST
 * /v2/templates {"alias","cpuCount","memoryMB"} (older SDKs), the same
 * build answered with the template (TemplateLegacy). */
static enum MHD_Result
request_build(struct sbxd_req *r, int legacy)
{
	enum MHD_Result ret;
	json_t *j = sbxd_body_json(r, &ret), *rec, *tags, *v, *b;
	const char *name, *id = NULL;
	char newid[SBXD_ID_LEN + 1], bid[40], *base;
	size_t i;

	if (!j)
		return ret;
	name = sbx_json_str(j, legacy ? "alias" : "name");
	if (!name || !valid_name(name)) {
		ret = sbxd_reply_err(r, 400, "template name '%s' is not valid: "
		    "lowercase letters and digits joined by '-', '_' or '.', "
		    "and an optional :tag", name ? name : "");
		json_decref(j);
		return ret;
	}
	tags = json_object_get(j, "tags");
	json_array_foreach(tags, i, v)
		if (!json_is_string(v) || !valid_name(json_string_value(v)) ||
		    strchr(json_string_value(v), ':')) {
			json_decref(j);
			return sbxd_reply_err(r, 400, "tags must be names");
		}
	if (((v = json_object_get(j, "cpuCount")) && !json_is_null(v) &&
	    (!json_is_integer(v) || json_integer_value(v) < 1)) ||
	    ((v = json_object_get(j, "memoryMB")) && !json_is_null(v) &&
	    (!json_is_integer(v) || json_integer_value(v) < 128))) {
		json_decref(j);
		return sbxd_reply_err(r, 400, "cpuCount must be at least 1 and "
		    "memoryMB at least 128");
	}
	base = strndup(name, strcspn(name, ":"));
	uuid4(bid);
	pthread_mutex_lock(&tpl_mu);
	if (static_tpl(base)) {
		pthread_mutex_unlock(&tpl_mu);
		ret = sbxd_reply_err(r, 409, "template '%s' is sbxd's own "
		    "(--template)", base);
		free(base);
		json_decref(j);
		return ret;
	}
	if (!(rec = find(base, &id))) {
		sbxd_random_id(newid, SBXD_ID_LEN);
		id = newid;
		rec = json_pack("{s:[s],s:[],s:i,s:[]}", "names", base, "tags",
		    "spawnCount", 0, "builds");
		set_now(rec, "createdAt");
		json_object_set_new(tpls, id, rec);
		id = json_object_iter_key(json_object_iter_at(tpls, newid));
	}
	json_object_set_new(rec, "cpuCount", json_integer(
	    sbx_json_int(j, "cpuCount", 2)));
	json_object_set_new(rec, "memoryMB", json_integer(
	    sbx_json_int(j, "memoryMB", 1024)));
	if (strchr(name, ':'))
		json_array_append_new(json_object_get(rec, "tags"),
		    json_string(strchr(name, ':') + 1));
	json_array_foreach(tags, i, v)
		json_array_append(json_object_get(rec, "tags"), v);
	set_now(rec, "updatedAt");
	b = json_pack("{s:s,s:s}", "buildID", bid, "status", "waiting");
	set_now(b, "createdAt");
	set_now(b, "updatedAt");
	json_array_append_new(json_object_get(rec, "builds"), b);
	save();
	v = legacy ? listed(id, rec) : json_pack("{s:s,s:s,s:b,s:O,s:O,s:O}",
	    "templateID", id, "buildID", bid, "public", 0, "names",
	    json_object_get(rec, "names"), "tags", json_object_get(rec,
	    "tags"), "aliases", json_object_get(rec, "names"));
	pthread_mutex_unlock(&tpl_mu);
	free(base);
	json_decref(j);
	return sbxd_reply_json(r, 202, v);
}

static enum MHD_Result
h_request(struct sbxd_req *r)
{
	return request_build(r, 0);
}

static enum MHD_Result
h_request_v2(struct sbxd_req *r)
{
	return request_build(r, 1);
}

static int
valid_hash(const char *h)
{
	size_t n = h ? strlen(h) : 0;

	return n == 64 && strspn(h, "0123456789abcdef") == n;
}

/* The signature of an upload link: HMAC-SHA256 of "ID/HASH", in hex. */
static void
sign(const char *id, const char *hash, char *out)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int n = 0, i;
	char *msg = sbx_xasprintf("%s/%s", id, hash);

	HMAC(EVP_sha256(), upkey, sizeof upkey, (unsigned char *)msg,
	    strlen(msg), mac, &n);
	for (i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
	out[2 * n] = 0;
	free(msg);
}

static char *
file_path(const char *hash)
{
	return sbx_xasprintf("%s/files/%s", tdir, hash);
}

/* GET /templates/ID/files/HASH: whether that upload is here, and a link
 * to PUT it to (signed: the SDK sends no key there). */
static enum MHD_Result
h_files(struct sbxd_req *r)
{
	char *t = sbxd_path_seg(r, 1), *h = sbxd_path_seg(r, 3), *p, sig[65];
	const char *host = sbxd_header(r, "Host"), *id = NULL;
	enum MHD_Result ret;
	struct stat st;
	char *url;
	int have;

	pthread_mutex_lock(&tpl_mu);
	if (find(t, &id))
		id = sbx_xstrdup(id);
	pthread_mutex_unlock(&tpl_mu);
	if (!id) {
		ret = sbxd_reply_err(r, 404, "template '%s' not found", t);
		goto out;
	}
	if (!valid_hash(h)) {
		ret = sbxd_reply_err(r, 400, "files hash '%s' is not 64 hex "
		    "digits", h);
		goto out;
	}
	if (!host || !*host || strpbrk(host, "/?# \t")) {
		ret = sbxd_reply_err(r, 400, "no Host to make a link of");
		goto out;
	}
	p = file_path(h);
	have = stat(p, &st) == 0;
	free(p);
	sign(id, h, sig);
	url = sbx_xasprintf("http://%s/templates/%s/files/%s?signature=%s",
	    host, id, h, sig);
	ret = sbxd_reply_json(r, 201, have ? json_pack("{s:b}", "present", 1)
	    : json_pack("{s:b,s:s}", "present", 0, "url", url));
	free(url);
out:
	free((char *)id);
	free(t);
	free(h);
	return ret;
}

/* An upload under way: an unnamed file until the body is whole. */
struct tup {
	int fd;
	unsigned long long n;
	int fail;
};

static void
tup_free(struct sbxd_req *r)
{
	struct tup *u = r->up;

	if (u->fd >= 0)
		close(u->fd);
	free(u);
	r->up = NULL;
}

int
sbxd_tpl_upload_ok(struct sbxd_req *r)
{
	char *t, *h, sig[65];
	const char *got = sbxd_query(r, "signature");
	int ok = 0;

	if (strcmp(r->method, "PUT") || !got)
		return 0;
	t = sbxd_path_seg(r, 1);
	h = sbxd_path_seg(r, 3);
	if (t && h && valid_hash(h) && strlen(got) == 64) {
		sign(t, h, sig);
		ok = CRYPTO_memcmp(sig, got, 64) == 0;
	}
	free(t);
	free(h);
	return ok;
}

static int
h_upload_data(struct sbxd_req *r, const char *p, size_t n)
{
	struct tup *u = r->up;
	ssize_t w;

	if (!u) {
		u = sbx_xcalloc(1, sizeof *u);
		r->up = u;
		r->up_free = tup_free;
		u->fd = open(tdir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
		if (u->fd < 0)
			u->fail = 500;
	}
	if (u->fail)
		return -1;
	if ((u->n += n) > sbxd.o.max_upload) {
		u->fail = 413;
		return -1;
	}
	while (n) {
		if ((w = write(u->fd, p, n)) < 0) {
			if (errno == EINTR)
				continue;
			u->fail = errno == ENOSPC || errno == EDQUOT ? 507 :
			    500;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static enum MHD_Result
h_upload(struct sbxd_req *r)
{
	struct tup *u = r->up;
	char *h = sbxd_path_seg(r, 3), *p, fdp[64];
	enum MHD_Result ret;
	int fd = -1;

	if (u && u->fail) {
		ret = u->fail == 413 ? sbxd_reply_err(r, 413, "upload is over "
		    "%llu bytes", (unsigned long long)sbxd.o.max_upload) :
		    sbxd_reply_err(r, u->fail, "cannot store the upload: %s",
		    strerror(errno));
		free(h);
		return ret;
	}
	if (!u && (fd = open(tdir, O_TMPFILE | O_WRONLY | O_CLOEXEC,
	    0600)) < 0) {
		free(h);
		return sbxd_reply_err(r, 500, "cannot store the upload");
	}
	if (u)
		fd = u->fd;
	p = file_path(h);
	snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", fd);
	if (fsync(fd) < 0 || (linkat(AT_FDCWD, fdp, AT_FDCWD, p,
	    AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST))
		ret = sbxd_reply_err(r, 500, "cannot store the upload: %s",
		    strerror(errno));
	else
		ret = sbxd_reply_empty(r, 200);
	if (!u)
		close(fd);
	free(p);
	free(h);
	return ret;
}

/* --- a build -------------------------------------------------------- */

static void __attribute__((format(printf, 2, 3)))
df_addf(struct sbx_buf *df, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		sbx_die(SBX_EX_FAIL, "out of memory");
	sbx_buf_add(df, s, (size_t)n);
	free(s);
}

/* One line of the Dockerfile, the arguments JSON strings (no newline can
 * end the line early). */
static void
df_json(struct sbx_buf *df, const char *inst, const char *flags,
    const json_t *args)
{
	char *s = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);

	df_addf(df, "%s %s%s\n", inst, flags, s);
	free(s);
}

/* A value the Dockerfile can carry in one line and quote. */
static int
one_line(const char *s)
{
	return s && !strpbrk(s, "\n\r");
}

/* Quoted for ENV: "..." with \\, \" and \$ escaped. */
static void
df_quoted(struct sbx_buf *df, const char *s)
{
	sbx_buf_add(df, "\"", 1);
	for (; *s; s++) {
		if (*s == '\\' || *s == '"' || *s == '$')
			sbx_buf_add(df, "\\", 1);
		sbx_buf_add(df, s, 1);
	}
	sbx_buf_add(df, "\"", 1);
}

/* The Dockerfile of a TemplateBuildStartV2 body (from the base image
 * or template's image); NULL with msg when a step cannot be. hashes
 * gets the files hash of each COPY. */
static char *
dockerfile(const json_t *j, const char *from, json_t *hashes, char *msg,
    size_t n)
{
	struct sbx_buf df = SBX_BUF_INIT;
	const char *type, *user = NULL, *a0, *a1;
	json_t *step, *args, *v;
	size_t i, k, na;
	char flags[256];

	df_addf(&df, "FROM %s\n", from);
	json_array_foreach(json_object_get(j, "steps"), i, step) {
		type = sbx_json_str(step, "type");
		args = json_object_get(step, "args");
		na = json_array_size(args);
		for (k = 0; k < na; k++)
			if (!one_line(json_string_value(json_array_get(args,
			    k)))) {
				if (strcmp(type ? type : "", "RUN") ||
				    !json_is_string(json_array_get(args, k))) {
					snprintf(msg, n, "step %zu: its "
					    "arguments must be strings of one "
					    "line", i + 1);
					goto fail;
				}
			}
		a0 = json_string_value(json_array_get(args, 0));
		a1 = json_string_value(json_array_get(args, 1));
		if (!type || !json_is_array(args) || !a0) {
			snprintf(msg, n, "step %zu: a type and arguments are "
			    "required", i + 1);
			goto fail;
		}
		if (!strcmp(type, "RUN")) {
			/* [cmd, user]: the command as that user, then back. */
			if (a1 && *a1)
				df_addf(&df, "USER %s\n", a1);
			v = json_pack("[s,s,s]", "/bin/sh", "-c", a0);
			df_json(&df, "RUN", "", v);
			json_decref(v);
			if (a1 && *a1)
				df_addf(&df, "USER %s\n", user ? user :
				    "root");
		} else if (!strcmp(type, "COPY")) {
			/* [src, dest, user, mode] */
			const char *u = json_string_value(json_array_get(args,
			    2)), *m = json_string_value(json_array_get(args,
			    3)), *h = sbx_json_str(step, "filesHash");

			if (!a1 || !valid_hash(h)) {
				snprintf(msg, n, "step %zu: COPY wants a source, "
				    "a destination and a files hash", i + 1);
				goto fail;
			}
			if ((m && *m && strspn(m, "01234567") != strlen(m)) ||
			    (u && strpbrk(u, " \t\"\\"))) {
				snprintf(msg, n, "step %zu: bad COPY user or "
				    "mode", i + 1);
				goto fail;
			}
			snprintf(flags, sizeof flags, "%s%s%s%s%s%s",
			    u && *u ? "--chown=" : "", u && *u ? u : "",
			    u && *u ? " " : "", m && *m ? "--chmod=" : "",
			    m && *m ? m : "", m && *m ? " " : "");
			v = json_pack("[s,s]", a0, a1);
			df_json(&df, "COPY", flags, v);
			json_decref(v);
			json_array_append_new(hashes, json_string(h));
		} else if (!strcmp(type, "ENV")) {
			if (na % 2) {
				snprintf(msg, n, "step %zu: ENV wants pairs",
				    i + 1);
				goto fail;
			}
			sbx_buf_add(&df, "ENV", 3);
			for (k = 0; k < na; k += 2) {
				const char *key = json_string_value(
				    json_array_get(args, k));

				if (!key || !*key || strspn(key, "ABCDEFGHIJKL"
				    "MNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				    "0123456789_") != strlen(key) ||
				    (key[0] >= '0' && key[0] <= '9')) {
					snprintf(msg, n, "step %zu: bad ENV "
					    "name", i + 1);
					goto fail;
				}
				df_addf(&df, " %s=", key);
				df_quoted(&df, json_string_value(
				    json_array_get(args, k + 1)));
			}
			sbx_buf_add(&df, "\n", 1);
		} else if (!strcmp(type, "WORKDIR") || !strcmp(type, "USER")) {
			if (!*a0 || strpbrk(a0, " \t\"\\$")) {
				snprintf(msg, n, "step %zu: bad %s '%s'", i + 1,
				    type, a0);
				goto fail;
			}
			df_addf(&df, "%s %s\n", type, a0);
			if (!strcmp(type, "USER"))
				user = a0;
		} else {
			snprintf(msg, n, "step %zu: sbxd cannot build a %s "
			    "step", i + 1, type);
			goto fail;
		}
	}
	sbx_buf_add(&df, "", 1);
	return df.data;
fail:
	sbx_buf_release(&df);
	return NULL;
}

struct build_job {
	char *id, *bid, *dir;
	struct sbxd_child ch;
};

static void
build_done(struct build_job *jb)
{
	json_t *rec, *b, *res = NULL;
	struct sbx_err err;
	char *p = sbx_xasprintf("%s/result", jb->dir), *last = NULL;
	char *first = NULL;
	const char *img = NULL;
	int ok;

	sbxd_child_wait(&jb->ch, -1);
	ok = WIFEXITED(jb->ch.status) && WEXITSTATUS(jb->ch.status) == 0;
	if (ok && (res = sbx_json_load_object(p, &err)))
		img = sbx_json_str(res, "image");
	free(p);
	if (!img) {
		/* The builder's last line says why. */
		json_t *e;
		FILE *f;
		char line[4096];

		p = sbx_xasprintf("%s/log", jb->dir);
		if ((f = fopen(p, "re"))) {
			while (fgets(line, sizeof line, f))
				if ((e = json_loads(line, 0, NULL))) {
					const char *m = sbx_json_str(e, "m");
					const char *l = sbx_json_str(e, "l");

					if (m && !first && l &&
					    !strcmp(l, "error"))
						first = sbx_xstrdup(m);
					if (m) {
						free(last);
						last = sbx_xstrdup(m);
					}
					json_decref(e);
				}
			fclose(f);
		}
		free(p);
	}
	pthread_mutex_lock(&tpl_mu);
	if ((rec = json_object_get(tpls, jb->id)) &&
	    (b = build_of(rec, jb->bid))) {
		json_object_set_new(b, "status", json_string(img ? "ready" :
		    "error"));
		set_now(b, "updatedAt");
		set_now(b, "finishedAt");
		if (img) {
			json_object_set_new(b, "image", json_string(img));
			json_object_set_new(rec, "image", json_string(img));
			json_object_set(rec, "startCmd",
			    json_object_get(b, "startCmd"));
			json_object_set(rec, "readyCmd",
			    json_object_get(b, "readyCmd"));
		} else {
			json_object_set_new(b, "reason", json_pack("{s:s}",
			    "message", first ? first : last ? last :
			    "the build failed"));
		}
		set_now(rec, "updatedAt");
		save();
	}
	pthread_mutex_unlock(&tpl_mu);
	json_decref(res);
	free(first);
	free(last);
	sbxd_child_release(&jb->ch);
}

static void *
build_wait(void *arg)
{
	struct build_job *jb = arg;

	build_done(jb);
	free(jb->id);
	free(jb->bid);
	free(jb->dir);
	free(jb);
	return NULL;
}

/* Start build bid of template id (its record's build "building"):
 * the Dockerfile df, the uploads hashes its context, reg the registry's
 * credentials or NULL. -1 with msg (the build marked failed). */
static int
launch(const char *id, const char *bid, const char *df, json_t *hashes,
    json_t *reg, char *msg, size_t msgn)
{
	json_t *rec, *b, *args;
	char *dir = NULL, *p, *tool = NULL;
	const char *s;
	struct build_job *jb;
	struct sbx_err err;
	pthread_t th;
	size_t i;
	int fd, rc = -1;

	/* Every COPY's files are here. */
	json_array_foreach(hashes, i, b) {
		struct stat sb;

		p = file_path(json_string_value(b));
		fd = stat(p, &sb);
		free(p);
		if (fd < 0) {
			snprintf(msg, msgn, "the files of hash %s were "
			    "not uploaded", json_string_value(b));
			goto fail;
		}
	}
	dir = sbx_xasprintf("%s/builds/%s", tdir, bid);
	p = sbx_xasprintf("%s/Dockerfile", dir);
	if (sbx_mkdirs(dir, 0700, &err) < 0 ||
	    sbx_file_write_atomic(p, df, strlen(df), 0600, 0, &err) < 0) {
		free(p);
		snprintf(msg, msgn, "%s", err.msg);
		goto fail;
	}
	free(p);
	tool = sbx_sibling("sbx-image");
	/* The image's name: the template's own, less any tag. */
	pthread_mutex_lock(&tpl_mu);
	rec = json_object_get(tpls, id);
	s = rec ? json_string_value(json_array_get(json_object_get(rec,
	    "names"), 0)) : NULL;
	args = json_pack("{s:s,s:s,s:s,s:s,s:O}", "dir", dir, "tool",
	    tool ? tool : "sbx-image", "name", s ? s : "template", "files",
	    tdir, "hashes", hashes);
	pthread_mutex_unlock(&tpl_mu);
	/* To the builder through the spawner's socket: never on disk. */
	if (reg)
		json_object_set(args, "registry", reg);
	jb = sbx_xcalloc(1, sizeof *jb);
	jb->ch = (struct sbxd_child)SBXD_CHILD_NONE;
	jb->id = sbx_xstrdup(id);
	jb->bid = sbx_xstrdup(bid);
	jb->dir = sbx_xstrdup(dir);
	if (sbxd_spawn("build", args, NULL, 0, &jb->ch, &err) < 0 ||
	    pthread_create(&th, NULL, build_wait, jb) != 0) {
		json_decref(args);
		if (jb->ch.pid > 0)
			sbxd_child_kill(&jb->ch, SIGKILL);
		sbxd_child_release(&jb->ch);
		free(jb->id);
		free(jb->bid);
		free(jb->dir);
		free(jb);
		snprintf(msg, msgn, "cannot start the build");
		goto fail;
	}
	pthread_detach(th);
	json_decref(args);
	rc = 0;
	goto out;
fail:
	pthread_mutex_lock(&tpl_mu);
	if ((rec = json_object_get(tpls, id)) && (b = build_of(rec, bid))) {
		json_object_set_new(b, "status", json_string("error"));
		json_object_set_new(b, "reason", json_pack("{s:s}", "message",
		    msg));
		set_now(b, "finishedAt");
		save();
	}
	pthread_mutex_unlock(&tpl_mu);
out:
	free(tool);
	free(dir);
	return rc;
}

/* Zero the password strings of o (a request body, or its registry
 * part) before it is freed. */
static void
wipe(json_t *o)
{
	json_t *v = json_object_get(o, "fromImageRegistry");
	const char *k;

	if (v)
		wipe(v);
	json_object_foreach(o, k, v)
		if (json_is_string(v) && (!strcmp(k, "password") ||
		    !strcmp(k, "auth")))
			explicit_bzero((char *)json_string_value(v),
			    json_string_length(v));
}

/* fromImageRegistry (the SDK's fromImage(ref, {username, password})):
 * *reg {"domain","auth":"user:password"} for the builder, or NULL when
 * there is none; AWS's and GCP's are refused (-1, msg). */
static int
registry_of(const json_t *j, const char *from, json_t **reg, char *msg,
    size_t n)
{
	const json_t *fr = json_object_get(j, "fromImageRegistry");
	const char *type = sbx_json_str(fr, "type");
	const char *user = sbx_json_str(fr, "username");
	const char *pass = sbx_json_str(fr, "password");
	struct sbx_imgref ref;
	struct sbx_err err = {0};
	char *auth;

	*reg = NULL;
	if (!fr || json_is_null(fr))
		return 0;
	if (type && (!strcmp(type, "aws") || !strcmp(type, "gcp"))) {
		snprintf(msg, n, "sbxd does not pull from %s "
		    "(fromImageRegistry type '%s'): use fromImage with a "
		    "username and password (type 'registry')", !strcmp(type,
		    "aws") ? "AWS ECR" : "GCP Artifact Registry", type);
		return -1;
	}
	if (!json_is_object(fr) || !type || strcmp(type, "registry")) {
		snprintf(msg, n, "fromImageRegistry: type must be 'registry' "
		    "(not '%s')", type ? type : "");
		return -1;
	}
	if (!from) {
		snprintf(msg, n, "fromImageRegistry is for fromImage");
		return -1;
	}
	if (!user || !*user || !pass || !*pass || strchr(user, ':') ||
	    strpbrk(user, "\r\n") || strpbrk(pass, "\r\n")) {
		snprintf(msg, n, "fromImageRegistry wants a username (no ':') "
		    "and a password, each on one line");
		return -1;
	}
	if (sbx_imgref_parse(from, &ref, &err) < 0) {
		snprintf(msg, n, "fromImage: %s", err.msg);
		return -1;
	}
	auth = sbx_xasprintf("%s:%s", user, pass);
	*reg = json_pack("{s:s,s:s}", "domain", ref.domain, "auth", auth);
	explicit_bzero(auth, strlen(auth));
	free(auth);
	sbx_imgref_release(&ref);
	return 0;
}

/* POST /v2/templates/ID/builds/BUILD: TemplateBuildStartV2. */
static enum MHD_Result
h_start(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = sbxd_body_json(r, &ret), *rec, *b, *hashes = NULL;
	json_t *reg = NULL;
	char *t = sbxd_path_seg(r, 2), *bid = sbxd_path_seg(r, 4);
	char *df = NULL, msg[640];
	const char *from, *ftpl, *rid = NULL, *st, *s;
	char *id = NULL;
	size_t i;

	if (!j)
		goto out_free;
	from = sbx_json_str(j, "fromImage");
	ftpl = sbx_json_str(j, "fromTemplate");
	if ((from && ftpl) || (!from && !ftpl)) {
		ret = sbxd_reply_err(r, 400, "a build wants one of fromImage "
		    "and fromTemplate");
		goto out_free;
	}
	if (registry_of(j, from, &reg, msg, sizeof msg) < 0) {
		ret = sbxd_reply_err(r, 400, "%s", msg);
		goto out_free;
	}
	if ((from && (!*from || strpbrk(from, " \t\n\r"))) ||
	    (!json_is_array(json_object_get(j, "steps")) &&
	    json_object_get(j, "steps"))) {
		ret = sbxd_reply_err(r, 400, "bad fromImage or steps");
		goto out_free;
	}
	for (i = 0; i < 2; i++) {
		s = sbx_json_str(j, i ? "readyCmd" : "startCmd");
		if (json_object_get(j, i ? "readyCmd" : "startCmd") && !s &&
		    !json_is_null(json_object_get(j, i ? "readyCmd" :
		    "startCmd"))) {
			ret = sbxd_reply_err(r, 400, "startCmd and readyCmd "
			    "must be strings");
			goto out_free;
		}
	}
	pthread_mutex_lock(&tpl_mu);
	if (ftpl) {
		json_t *base = find(ftpl, NULL);

		if (!base || !sbx_json_str(base, "image")) {
			pthread_mutex_unlock(&tpl_mu);
			ret = sbxd_reply_err(r, 400, "template '%s' is not "
			    "built", ftpl);
			goto out_free;
		}
		from = sbx_json_str(base, "image");
	}
	hashes = json_array();
	df = dockerfile(j, from, hashes, msg, sizeof msg);
	rec = find(t, &rid);
	b = rec ? build_of(rec, bid) : NULL;
	st = b ? sbx_json_str(b, "status") : NULL;
	if (!b || !df || strcmp(st ? st : "", "waiting")) {
		pthread_mutex_unlock(&tpl_mu);
		ret = !b ? sbxd_reply_err(r, 404, "build '%s' of template '%s' "
		    "not found", bid, t) : !df ? sbxd_reply_err(r, 400, "%s",
		    msg) : sbxd_reply_err(r, 409, "build '%s' is %s already",
		    bid, st ? st : "gone");
		goto out_free;
	}
	id = sbx_xstrdup(rid);
	json_object_set_new(b, "status", json_string("building"));
	json_object_set(b, "startCmd", json_object_get(j, "startCmd"));
	json_object_set(b, "readyCmd", json_object_get(j, "readyCmd"));
	set_now(b, "updatedAt");
	save();
	pthread_mutex_unlock(&tpl_mu);

	if (launch(id, bid, df, hashes, reg, msg, sizeof msg) == 0)
		ret = sbxd_reply_empty(r, 202);
	else
		ret = sbxd_reply_err(r, 400, "%s", msg);
out_free:
	free(id);
	free(df);
	free(t);
	free(bid);
	json_decref(hashes);
	wipe(reg);
	json_decref(reg);
	wipe(j);
	json_decref(j);
	return ret;
}

/* GET /templates/ID/builds/BUILD/status?logsOffset=N&limit=M */
static enum MHD_Result
h_status(struct sbxd_req *r)
{
	char *t = sbxd_path_seg(r, 1), *bid = sbxd_path_seg(r, 3), *p, *end;
	const char *q = sbxd_query(r, "logsOffset"), *id = NULL;
	json_t *rec, *b, *out = NULL, *entries, *logs, *e;
	long long off = 0, limit = TPL_LOG_LIMIT, k = 0;
	char line[8192], ts[64];
	enum MHD_Result ret;
	FILE *f;

	if (q && *q && ((off = strtoll(q, &end, 10)) < 0 || *end)) {
		ret = sbxd_reply_err(r, 400, "bad logsOffset '%s'", q);
		goto out;
	}
	if ((q = sbxd_query(r, "limit")) && *q && ((limit = strtoll(q, &end,
	    10)) < 0 || *end || limit > TPL_LOG_LIMIT)) {
		ret = sbxd_reply_err(r, 400, "bad limit '%s' (0 to %d)", q,
		    TPL_LOG_LIMIT);
		goto out;
	}
	pthread_mutex_lock(&tpl_mu);
	if ((rec = find(t, &id)) && (b = build_of(rec, bid)))
		out = json_pack("{s:s,s:s,s:O,s:O?}", "templateID", id,
		    "buildID", bid, "status", json_object_get(b, "status"),
		    "reason", json_object_get(b, "reason"));
	pthread_mutex_unlock(&tpl_mu);
	if (!out) {
		ret = sbxd_reply_err(r, 404, "build '%s' of template '%s' not "
		    "found", bid, t);
		goto out;
	}
	/* The status was read first: a build seen done has all its log. */
	entries = json_array();
	logs = json_array();
	p = sbx_xasprintf("%s/builds/%s/log", tdir, bid);
	if ((f = fopen(p, "re"))) {
		while (json_array_size(entries) < (size_t)limit &&
		    fgets(line, sizeof line, f)) {
			if (!strchr(line, '\n') || k++ < off ||
			    !(e = json_loads(line, 0, NULL)))
				continue;
			sbx_time_fmt(sbx_json_int(e, "t", 0) / 1000, ts,
			    sizeof ts);
			json_array_append_new(entries, json_pack("{s:s,s:s,"
			    "s:s}", "timestamp", ts, "level",
			    sbx_json_str(e, "l") ? sbx_json_str(e, "l") :
			    "info", "message", sbx_json_str(e, "m") ?
			    sbx_json_str(e, "m") : ""));
			json_array_append_new(logs, json_string(
			    sbx_json_str(e, "m") ? sbx_json_str(e, "m") : ""));
			json_decref(e);
		}
		fclose(f);
	}
	free(p);
	json_object_set_new(out, "logEntries", entries);
	json_object_set_new(out, "logs", logs);
	ret = sbxd_reply_json(r, 200, out);
out:
	free(t);
	free(bid);
	return ret;
}

/* --- Daytona's snapshots (daytona-snap.c) ----------------------------- */

int
sbxd_tpl_dt_build(const char *name, const char *df, const json_t *dt,
    int reuse, char **id, char *msg, size_t n)
{
	char newid[SBXD_ID_LEN + 1], bid[40];
	const char *have = NULL;
	json_t *rec, *b;
	int rc;

	*id = NULL;
	if (!valid_name(name) || strchr(name, ':')) {
		snprintf(msg, n, "Snapshot name %s is not one sbxd takes: "
		    "lowercase letters and digits joined by '-', '_' or '.'",
		    name);
		return 400;
	}
	uuid4(bid);
	pthread_mutex_lock(&tpl_mu);
	if (find(name, &have) || static_tpl(name)) {
		if (reuse && have)
			*id = sbx_xstrdup(have);
		pthread_mutex_unlock(&tpl_mu);
		if (*id)
			return 200;
		snprintf(msg, n, "Snapshot with name \"%s\" already exists for "
		    "this organization", name);
		return 409;
	}
	sbxd_random_id(newid, SBXD_ID_LEN);
	rec = json_pack("{s:[s],s:[],s:i,s:[],s:O}", "names", name, "tags",
	    "spawnCount", 0, "builds", "daytona", dt);
	if (sbx_json_int(dt, "cpu", 0))
		json_object_set_new(rec, "cpuCount", json_integer(
		    sbx_json_int(dt, "cpu", 0)));
	if (sbx_json_int(dt, "mem", 0))
		json_object_set_new(rec, "memoryMB", json_integer(
		    sbx_json_int(dt, "mem", 0) * 1024));
	set_now(rec, "createdAt");
	set_now(rec, "updatedAt");
	b = json_pack("{s:s,s:s}", "buildID", bid, "status", "building");
	if (sbx_json_str(dt, "startCmd"))
		json_object_set(b, "startCmd", json_object_get(dt, "startCmd"));
	set_now(b, "createdAt");
	set_now(b, "updatedAt");
	json_array_append_new(json_object_get(rec, "builds"), b);
	json_object_set_new(tpls, newid, rec);
	save();
	pthread_mutex_unlock(&tpl_mu);
	*id = sbx_xstrdup(newid);
	b = json_array();
	rc = launch(newid, bid, df, b, NULL, msg, n) == 0 ? 200 : 400;
	json_decref(b);
	return rc;
}

json_t *
sbxd_tpl_dt_all(void)
{
	json_t *o;

	pthread_mutex_lock(&tpl_mu);
	o = json_deep_copy(tpls);
	pthread_mutex_unlock(&tpl_mu);
	return o;
}

json_t *
sbxd_tpl_dt_find(const char *t)
{
	const char *id = NULL;
	json_t *rec, *o = NULL;

	pthread_mutex_lock(&tpl_mu);
	if ((rec = find(t, &id)))
		o = json_pack("[s,o]", id, json_deep_copy(rec));
	pthread_mutex_unlock(&tpl_mu);
	return o;
}

const struct sbxd_route sbxd_tpl_routes[] = {
	{"GET", "/templates", 0, h_list, NULL},
	{"GET", "/v2/templates", 0, h_list, NULL},
	{"POST", "/v3/templates", 0, h_request, NULL},
	{"POST", "/v2/templates", 0, h_request_v2, NULL},
	{"GET", "/templates/aliases/*", 0, h_alias, NULL},
	{"GET", "/templates/*", 0, h_get, NULL},
	{"DELETE", "/templates/*", 0, h_delete, NULL},
	{"GET", "/templates/*/files/*", 0, h_files, NULL},
	{"PUT", "/templates/*/files/*", 0, h_upload, h_upload_data},
	{"POST", "/v2/templates/*/builds/*", 0, h_start, NULL},
	{"GET", "/templates/*/builds/*/status", 0, h_status, NULL},
	{NULL, NULL, 0, NULL, NULL},
};

/* --- the builder, a child of the spawner ------------------------------ */

static void
log_line(int fd, const char *level, const char *m)
{
	struct timespec ts;
	json_t *e;
	char *s;

	clock_gettime(CLOCK_REALTIME, &ts);
	e = json_pack("{s:I,s:s,s:o}", "t", (json_int_t)ts.tv_sec * 1000 +
	    ts.tv_nsec / 1000000, "l", level, "m", sbx_json_bytes(m,
	    strlen(m)));
	if ((s = json_dumps(e, JSON_COMPACT))) {
		dprintf(fd, "%s\n", s);
		free(s);
	}
	json_decref(e);
}

/* The build's registry credentials (reg {"domain","auth"}) where
 * sbx-image looks for them, its credentials directory's registry-DOMAIN,
 * on a tmpfs mounted over that directory in a mount namespace of this
 * child's own: in memory, seen by this build alone, gone with it. */
static int
registry_creds(const json_t *reg, char *msg, size_t n)
{
	const char *domain = sbx_json_str(reg, "domain");
	const char *auth = sbx_json_str(reg, "auth");
	struct sbx_err err = {0};
	char *dir = sbx_config_cred_dir(), *p;
	int fd, rc = -1;

	if (!dir || !domain || !auth || strchr(domain, '/')) {
		snprintf(msg, n, "no credentials directory for the registry's "
		    "credentials");
		goto out;
	}
	if (sbx_mkdirs(dir, 0700, &err) < 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "mode=0700,size=64k") < 0) {
		snprintf(msg, n, "cannot give the build its registry "
		    "credentials: %s", err.msg[0] ? err.msg : strerror(errno));
		goto out;
	}
	p = sbx_xasprintf("%s/registry-%s", dir, domain);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	free(p);
	if (fd < 0 || sbx_write_all(fd, auth, strlen(auth)) < 0 ||
	    sbx_write_all(fd, "\n", 1) < 0) {
		snprintf(msg, n, "cannot give the build its registry "
		    "credentials: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	rc = 0;
out:
	free(dir);
	return rc;
}

/* args {"dir","tool","name","files","hashes":[...]}: the context made of
 * the uploads, then sbx-image build, its stderr the log's lines. */
void
sbxd_build_child(json_t *args, int *fds, int nfds)
{
	const char *dir = sbx_json_str(args, "dir");
	const char *tool = sbx_json_str(args, "tool");
	const char *files = sbx_json_str(args, "files");
	char *logp = sbx_xasprintf("%s/log", dir), *ctx, *df, *res, *p;
	char buf[4096], line[4096];
	struct sbx_err err = {0};
	int logfd, fd, pp[2], out, status, i;
	size_t k, ln = 0;
	ssize_t n;
	json_t *h;
	pid_t pid;

	(void)fds;
	(void)nfds;
	logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0)
		_exit(1);
	ctx = sbx_xasprintf("%s/ctx", dir);
	df = sbx_xasprintf("%s/Dockerfile", dir);
	res = sbx_xasprintf("%s/result", dir);
	if (sbx_mkdirs(ctx, 0700, &err) < 0 || chdir(ctx) < 0) {
		log_line(logfd, "error", err.msg[0] ? err.msg :
		    "cannot make the build context");
		_exit(1);
	}
	json_array_foreach(json_object_get(args, "hashes"), k, h) {
		p = sbx_xasprintf("%s/files/%s", files, json_string_value(h));
		fd = open(p, O_RDONLY | O_CLOEXEC);
		free(p);
		if (fd < 0 || sbx_tar_extract(fd, &err) < 0) {
			snprintf(line, sizeof line, "the files of COPY step "
			    "%zu: %s", k + 1, fd < 0 ? strerror(errno) :
			    err.msg);
			log_line(logfd, "error", line);
			_exit(1);
		}
		close(fd);
	}
	if (json_object_get(args, "registry") &&
	    registry_creds(json_object_get(args, "registry"), line,
	    sizeof line) < 0) {
		log_line(logfd, "error", line);
		_exit(1);
	}
	if (pipe2(pp, O_CLOEXEC) < 0 || (out = open(res, O_WRONLY | O_CREAT |
	    O_TRUNC | O_CLOEXEC, 0600)) < 0 || (pid = fork()) < 0) {
		log_line(logfd, "error", "cannot start the builder");
		_exit(1);
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 ||
		    dup2(pp[1], 2) < 0)
			_exit(127);
		execl(tool, "sbx-image", "build", "-b", "local", "-t",
		    sbx_json_str(args, "name"), "-f", df, ctx, (char *)NULL);
		dprintf(2, "cannot run %s: %s\n", tool, strerror(errno));
		_exit(127);
	}
	close(pp[1]);
	close(out);
	/* Each line of the builder's stderr an entry. */
	while ((n = read(pp[0], buf, sizeof buf)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (i = 0; i < n; i++) {
			if (buf[i] != '\n' && ln < sizeof line - 1) {
				line[ln++] = buf[i];
				continue;
			}
			line[ln] = 0;
			if (ln)
				log_line(logfd, strncmp(line, "sbx-image: ",
				    11) ? "info" : "error", line);
			ln = 0;
		}
	}
	if (ln) {
		line[ln] = 0;
		log_line(logfd, "info", line);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		snprintf(line, sizeof line, "the build failed (sbx-image exit "
		    "status %d)", WIFEXITED(status) ? WEXITSTATUS(status) :
		    128 + WTERMSIG(status));
		log_line(logfd, "error", line);
		_exit(1);
	}
	log_line(logfd, "info", "the template is built");
	_exit(0);
}
