/* stats.c - sbx-stats on e2b: E2B's metrics API, its latest sample
 * (GET /sandboxes/{id}/metrics); it says neither processes nor network */
#include <string.h>

#include "e2b.h"

/* A byte count of the sample's, or null. */
static json_t *
bytes(const json_t *m, const char *k)
{
	json_t *v = json_object_get(m, k);

	return json_is_integer(v) && json_integer_value(v) >= 0 ?
	    json_integer(json_integer_value(v)) : json_null();
}

json_t *
sbx_e2b_stats(const json_t *ref, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct eb e;
	json_t *s, *o, *m = NULL, *v, *one;
	const char *id, *st;
	size_t i;

	if (sbx_e2b_ref_open(&e, ref, &id, &s, err) < 0)
		return NULL;
	st = sbx_json_str(s, "state") ? sbx_json_str(s, "state") : "";
	if (strcmp(st, "running") && strcmp(st, "paused")) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%s' is not "
		    "running", id);
		goto fail;
	}
	if (sbx_e2b_req(&e, "GET", NULL, &rs, err, "/sandboxes/%s/metrics",
	    id) < 0)
		goto fail;
	if (rs.status != 200 || !json_is_array(rs.json)) {
		sbx_e2b_fail(&rs, "cannot read the sandbox's metrics", id, err);
		goto fail;
	}
	/* The latest; none yet (E2B samples every few seconds): nulls. */
	json_array_foreach(rs.json, i, one)
		if (!m || json_integer_value(json_object_get(one,
		    "timestampUnix")) >= json_integer_value(json_object_get(m,
		    "timestampUnix")))
			m = one;
	o = json_object();
	json_object_set_new(o, "backend", json_string("e2b"));
	json_object_set_new(o, "id", json_string(id));
	json_object_set_new(o, "status", json_string(st));
	/* E2B measures the share of all its CPUs: 100 a CPU, as the
	 * others say it. */
	json_object_set_new(o, "cpu_s", json_null());
	v = json_object_get(m, "cpuUsedPct");
	json_object_set_new(o, "cpu_pct", json_is_number(v) &&
	    json_is_integer(json_object_get(m, "cpuCount")) ?
	    json_real(json_number_value(v) * (double)json_integer_value(
	    json_object_get(m, "cpuCount"))) : json_null());
	v = json_object_get(m, "cpuCount");
	json_object_set_new(o, "cpus", json_is_integer(v) ?
	    json_real((double)json_integer_value(v)) : json_null());
	/* Its memUsed leaves the page cache out, which the others count. */
	v = bytes(m, "memUsed");
	one = bytes(m, "memCache");
	json_object_set_new(o, "memory_bytes", json_is_integer(v) ?
	    json_integer(json_integer_value(v) + (json_is_integer(one) ?
	    json_integer_value(one) : 0)) : json_null());
	json_decref(v);
	json_object_set_new(o, "memory_limit", bytes(m, "memTotal"));
	json_object_set_new(o, "memory_cache", one);
	json_object_set_new(o, "disk_bytes", bytes(m, "diskUsed"));
	json_object_set_new(o, "disk_limit", bytes(m, "diskTotal"));
	json_object_set_new(o, "pids", json_null());
	json_object_set_new(o, "pids_limit", json_null());
	json_object_set_new(o, "net_rx_bytes", json_null());
	json_object_set_new(o, "net_tx_bytes", json_null());
	sbx_http_resp_release(&rs);
	json_decref(s);
	sbx_e2b_close(&e);
	return o;
fail:
	sbx_http_resp_release(&rs);
	json_decref(s);
	sbx_e2b_close(&e);
	return NULL;
}
