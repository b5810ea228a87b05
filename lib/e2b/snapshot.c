/* snapshot.c - sbx-snapshot and sbx-fork on e2b: E2B's snapshots
 * (POST /sandboxes/{id}/snapshots), each a template a sandbox is created
 * from (sbx-create --from: its id as the templateID); files only */
#include <string.h>
#include <time.h>

#include "e2b.h"

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
	struct eb e;
	char *q;
	int rc = -1;

	if (sbx_e2b_open(&e, NULL, err) < 0)
		return -1;
	q = sbx_http_escape(id);
	if (sbx_e2b_req(&e, "DELETE", NULL, &rs, err, "/templates/%s", q) < 0)
		goto out;
	if (rs.status == 404)
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no snapshot '%s'", id);
	else if (rs.status != 204 && rs.status != 200)
		sbx_err_set(err, SBX_EX_FAIL, "cannot remove snapshot '%s': "
		    "%s", id, sbx_json_str(rs.json, "message") ?
		    sbx_json_str(rs.json, "message") : "the API said no");
	else
		rc = 0;
out:
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
