/* snapshot.c - sbx-snapshot and sbx-fork on e2b: E2B's snapshots
 * (POST /sandboxes/{id}/snapshots), each a template a sandbox is created
 * from (sbx-create --from: its id as the templateID); files only */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "e2b.h"

/* Where sbx-snapshot keeps what an E2B snapshot came from (E2B says
 * nothing of it): ROOT/.e2b-snapshots/ID.json, for its export. */
static char *
record_path(const char *sid)
{
	return sbx_xasprintf("%s/.e2b-snapshots/%s.json", sbx_local_root(),
	    sid);
}

struct snapfind {
	const char *want;
	char *sid;
};

static int
find_one(json_t *one, void *arg)
{
	struct snapfind *f = arg;
	json_t *names = json_object_get(one, "names"), *v;
	const char *sid = sbx_json_str(one, "snapshotID");
	size_t i;
	int hit = sid && !strcmp(sid, f->want);

	json_array_foreach(names, i, v)
		hit |= json_is_string(v) && !strcmp(json_string_value(v),
		    f->want);
	if (hit && !f->sid) {
		f->sid = sbx_xstrdup(sid);
		return -1;
	}
	return 0;
}

int
sbx_e2b_snap_find(struct eb *e, const char *id_or_name, char **sid,
    struct sbx_err *err)
{
	struct snapfind f = {id_or_name, NULL};

	*sid = NULL;
	if (sbx_e2b_pages(e, "/snapshots?limit=100", "cannot list snapshots",
	    find_one, &f, err) < 0 && !f.sid)
		return -1;
	*sid = f.sid;
	return f.sid ? 0 : 1;
}

json_t *
sbx_e2b_snap_record(const char *sid, const char *endpoint)
{
	char *p;
	json_t *r;

	if (!sid || !*sid || strchr(sid, '/') || sid[0] == '.')
		return NULL;
	p = record_path(sid);
	r = json_load_file(p, 0, NULL);
	free(p);
	if (!json_is_object(r) || !sbx_json_str(r, "image") ||
	    strcmp(sbx_json_str(r, "endpoint") ? sbx_json_str(r, "endpoint") :
	    "", endpoint)) {
		json_decref(r);
		return NULL;
	}
	return r;
}

/* The record of snapshot o (sbx-snapshot's output) taken of sandbox s
 * (GET /sandboxes/ID): its base is the template s came from, or that
 * template's own base when it is a snapshot recorded here (an export is
 * flat). Env values are never kept: their names only. */
static int
record_write(struct eb *e, json_t *o, const json_t *s, struct sbx_err *err)
{
	struct sbx_err ferr = {0};
	char *sid = NULL;
	const json_t *md = json_object_get(s, "metadata");
	const char *t = sbx_json_str(s, "templateID"), *k;
	json_t *r = json_deep_copy(o), *labels = json_object(), *lim, *v;
	json_t *up = sbx_e2b_snap_record(t, sbx_json_str(o, "endpoint"));
	char *dir = sbx_xasprintf("%s/.e2b-snapshots", sbx_local_root());
	char *p = record_path(sbx_json_str(o, "snapshot")), *js;
	uint64_t to;
	int rc = -1;

	json_object_foreach((json_t *)md, k, v)
		if (strncmp(k, LABEL_PREFIX, strlen(LABEL_PREFIX)) &&
		    json_is_string(v))
			json_object_set(labels, k, v);
	json_object_set_new(r, "image", up ? json_incref(json_object_get(up,
	    "image")) : json_string(t ? t : DEFAULT_TEMPLATE));
	if (up && sbx_json_str(up, "unexportable"))
		json_object_set(r, "unexportable", json_object_get(up,
		    "unexportable"));
	else if (!up && t && sbx_e2b_snap_find(e, t, &sid, &ferr) == 0)
		/* A snapshot of E2B's SDK or CLI: what it holds over its
		 * own base, no one can tell. */
		json_object_set_new(r, "unexportable", json_pack("s++",
		    "its sandbox was made from snapshot '", t, "', which was "
		    "not taken by sbx-snapshot here"));
	json_object_set_new(r, "labels", labels);
	if (sbx_json_str(md, WORKDIR))
		json_object_set_new(r, "workdir", json_string(sbx_json_str(md,
		    WORKDIR)));
	lim = json_object();
	if (sbx_json_int(s, "memoryMB", 0) > 0)
		json_object_set_new(lim, "memory", json_integer(sbx_json_int(s,
		    "memoryMB", 0) << 20));
	if (sbx_json_int(s, "cpuCount", 0) > 0)
		json_object_set_new(lim, "cpus_milli", json_integer(
		    sbx_json_int(s, "cpuCount", 0) * 1000));
	if (sbx_json_str(md, "io.sbx.timeout") && sbx_parse_u64(sbx_json_str(
	    md, "io.sbx.timeout"), 1, INT64_MAX, &to) == 0)
		json_object_set_new(lim, "timeout", json_integer((json_int_t)
		    to));
	json_object_set_new(r, "limits", lim);
	json_object_set_new(r, "created_epoch", json_integer(sbx_now()));
	js = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
	if (sbx_mkdirs(dir, 0700, err) == 0 && sbx_file_write_atomic(p, js,
	    strlen(js), 0600, 1, err) == 0)
		rc = 0;
	free(js);
	free(dir);
	free(p);
	free(sid);
	json_decref(up);
	json_decref(r);
	return rc;
}

