/* ref.c - how a tool finds its sandbox: --id (an id, name or prefix, in
 * any backend), --state, $SBX_STATE, default */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"

int
sbx_ref_explicit(const struct sbx_target *t)
{
	const char *env = getenv("SBX_STATE");

	return t->id || t->state_path || (env && *env);
}

json_t *
sbx_ref_resolve(const struct sbx_target *t, const char **state_out,
    struct sbx_err *err)
{
	const char *path = t->state_path, *env = getenv("SBX_STATE");
	const char *backend;
	struct sbx_state st;
	json_t *ref;

	if (state_out)
		*state_out = NULL;
	if (t->id) {
		backend = t->backend ? t->backend : sbx_backend_default();
		if (!sbx_backend_find(backend)) {
			sbx_err_set(err, SBX_EX_USAGE, "unknown backend '%s'",
			    backend);
			return NULL;
		}
		sbx_flavour_pick_target(t, 0);
		return sbx_ref_find(t->backend, t->id, err);
	}
	if (!path && env && *env)
		path = env;
	if (!path) {
		path = SBX_STATE_DEFAULT;
		if (access(path, F_OK) < 0 && errno == ENOENT) {
			sbx_err_set(err, SBX_EX_NOSANDBOX,
			    "no sandbox: no --id or --state, and no '%s'", path);
			return NULL;
		}
	}
	if (sbx_state_read(&st, path, err) < 0) {
		if (err && err->code == SBX_EX_NOSANDBOX)
			sbx_err_set(err, SBX_EX_NOSANDBOX,
			    "no sandbox: no state file '%s'", path);
		return NULL;
	}
	ref = json_incref(json_object_get(st.root, "ref"));
	sbx_state_release(&st);
	if (!sbx_json_str(ref, "id") || !sbx_json_str(ref, "backend")) {
		json_decref(ref);
		sbx_err_set(err, SBX_EX_DATA, "'%s': ref has no backend or id",
		    path);
		return NULL;
	}
	if (state_out)
		*state_out = path;
	return ref;
}

int
sbx_ref_check_backend(const json_t *ref, const char *want, const char *path,
    struct sbx_err *err)
{
	const char *have = sbx_json_str(ref, "backend");

	if (!want || (have && !strcmp(have, want)))
		return 0;
	return sbx_err_set(err, SBX_EX_USAGE, "state file '%s' is of backend "
	    "'%s', not '%s'", path, have ? have : "?", want);
}

int
sbx_ref_list(const char *backend, int (*fn)(json_t *info, void *arg),
    void *arg, struct sbx_err *err)
{
	const struct sbx_backend *be;
	struct sbx_err e1;
	size_t i;
	int worst = 0;

	if (backend) {
		if (!(be = sbx_backend_get(backend, err)))
			return -1;
		return be->ops->list(fn, arg, err) < 0 ? -1 : 0;
	}
	for (i = 0; (be = sbx_backend_at(i)); i++) {
		if (!be->ops || (be->ops->answers && !be->ops->answers()))
			continue;
		memset(&e1, 0, sizeof e1);
		if (be->ops->list(fn, arg, &e1) < 0) {
			sbx_warn("cannot list the sandboxes of backend '%s': %s",
			    be->name, e1.msg);
			if ((e1.code ? e1.code : SBX_EX_FAIL) > worst)
				worst = e1.code ? e1.code : SBX_EX_FAIL;
		}
	}
	return worst;
}

/* What sbx_ref_find gathers: the matches of the best kind seen. */
struct find {
	const char *what;
	size_t len;
	int kind;     /* 0 id, 1 name, 2 prefix; 3 none yet */
	json_t *hits; /* the entries of that kind */
};

static int
find_one(json_t *info, void *arg)
{
	struct find *f = arg;
	const char *id = sbx_json_str(info, "id");
	const char *name = sbx_json_str(info, "name");
	int kind;

	if (!id)
		return 0;
	if (!strcmp(id, f->what))
		kind = 0;
	else if (name && !strcmp(name, f->what))
		kind = 1;
	else if (f->len >= SBX_REF_PREFIX_MIN && !strncmp(id, f->what, f->len))
		kind = 2;
	else
		return 0;
	if (kind < f->kind) {
		json_array_clear(f->hits);
		f->kind = kind;
	}
	if (kind == f->kind)
		json_array_append(f->hits, info);
	return 0;
}

static json_t *
ref_of(const json_t *info)
{
	json_t *ref = json_pack("{ssss}", "backend", sbx_json_str(info,
	    "backend"), "id", sbx_json_str(info, "id"));

	if (sbx_json_str(info, "endpoint"))
		json_object_set(ref, "endpoint", json_object_get(info,
		    "endpoint"));
	return ref;
}

static int found;

int
sbx_ref_found(void)
{
	return found;
}

json_t *
sbx_ref_find(const char *backend, const char *what, struct sbx_err *err)
{
	const char *dflt = sbx_backend_default();
	const struct sbx_backend *be = sbx_backend_find(dflt);
	struct find f = {.what = what, .len = strlen(what), .kind = 3};
	struct sbx_err e1;
	json_t *ref = NULL, *info, *probe, *a, *b;

	found = 0;
	/* --backend, or a line of sbx-ls: that backend's own names for its
	 * sandboxes, and not a request more than the tool makes. */
	if (!backend)
		backend = sbx_target_line_backend();
	if (backend)
		return json_pack("{ssss}", "backend", backend, "id", what);
	/* The common case costs one look: the full id of a sandbox of the
	 * default backend. */
	if (be && be->ops && be->ops->info) {
		probe = json_pack("{ssss}", "backend", be->name, "id", what);
		info = be->ops->info(probe, &e1);
		json_decref(probe);
		if (info && sbx_json_str(info, "id") &&
		    !strcmp(sbx_json_str(info, "id"), what)) {
			ref = ref_of(info);
			json_decref(info);
			found = 1;
			return ref;
		}
		json_decref(info);
	}
	f.hits = json_array();
	sbx_ref_list(NULL, find_one, &f, &e1);
	if (json_array_size(f.hits) == 1) {
		ref = ref_of(json_array_get(f.hits, 0));
		found = 1;
	} else if (json_array_size(f.hits) > 1) {
		a = json_array_get(f.hits, 0);
		b = json_array_get(f.hits, 1);
		sbx_err_set(err, SBX_EX_USAGE, "'%s' names more than one "
		    "sandbox: %s '%s' and %s '%s'%s", what,
		    sbx_json_str(a, "backend"), sbx_json_str(a, "id"),
		    sbx_json_str(b, "backend"), sbx_json_str(b, "id"),
		    json_array_size(f.hits) > 2 ? ", and more" : "");
	} else {
		ref = json_pack("{ssss}", "backend", dflt, "id", what);
	}
	json_decref(f.hits);
	return ref;
}
