/* ref.c - how a tool finds its sandbox: --id, --state, $SBX_STATE, default */
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
		return json_pack("{ssss}", "backend", backend, "id", t->id);
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
