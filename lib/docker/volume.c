/* volume.c - named volumes on docker: the engine's volumes, labelled as
 * sbx's (sbx-volume), mounted by sbx-create --volume NAME:/path */
#include <stdlib.h>
#include <string.h>

#include "docker.h"

/* Its entry, as the local backend's: {"backend","name","created"}. */
static json_t *
vol_entry(const json_t *v)
{
	return json_pack("{sssssO}", "backend", "docker", "name",
	    sbx_json_str(v, "Name"), "created", json_object_get(v,
	    "CreatedAt") ? json_object_get(v, "CreatedAt") : json_null());
}

int
sbx_docker_volume_make(struct dk *d, const char *name, json_t **out,
    struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	json_t *body = json_pack("{sss{ss}}", "Name", name, "Labels", MANAGED,
	    "1");
	int rc = -1;

	/* An existing one is the engine's answer too (its labels kept). */
	if (sbx_docker_req(d, "POST", body, &rs, err, "/volumes/create") < 0)
		goto out;
	if ((rs.status != 200 && rs.status != 201) ||
	    !json_is_object(rs.json)) {
		sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot create the volume",
		    err);
		goto out;
	}
	if (out)
		*out = vol_entry(rs.json);
	rc = 0;
out:
	json_decref(body);
	sbx_http_resp_release(&rs);
	return rc;
}

static int
vol_ls(struct dk *d, int (*fn)(json_t *vol, void *arg), void *arg,
    struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	char *q = sbx_http_escape("{\"label\":[\"" MANAGED "\"]}");
	json_t *v, *o;
	size_t i;
	int rc = -1;

	if (sbx_docker_req(d, "GET", NULL, &rs, err, "/volumes?filters=%s",
	    q) < 0)
		goto out;
	if (rs.status != 200 || !json_is_array(json_object_get(rs.json,
	    "Volumes"))) {
		sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot list volumes", err);
		goto out;
	}
	rc = 0;
	json_array_foreach(json_object_get(rs.json, "Volumes"), i, v) {
		o = vol_entry(v);
		if (!rc && fn(o, arg) < 0)
			rc = -1;
		json_decref(o);
	}
out:
	free(q);
	sbx_http_resp_release(&rs);
	return rc;
}

/* Refused while a container (any: a stopped or kept one too, as the
 * engine counts) mounts it, naming them. */
static int
vol_rm(struct dk *d, const char *name, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	char *f = sbx_xasprintf("{\"volume\":[\"%s\"]}", name);
	char *q = sbx_http_escape(f), text[256];
	json_t *ids = json_array(), *c;
	size_t i;
	int rc = -1;

	if (sbx_docker_req(d, "GET", NULL, &rs, err, "/volumes/%s", name) < 0)
		goto out;
	if (rs.status == 404 || (rs.status == 200 && !json_object_get(
	    json_object_get(rs.json, "Labels"), MANAGED))) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no volume '%s'%s", name,
		    rs.status == 200 ? " of sbx's" : "");
		goto out;
	}
	sbx_http_resp_release(&rs);
	if (sbx_docker_req(d, "GET", NULL, &rs, err,
	    "/containers/json?all=1&filters=%s", q) < 0)
		goto out;
	json_array_foreach(rs.json, i, c)
		if (sbx_json_str(c, "Id"))
			json_array_append_new(ids, json_sprintf("%.12s",
			    sbx_json_str(c, "Id")));
	if (json_array_size(ids)) {
		sbx_volume_users_text(ids, text, sizeof text);
		sbx_err_set(err, SBX_EX_FAIL, "volume '%s' is in use by %s",
		    name, text);
		goto out;
	}
	sbx_http_resp_release(&rs);
	if (sbx_docker_req(d, "DELETE", NULL, &rs, err, "/volumes/%s",
	    name) < 0)
		goto out;
	if (rs.status != 204) {
		sbx_docker_fail(&rs, rs.status == 404 ? SBX_EX_NOSANDBOX :
		    SBX_EX_FAIL, "cannot remove the volume", err);
		goto out;
	}
	rc = 0;
out:
	json_decref(ids);
	free(f);
	free(q);
	sbx_http_resp_release(&rs);
	return rc;
}

int
sbx_docker_volume(const char *op, const char *name,
    int (*fn)(json_t *vol, void *arg), void *arg, struct sbx_err *err)
{
	struct dk d;
	json_t *o = NULL;
	int rc;

	if (sbx_docker_open(&d, NULL, err) < 0)
		return -1;
	if (!strcmp(op, "ls"))
		rc = vol_ls(&d, fn, arg, err);
	else if (!strcmp(op, "rm"))
		rc = vol_rm(&d, name, err);
	else if ((rc = sbx_docker_volume_make(&d, name, &o, err)) == 0 &&
	    fn && fn(o, arg) < 0)
		rc = -1;
	json_decref(o);
	sbx_docker_close(&d);
	return rc;
}
