/* backend.c - the registry of backends */
#include <string.h>

#include "sbx.h"

static const struct sbx_backend *const backends[] = {
	&sbx_local_backend,
};

const char *
sbx_backend_default(void)
{
	return sbx_config_get("backend", "local");
}

const struct sbx_backend *
sbx_backend_get(const char *name, struct sbx_err *err)
{
	size_t i;

	for (i = 0; i < sizeof backends / sizeof backends[0]; i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	sbx_err_set(err, SBX_EX_USAGE, "unknown backend '%s'", name);
	return NULL;
}

const struct sbx_backend *
sbx_backend_of(const json_t *ref, struct sbx_err *err)
{
	const char *name = sbx_json_str(ref, "backend");

	if (!name) {
		sbx_err_set(err, SBX_EX_DATA, "ref names no backend");
		return NULL;
	}
	return sbx_backend_get(name, err);
}
