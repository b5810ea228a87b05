/* secrets.c - sbxd's /secrets: E2B's secrets API on sbx's secret store
 * (the store of the user sbxd runs as; lib/secret.h). No answer ever
 * carries a value. */
#include <stdlib.h>
#include <string.h>

#include "sbxd.h"
#include "../secret.h"

/* A secret's metadata file as E2B's Secret. The id is "sec_" and the
 * name: names never start with "sec_", so either finds the secret. */
static json_t *
secret_json(const json_t *m)
{
	const char *name = sbx_json_str(m, "name");
	char id[80];
	json_t *meta = json_object_get(m, "metadata");

	snprintf(id, sizeof id, "sec_%s", name ? name : "");
	return json_pack("{s:s,s:s,s:I,s:o,s:s,s:s}", "secretID", id,
	    "name", name ? name : "", "currentVersion",
	    (json_int_t)sbx_json_int(m, "version", 1), "metadata",
	    json_is_object(meta) ? json_incref(meta) : json_object(),
	    "createdAt",
	    sbx_json_str(m, "created_at") ? sbx_json_str(m, "created_at") : "",
	    "updatedAt", sbx_json_str(m, "updated_at") ?
	    sbx_json_str(m, "updated_at") : "");
}

/* The path's secret ("sec_NAME" or NAME) as a canonical name into out
 * (65 bytes); -1 after answering 404. */
static int
path_name(struct sbxd_req *r, char *out, enum MHD_Result *ret)
{
	char *seg = sbxd_path_seg(r, 1);
	const char *s = seg ? seg : "";
	struct sbx_err err;

	if (!strncmp(s, "sec_", 4))
		s += 4;
	if (sbx_secret_name(s, out, &err) < 0) {
		*ret = sbxd_reply_err(r, 404, "Secret '%.80s' not found",
		    seg ? seg : "");
		free(seg);
		return -1;
	}
	free(seg);
	return 0;
}

/* A store error as an answer: a missing secret 404, bad input 400, the
 * rest (the store unreadable, refused) 500. */
static enum MHD_Result
store_err(struct sbxd_req *r, const char *name, const struct sbx_err *err)
{
	if (err->code == SBX_EX_USAGE)
		return sbxd_reply_err(r, 400, "%s", err->msg);
	if (err->code == SBX_EX_CRED && !strncmp(err->msg, "no secret ", 10))
		return sbxd_reply_err(r, 404, "Secret '%s' not found", name);
	sbxd_log("secret store: %s", err->msg);
	return sbxd_reply_err(r, 500, "Error in the secret store: %s",
	    err->msg);
}

/* Zero what held a value: the body and the parsed string. */
static void
forget(struct sbxd_req *r, json_t *j)
{
	json_t *v = json_object_get(j, "value");

	if (json_is_string(v))
		explicit_bzero((char *)json_string_value(v),
		    json_string_length(v));
	if (r->body.data)
		explicit_bzero(r->body.data, r->body.len);
	json_decref(j);
}

static int
strmap_ok(const json_t *o)
{
	const char *k;
	json_t *v;

	if (!json_is_object(o))
		return 0;
	json_object_foreach((json_t *)o, k, v)
		if (!json_is_string(v))
			return 0;
	return 1;
}

/* The body's value and metadata, checked; -1 after answering 400. */
static int
body_value(struct sbxd_req *r, json_t *j, const json_t **meta,
    enum MHD_Result *ret)
{
	json_t *v = json_object_get(j, "value"), *m;

	if (!json_is_string(v) || !json_string_length(v)) {
		*ret = sbxd_reply_err(r, 400, "Error when parsing request: "
		    "property \"value\" must be a non-empty string");
		return -1;
	}
	m = json_object_get(j, "metadata");
	if (m && !json_is_null(m) && !strmap_ok(m)) {
		*ret = sbxd_reply_err(r, 400, "Error when parsing request: "
		    "\"metadata\" must map strings to strings");
		return -1;
	}
	*meta = m && !json_is_null(m) ? m : NULL;
	return 0;
}

