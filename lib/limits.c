/* limits.c - memory, CPU, process and disk limits: parsed once, and by
 * default */
#include <string.h>

#include "sbx.h"

static const struct {
	unsigned cap;
	const char *key, *def, *what;
} keys[] = {
	{SBX_CAP_MEMORY, "limits.memory", SBX_LIMITS_MEMORY_DEFAULT,
	    "memory"},
	{SBX_CAP_CPUS, "limits.cpus", SBX_LIMITS_CPUS_DEFAULT, "cpu"},
	{SBX_CAP_PIDS, "limits.pids", SBX_LIMITS_PIDS_DEFAULT, "pids"},
};

int
sbx_limits_parse(unsigned cap, const char *s, struct sbx_spec *spec)
{
	uint64_t v = 0;

	/* Only "0" itself: "0.0001" CPUs is a mistake, not a wish for
	 * none. */
	if (strcmp(s, "0")) {
		if (cap == SBX_CAP_MEMORY) {
			if (sbx_parse_size(s, &v) < 0 || v < (4u << 20))
				return -1;
		} else if (cap == SBX_CAP_CPUS) {
			if (sbx_parse_milli(s, 1, 4096, &v) < 0)
				return -1;
		} else if (sbx_parse_u64(s, 2, 4194304, &v) < 0) {
			return -1;
		}
	}
	if (cap == SBX_CAP_MEMORY)
		spec->memory = v;
	else if (cap == SBX_CAP_CPUS)
		spec->cpus_milli = v;
	else
		spec->pids = v;
	return 0;
}

int
sbx_limits_default(const struct sbx_backend *be, struct sbx_spec *spec,
    unsigned given, struct sbx_err *err)
{
	struct sbx_spec v;
	char env[64];
	const char *s;
	size_t i;

	for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		if (given & keys[i].cap)
			continue;
		s = sbx_config_get(keys[i].key, keys[i].def);
		if (sbx_limits_parse(keys[i].cap, s, &v) < 0) {
			sbx_config_env(keys[i].key, env, sizeof env);
			return sbx_err_set(err, SBX_EX_USAGE, "invalid %s '%s' "
			    "in the configuration or %s", keys[i].key, s, env);
		}
		if (!strcmp(s, "0"))
			continue;
		if (!(be->caps & keys[i].cap) || be->template_sized) {
			sbx_note("backend '%s' %s: no default %s limit",
			    be->name, be->template_sized ? "sizes a sandbox by "
			    "its template" : "has no such limit",
			    keys[i].what);
			continue;
		}
		if (keys[i].cap == SBX_CAP_MEMORY)
			spec->memory = v.memory;
		else if (keys[i].cap == SBX_CAP_CPUS)
			spec->cpus_milli = v.cpus_milli;
		else
			spec->pids = v.pids;
		spec->limits_default |= keys[i].cap;
	}
	return 0;
}

int
sbx_limits_disk(const struct sbx_backend *be, struct sbx_spec *spec,
    struct sbx_err *err)
{
	const char *s = sbx_config_get("limits.disk", SBX_DISK_DEFAULT);
	uint64_t v;

	if (sbx_parse_size(s, &v) < 0 || (v && (v < SBX_DISK_MIN ||
	    v > SBX_DISK_MAX)))
		return sbx_err_set(err, SBX_EX_USAGE, "invalid limits.disk "
		    "'%s' in the configuration (0, or 16M to 8T)", s);
	/* A default: where it cannot apply, the backend drops it. */
	spec->disk = be->caps & SBX_CAP_DISK ? v : 0;
	spec->disk_default = 1;
	return 0;
}

/* Half: a full /dev/shm is ENOSPC with half the memory left to the
 * processes, rather than an OOM kill (tmpfs pages are charged to the
 * memory cgroup and, without swap, cannot be reclaimed). */
uint64_t
sbx_limits_shm(uint64_t memory)
{
	return memory / 2;
}

json_t *
sbx_limits_json(uint64_t memory, uint64_t cpus_milli, uint64_t pids,
    uint64_t shm)
{
	return json_pack("{s:o,s:o,s:o,s:o}",
	    "memory", memory ? json_integer((json_int_t)memory) : json_null(),
	    "cpus", cpus_milli ? json_real((double)cpus_milli / 1000) :
	    json_null(),
	    "pids", pids ? json_integer((json_int_t)pids) : json_null(),
	    "shm", shm ? json_integer((json_int_t)shm) : json_null());
}