json_t *
sbx_e2b_snapshot(const json_t *ref, const char *name, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct eb e;
	json_t *s, *body, *o = NULL, *names;
	const char *id, *sid;
	char created[32];
	time_t now = time(NULL);
	struct tm tm;

	if (sbx_e2b_ref_open(&e, ref, &id, &s, err) < 0)
		return NULL;
	body = name ? json_pack("{s:s}", "name", name) : json_object();
	if (sbx_e2b_req(&e, "POST", body, &rs, err, "/sandboxes/%s/snapshots",
	    id) < 0)
		goto out;
	sid = sbx_json_str(rs.json, "snapshotID");
	if (rs.status != 201 && rs.status != 200) {
		sbx_e2b_fail(&rs, "cannot snapshot the sandbox", id, err);
		goto out;
	}
	if (!sid || !*sid) {
		sbx_err_set(err, SBX_EX_DATA, "E2B's snapshot of '%s' has no "
		    "snapshotID", id);
		goto out;
	}
	names = json_object_get(rs.json, "names");
	gmtime_r(&now, &tm);
	strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
	o = json_pack("{s:s,s:O,s:s,s:s,s:s,s:O,s:s,s:b}", "snapshot", sid,
	    "name", json_is_string(json_array_get(names, 0)) ?
	    json_array_get(names, 0) : json_null(), "backend", "e2b",
	    "source", id, "created", created, "image",
	    json_object_get(s, "templateID") ? json_object_get(s,
	    "templateID") : json_null(), "endpoint", e.endpoint, "memory", 0);
	/* Without its record it could never be exported: not taken. */
	if (record_write(&e, o, s, err) < 0) {
		struct sbx_http_resp r2 = {0};
		struct sbx_err e2;

		if (sbx_e2b_req(&e, "DELETE", NULL, &r2, &e2, "/templates/%s",
		    sid) == 0)
			sbx_http_resp_release(&r2);
		json_decref(o);
		o = NULL;
	}
out:
	json_decref(body);
	json_decref(s);
	sbx_http_resp_release(&rs);
	sbx_e2b_close(&e);
	return o;
}

struct snaps {
	int (*fn)(json_t *snap, void *arg);
	void *arg;
	const char *endpoint;
};

static int
snap_one(json_t *one, void *arg)
{
	struct snaps *l = arg;
	json_t *names = json_object_get(one, "names"), *o;
	int rc;

	if (!sbx_json_str(one, "snapshotID"))
		return 0;
	o = json_pack("{s:s,s:O,s:s,s:s}", "snapshot", sbx_json_str(one,
	    "snapshotID"), "name", json_is_string(json_array_get(names, 0)) ?
	    json_array_get(names, 0) : json_null(), "backend", "e2b",
	    "endpoint", l->endpoint);
	rc = l->fn(o, l->arg);
	json_decref(o);
	return rc;
}

/* GET /snapshots, page after page: each {"snapshot","name","backend"}
 * (E2B says no more of one). */
static int
snapshot_ls(int (*fn)(json_t *snap, void *arg), void *arg,
    struct sbx_err *err)
{
	struct snaps l = {fn, arg, NULL};
	struct eb e;
	int rc;

	if (sbx_e2b_open(&e, NULL, err) < 0)
		return -1;
	l.endpoint = e.endpoint;
	rc = sbx_e2b_pages(&e, "/snapshots?limit=100", "cannot list "
	    "snapshots", snap_one, &l, err);
	sbx_e2b_close(&e);
	return rc;
}

/* DELETE /templates/ID, as E2B's SDK deletes a snapshot. */
static int
snapshot_rm(const char *id, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct sbx_err ferr = {0};
	struct eb e;
	json_t *rec;
	char *q, *sid = NULL;
	int rc = -1;

	if (sbx_e2b_open(&e, NULL, err) < 0)
		return -1;
	/* Its id, for its record: a name goes with the snapshot. */
	if (sbx_e2b_snap_find(&e, id, &sid, &ferr) != 0)
		sid = sbx_xstrdup(id);
	q = sbx_http_escape(id);
	if (sbx_e2b_req(&e, "DELETE", NULL, &rs, err, "/templates/%s", q) < 0)
		goto out;
	if (rs.status == 404)
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no snapshot '%s'", id);
	else if (rs.status != 204 && rs.status != 200)
		sbx_err_set(err, SBX_EX_FAIL, "cannot remove snapshot '%s': "
		    "%s", id, sbx_json_str(rs.json, "message") ?
		    sbx_json_str(rs.json, "message") : "the API said no");
	else {
		if ((rec = sbx_e2b_snap_record(sid, e.endpoint))) {
			char *p = record_path(sid);

			unlink(p);
			free(p);
			json_decref(rec);
		}
		rc = 0;
	}
out:
	free(sid);
	free(q);
	sbx_http_resp_release(&rs);
	sbx_e2b_close(&e);
	return rc;
}

int
sbx_e2b_snapshots(const char *op, const char *id,
    int (*fn)(json_t *snap, void *arg), void *arg, struct sbx_err *err)
{
	if (!strcmp(op, "ls"))
		return snapshot_ls(fn, arg, err);
	if (!strcmp(op, "get"))
		return 0;       /* E2B resolves it at create */
	return snapshot_rm(id, err);
}

int
sbx_e2b_snap_export_op(const char *id_or_name, int fd, struct sbx_err *err)
{
	if (!sbx_e2b_snap_export)
		return sbx_err_set(err, SBX_EX_FAIL, "this tool cannot export "
		    "an e2b snapshot (sbx-snapshot does)");
	return sbx_e2b_snap_export(id_or_name, fd, err);
}