static enum MHD_Result
h_list(struct sbxd_req *r)
{
	const char *lim = sbxd_query(r, "limit"), *tok = sbxd_query(r,
	    "nextToken");
	struct sbx_err err;
	struct MHD_Response *rs;
	enum MHD_Result ret;
	json_t *all, *arr;
	uint64_t limit = 100;
	size_t i, start = 0, n;
	const char *next = NULL;
	char *s;

	if (lim && *lim && sbx_parse_u64(lim, 1, 100, &limit) < 0)
		return sbxd_reply_err(r, 400, "limit must be 1 to 100");
	if (!(all = sbx_secret_list(&err)))
		return store_err(r, "", &err);
	n = json_array_size(all);
	/* The token is the name of the first secret of the next page. */
	if (tok && *tok)
		while (start < n && strcmp(sbx_json_str(json_array_get(all,
		    start), "name"), tok) < 0)
			start++;
	arr = json_array();
	for (i = start; i < n && i - start < limit; i++)
		json_array_append_new(arr, secret_json(json_array_get(all, i)));
	if (i < n)
		next = sbx_json_str(json_array_get(all, i), "name");
	s = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	rs = MHD_create_response_from_buffer(strlen(s), s,
	    MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(rs, "Content-Type", "application/json");
	if (next)
		MHD_add_response_header(rs, "X-Next-Token", next);
	json_decref(all);
	r->status = 200;
	ret = MHD_queue_response(r->c, 200, rs);
	MHD_destroy_response(rs);
	return ret;
}

static enum MHD_Result
h_create(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = sbxd_body_json(r, &ret), *m, *old;
	const json_t *meta;
	const char *name;
	struct sbx_err err;
	char canon[65];

	if (!j)
		return ret;
	name = sbx_json_str(j, "name");
	if (!name) {
		ret = sbxd_reply_err(r, 400, "Error when parsing request: "
		    "property \"name\" is missing");
		goto out;
	}
	if (sbx_secret_name(name, canon, &err) < 0) {
		ret = sbxd_reply_err(r, 400, "%s", err.msg);
		goto out;
	}
	if (body_value(r, j, &meta, &ret) < 0)
		goto out;
	if ((old = sbx_secret_info(canon, &err))) {
		json_decref(old);
		ret = sbxd_reply_err(r, 409, "Secret with name '%s' already "
		    "exists", canon);
		goto out;
	}
	if (!(m = sbx_secret_set(canon, sbx_json_str(j, "value"),
	    json_string_length(json_object_get(j, "value")),
	    meta ? meta : NULL, &err))) {
		ret = store_err(r, canon, &err);
		goto out;
	}
	ret = sbxd_reply_json(r, 201, secret_json(m));
	json_decref(m);
out:
	forget(r, j);
	return ret;
}

static enum MHD_Result
h_get(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbx_err err;
	char canon[65];
	json_t *m;

	if (path_name(r, canon, &ret) < 0)
		return ret;
	if (!(m = sbx_secret_info(canon, &err)))
		return store_err(r, canon, &err);
	ret = sbxd_reply_json(r, 200, secret_json(m));
	json_decref(m);
	return ret;
}

static enum MHD_Result
h_update(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j, *m;
	const json_t *meta;
	struct sbx_err err;
	char canon[65];

	if (path_name(r, canon, &ret) < 0)
		return ret;
	if (!(j = sbxd_body_json(r, &ret)))
		return ret;
	if (body_value(r, j, &meta, &ret) < 0)
		goto out;
	if (!(m = sbx_secret_info(canon, &err))) {
		ret = store_err(r, canon, &err);
		goto out;
	}
	json_decref(m);
	if (!(m = sbx_secret_set(canon, sbx_json_str(j, "value"),
	    json_string_length(json_object_get(j, "value")), meta, &err))) {
		ret = store_err(r, canon, &err);
		goto out;
	}
	ret = sbxd_reply_json(r, 200, secret_json(m));
	json_decref(m);
out:
	forget(r, j);
	return ret;
}

static enum MHD_Result
h_delete(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbx_err err;
	char canon[65];

	if (path_name(r, canon, &ret) < 0)
		return ret;
	if (sbx_secret_rm(canon, &err) < 0)
		return store_err(r, canon, &err);
	return sbxd_reply_empty(r, 204);
}

const struct sbxd_route sbxd_secret_routes[] = {
	{"GET", "/secrets", 0, h_list, NULL},
	{"POST", "/secrets", 0, h_create, NULL},
	{"GET", "/secrets/*", 0, h_get, NULL},
	{"POST", "/secrets/*", 0, h_update, NULL},
	{"DELETE", "/secrets/*", 0, h_delete, NULL},
	{NULL, NULL, 0, NULL, NULL},
};
