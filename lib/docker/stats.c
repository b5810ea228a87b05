/* stats.c - sbx-stats on docker: the engine's stats of a container, its
 * writable layer's size, and the limits it was made with */
#include <stdlib.h>
#include <string.h>

#include "docker.h"

/* A number of the engine's, or null where it has none (a limit of 0 or
 * less is none). */
static json_t *
positive(const json_t *v)
{
	return json_is_integer(v) && json_integer_value(v) > 0 ?
	    json_integer(json_integer_value(v)) : json_null();
}

/* The bytes through every network of the container (key: rx_bytes or
 * tx_bytes); null without a network the engine counts. */
static json_t *
net_sum(const json_t *nets, const char *key)
{
	const char *k;
	json_t *v;
	json_int_t n = 0;

	if (!json_is_object(nets) || !json_object_size(nets))
		return json_null();
	json_object_foreach((json_t *)nets, k, v) {
		if (!json_is_integer(json_object_get(v, key)))
			return json_null();
		n += json_integer_value(json_object_get(v, key));
	}
	return json_integer(n);
}

json_t *
sbx_docker_stats(const json_t *ref, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0}, rz = {0};
	struct dk d;
	json_t *c, *o, *s, *hc, *v;
	const char *st, *size;

	if (sbx_docker_ref_open(&d, ref, &c, err) < 0)
		return NULL;
	st = sbx_docker_status_of(c);
	if (strcmp(st, "running") && strcmp(st, "paused")) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%.12s' is not "
		    "running", sbx_json_str(c, "Id"));
		goto fail;
	}
	if (sbx_docker_req(&d, "GET", NULL, &rs, err,
	    "/containers/%s/stats?stream=false&one-shot=true",
	    sbx_json_str(c, "Id")) < 0)
		goto fail;
	if (rs.status != 200 || !json_is_object(rs.json)) {
		sbx_docker_fail(&rs, rs.status == 404 ? SBX_EX_NOSANDBOX :
		    SBX_EX_FAIL, "cannot read the container's stats", err);
		goto fail;
	}
	/* The writable layer's size: a walk of it by the engine. Its state
	 * again: stats of a container that stopped after the first look
	 * come back empty (no memory, no pids), which is its end, not a
	 * reading. */
	if (sbx_docker_req(&d, "GET", NULL, &rz, err,
	    "/containers/%s/json?size=true", sbx_json_str(c, "Id")) < 0)
		goto fail;
	if (rz.status == 404 || (rz.status == 200 && strcmp(
	    sbx_docker_status_of(rz.json), "running") && strcmp(
	    sbx_docker_status_of(rz.json), "paused"))) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%.12s' is not "
		    "running", sbx_json_str(c, "Id"));
		goto fail;
	}
	s = rs.json;
	hc = json_object_get(c, "HostConfig");
	o = json_object();
	json_object_set_new(o, "backend", json_string("docker"));
	json_object_set_new(o, "id", json_string(sbx_json_str(ref, "id")));
	json_object_set_new(o, "status", json_string(st));
	v = json_object_get(json_object_get(json_object_get(s, "cpu_stats"),
	    "cpu_usage"), "total_usage");
	json_object_set_new(o, "cpu_s", json_is_integer(v) ?
	    json_real((double)json_integer_value(v) / 1e9) : json_null());
	json_object_set_new(o, "cpu_pct", json_null());
	v = json_object_get(hc, "NanoCpus");
	json_object_set_new(o, "cpus", json_is_integer(v) &&
	    json_integer_value(v) > 0 ? json_real((double)
	    json_integer_value(v) / 1e9) : json_null());
	json_object_set_new(o, "memory_bytes", positive(json_object_get(
	    json_object_get(s, "memory_stats"), "usage")));
	json_object_set_new(o, "memory_limit", positive(json_object_get(hc,
	    "Memory")));
	/* The page cache in that: cgroup v2's file, v1's cache. */
	v = json_object_get(json_object_get(s, "memory_stats"), "stats");
	v = json_object_get(v, json_object_get(v, "file") ? "file" : "cache");
	json_object_set_new(o, "memory_cache", json_is_integer(v) ?
	    json_integer(json_integer_value(v)) : json_null());
	v = rz.status == 200 ? json_object_get(rz.json, "SizeRw") : NULL;
	json_object_set_new(o, "disk_bytes", json_is_integer(v) &&
	    json_integer_value(v) >= 0 ? json_integer(json_integer_value(v)) :
	    json_null());
	size = sbx_json_str(json_object_get(hc, "StorageOpt"), "size");
	json_object_set_new(o, "disk_limit", size && strtoll(size, NULL, 10) >
	    0 ? json_integer(strtoll(size, NULL, 10)) : json_null());
	json_object_set_new(o, "pids", positive(json_object_get(
	    json_object_get(s, "pids_stats"), "current")));
	json_object_set_new(o, "pids_limit", positive(json_object_get(hc,
	    "PidsLimit")));
	json_object_set_new(o, "net_rx_bytes", net_sum(json_object_get(s,
	    "networks"), "rx_bytes"));
	json_object_set_new(o, "net_tx_bytes", net_sum(json_object_get(s,
	    "networks"), "tx_bytes"));
	sbx_http_resp_release(&rs);
	sbx_http_resp_release(&rz);
	json_decref(c);
	sbx_docker_close(&d);
	return o;
fail:
	sbx_http_resp_release(&rs);
	sbx_http_resp_release(&rz);
	json_decref(c);
	sbx_docker_close(&d);
	return NULL;
}
