/* snapshot.c - the docker backend's snapshots as images of the engine,
 * each labelled SNAP_LABEL=its id with its meta (sbx-snapshot(1)'s
 * OUTPUT) in SNAP_META_LABEL: listed, found, removed, and made the image
 * of a container (--from). Taking and exporting one (snaptake.c, which
 * needs libarchive) is linked into the tools that do it alone. */
#include <stdlib.h>
#include <string.h>

#include "docker.h"

/* An id as the local store's: snp- and 12 hex digits. */
static int
snap_id_valid(const char *s)
{
	size_t i;

	if (strncmp(s, SNAP_PREFIX, strlen(SNAP_PREFIX)) ||
	    strlen(s) != strlen(SNAP_PREFIX) + 12)
		return 0;
	for (i = strlen(SNAP_PREFIX); s[i]; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return 0;
	return 1;
}

/* The engine's images with label (KEY or KEY=VALUE), as an array. */
json_t *
sbx_docker_snap_images(struct dk *d, const char *label, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	json_t *f = json_pack("{s[s]}", "label", label), *a = NULL;
	char *js = json_dumps(f, JSON_COMPACT), *q = sbx_http_escape(js);

	json_decref(f);
	free(js);
	if (sbx_docker_req(d, "GET", NULL, &rs, err, "/images/json?filters=%s",
	    q) == 0) {
		if (rs.status != 200 || !json_is_array(rs.json))
			sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot list images",
			    err);
		else
			a = json_incref(rs.json);
		sbx_http_resp_release(&rs);
	}
	free(q);
	return a;
}

/* The meta of a listed image (its label's, with its size), or NULL. */
static json_t *
meta_of(const json_t *img)
{
	const json_t *labels = json_object_get(img, "Labels");
	const char *js = sbx_json_str(labels, SNAP_META_LABEL);
	json_t *m = js ? json_loads(js, 0, NULL) : NULL;

	if (!json_is_object(m) || !sbx_json_str(m, "snapshot")) {
		json_decref(m);
		return NULL;
	}
	/* Its own layers: the bytes above its base image. */
	json_object_set_new(m, "size", json_integer(sbx_json_int(img, "Size",
	    0) - sbx_json_int(m, "base_size", 0)));
	json_object_set_new(m, "image_id", json_string(sbx_json_str(img,
	    "Id") ? sbx_json_str(img, "Id") : ""));
	return m;
}

json_t *
sbx_docker_snap_find(struct dk *d, const char *id_or_name,
    struct sbx_err *err)
{
	json_t *a, *m = NULL;
	char *label;

	if (snap_id_valid(id_or_name))
		label = sbx_xasprintf(SNAP_LABEL "=%s", id_or_name);
	else if (sbx_snap_valid_name(id_or_name))
		label = sbx_xasprintf(SNAP_NAME_LABEL "=%s", id_or_name);
	else {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no snapshot '%s'",
		    id_or_name);
		return NULL;
	}
	a = sbx_docker_snap_images(d, label, err);
	free(label);
	if (!a)
		return NULL;
	if (!(m = meta_of(json_array_get(a, 0))))
		sbx_err_set(err, json_array_size(a) ? SBX_EX_DATA :
		    SBX_EX_NOSANDBOX, json_array_size(a) ? "snapshot '%s': "
		    "its image has no meta" : "no snapshot '%s'", id_or_name);
	json_decref(a);
	return m;
}

static int
snap_ls(struct dk *d, int (*fn)(json_t *snap, void *arg), void *arg,
    struct sbx_err *err)
{
	json_t *a = sbx_docker_snap_images(d, SNAP_LABEL, err), *img, *m;
	size_t i;
	int rc = 0;

	if (!a)
		return -1;
	json_array_foreach(a, i, img) {
		if (!(m = meta_of(img)))
			continue;
		json_object_set_new(m, "endpoint", json_string(d->endpoint));
		rc = fn(m, arg);
		json_decref(m);
		if (rc)
			break;
	}
	json_decref(a);
	return rc;
}

/* The containers made from image, by name (comma-separated), or NULL. */
static char *
users_of(struct dk *d, const char *image)
{
	struct sbx_http_resp rs;
	struct sbx_err e;
	struct sbx_buf b = {0};
	json_t *f = json_pack("{s[s]}", "ancestor", image), *c;
	char *js = json_dumps(f, JSON_COMPACT), *q = sbx_http_escape(js);
	const char *n;
	size_t i;

	json_decref(f);
	free(js);
	if (sbx_docker_req(d, "GET", NULL, &rs, &e, "/containers/json?all=1&"
	    "filters=%s", q) == 0) {
		json_array_foreach(rs.json, i, c) {
			n = sbx_json_str(c, "Id");
			if (!n)
				continue;
			if (b.len)
				sbx_buf_add(&b, ", ", 2);
			sbx_buf_add(&b, n, strlen(n) < 12 ? strlen(n) : 12);
		}
		sbx_http_resp_release(&rs);
	}
	free(q);
	if (!b.len)
		return NULL;
	sbx_buf_add(&b, "", 1);
	return b.data;
}

static int
snap_rm(struct dk *d, const char *id_or_name, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	json_t *m = sbx_docker_snap_find(d, id_or_name, err);
	const char *img;
	char *users;
	int rc = 0;

	if (!m)
		return -1;
	img = sbx_json_str(m, "image_id");
	if (sbx_docker_req(d, "DELETE", NULL, &rs, err, "/images/%s", img) <
	    0) {
		json_decref(m);
		return -1;
	}
	if (rs.status == 409) {
		/* A container, running or not, stands on it. */
		users = users_of(d, img);
		rc = sbx_err_set(err, SBX_EX_FAIL, "snapshot '%s' is in use by "
		    "%s", sbx_json_str(m, "snapshot"), users ? users :
		    sbx_docker_msg(&rs));
		free(users);
	} else if (rs.status == 404)
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no snapshot '%s'",
		    id_or_name);
	else if (rs.status != 200)
		rc = sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot remove the "
		    "snapshot's image", err);
	sbx_http_resp_release(&rs);
	json_decref(m);
	return rc;
}

int
sbx_docker_snapshots(const char *op, const char *id,
    int (*fn)(json_t *snap, void *arg), void *arg, struct sbx_err *err)
{
	struct dk d;
	json_t *m;
	int rc = -1;

	if (sbx_docker_open(&d, NULL, err) < 0)
		return -1;
	if (!strcmp(op, "ls"))
		rc = snap_ls(&d, fn, arg, err);
	else if (!strcmp(op, "rm"))
		rc = snap_rm(&d, id, err);
	else if ((m = sbx_docker_snap_find(&d, id, err))) {
		json_object_set_new(m, "endpoint", json_string(d.endpoint));
		rc = fn(m, arg);
		json_decref(m);
	}
	sbx_docker_close(&d);
	return rc;
}

json_t *
sbx_docker_snapshot(const json_t *ref, const char *name, struct sbx_err *err)
{
	if (!sbx_docker_snap_take) {
		sbx_err_set(err, SBX_EX_FAIL, "this tool cannot take a docker "
		    "snapshot (sbx-snapshot and sbx-fork do)");
		return NULL;
	}
	return sbx_docker_snap_take(ref, name, err);
}

int
sbx_docker_snap_export_op(const char *id_or_name, int fd,
    struct sbx_err *err)
{
	if (!sbx_docker_snap_export)
		return sbx_err_set(err, SBX_EX_FAIL, "this tool cannot export "
		    "a docker snapshot (sbx-snapshot does)");
	return sbx_docker_snap_export(id_or_name, fd, err);
}
