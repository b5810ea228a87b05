/* volume.c - sbx-volume and sbx-create --volume on e2b: E2B's volumes
 * (POST /volumes, GET /volumes, DELETE /volumes/{id}), mounted with a
 * create's volumeMounts; a volume is named, its id E2B's */
#include <stdlib.h>
#include <string.h>

#include "e2b.h"

static json_t *
vol_entry(const json_t *v, const char *endpoint)
{
	return json_pack("{s:s,s:s?,s:s?,s:s}", "backend", "e2b", "name",
	    sbx_json_str(v, "name"), "id", sbx_json_str(v, "volumeID"),
	    "endpoint", endpoint);
}

/* GET /volumes: every one, or the one named name (*found). */
static int
vol_ls(struct eb *e, const char *name, json_t **found,
    int (*fn)(json_t *vol, void *arg), void *arg, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	json_t *v, *o;
	size_t i;
	int rc = -1;

	if (sbx_e2b_req(e, "GET", NULL, &rs, err, "/volumes") < 0)
		goto out;
	if (rs.status != 200 || !json_is_array(rs.json)) {
		sbx_e2b_fail(&rs, "cannot list volumes", NULL, err);
		goto out;
	}
	rc = 0;
	json_array_foreach(rs.json, i, v) {
		if (name) {
			if (found && !*found && sbx_json_str(v, "name") &&
			    !strcmp(sbx_json_str(v, "name"), name))
				*found = json_incref(v);
			continue;
		}
		o = vol_entry(v, e->endpoint);
		if (!rc && fn && fn(o, arg) < 0)
			rc = -1;
		json_decref(o);
	}
out:
	sbx_http_resp_release(&rs);
	return rc;
}

/* POST /volumes; one that exists already is fine, as on the others. */
static int
vol_create(struct eb *e, const char *name, json_t **out, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	json_t *body = json_pack("{s:s}", "name", name), *have = NULL;
	int rc = -1;

	if (vol_ls(e, name, &have, NULL, NULL, err) < 0)
		goto out;
	if (have) {
		*out = vol_entry(have, e->endpoint);
		rc = 0;
		goto out;
	}
	if (sbx_e2b_req(e, "POST", body, &rs, err, "/volumes") < 0)
		goto out;
	if (rs.status != 201 && rs.status != 200) {
		sbx_e2b_fail(&rs, "cannot create the volume", NULL, err);
		goto out;
	}
	*out = vol_entry(rs.json, e->endpoint);
	rc = 0;
out:
	json_decref(have);
	json_decref(body);
	sbx_http_resp_release(&rs);
	return rc;
}

static int
vol_rm(struct eb *e, const char *name, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	json_t *have = NULL;
	char *q = NULL;
	int rc = -1;

	if (vol_ls(e, name, &have, NULL, NULL, err) < 0)
		goto out;
	if (!have || !sbx_json_str(have, "volumeID")) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no volume '%s'", name);
		goto out;
	}
	q = sbx_http_escape(sbx_json_str(have, "volumeID"));
	if (sbx_e2b_req(e, "DELETE", NULL, &rs, err, "/volumes/%s", q) < 0)
		goto out;
	if (rs.status == 404)
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no volume '%s'", name);
	else if (rs.status == 409)
		sbx_err_set(err, SBX_EX_FAIL, "%s", sbx_json_str(rs.json,
		    "message") ? sbx_json_str(rs.json, "message") :
		    "the volume is in use");
	else if (rs.status != 204 && rs.status != 200)
		sbx_e2b_fail(&rs, "cannot remove the volume", NULL, err);
	else
		rc = 0;
out:
	free(q);
	json_decref(have);
	sbx_http_resp_release(&rs);
	return rc;
}

int
sbx_e2b_volume(const char *op, const char *name,
    int (*fn)(json_t *vol, void *arg), void *arg, struct sbx_err *err)
{
	struct eb e;
	json_t *o = NULL;
	int rc;

	if (sbx_e2b_open(&e, NULL, err) < 0)
		return -1;
	if (!strcmp(op, "ls"))
		rc = vol_ls(&e, NULL, NULL, fn, arg, err);
	else if (!strcmp(op, "rm"))
		rc = vol_rm(&e, name, err);
	else if ((rc = vol_create(&e, name, &o, err)) == 0 && fn &&
	    fn(o, arg) < 0)
		rc = -1;
	json_decref(o);
	sbx_e2b_close(&e);
	return rc;
}
