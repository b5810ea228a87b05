/* client.c - the docker backend's client of the Engine API: the connection,
 * requests, errors, and what an inspect says */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "docker.h"

void
sbx_docker_close(struct dk *d)
{
	sbx_http_free(d->h);
	free(d->endpoint);
	memset(d, 0, sizeof *d);
}

const char *
sbx_docker_host(void)
{
	const char *mine = getenv("SBX_DOCKER_HOST"), *env =
	    getenv("DOCKER_HOST");

	/* docker's own variable above our config file, as any variable. */
	if (mine && *mine)
		return mine;
	return env && *env ? env : sbx_config_get("docker.host",
	    DEFAULT_HOST);
}

/* Asked before every look across all backends: an engine that is not
 * there must cost next to nothing, one far away little more. */
#define ANSWERS_MS 1500L

int
sbx_docker_answers(void)
{
	struct sbx_http_req rq = {.method = "GET", .path = "/_ping",
	    .in_fd = -1, .out_fd = -1, .timeout_ms = ANSWERS_MS};
	struct sbx_http_resp rs;
	struct sbx_http *h;
	struct sbx_err err;
	int ok = 0;

	if (!(h = sbx_http_new(sbx_docker_host(), &err)))
		return 0;
	if (sbx_http_do(h, &rq, &rs, &err) == 0) {
		ok = rs.status == 200;
		sbx_http_resp_release(&rs);
	}
	sbx_http_free(h);
	return ok;
}

/* Reach the engine of endpoint (NULL: sbx_docker_host) and agree on an
 * API version. */
int
sbx_docker_open(struct dk *d, const char *endpoint, struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "GET", .path = "/_ping",
	    .in_fd = -1, .out_fd = -1, .idempotent = 1};
	struct sbx_http_resp rs;
	const char *v;
	char ver[32];
	int major, minor;

	memset(d, 0, sizeof *d);
	if (!endpoint)
		endpoint = sbx_docker_host();
	d->endpoint = sbx_xstrdup(endpoint);
	if (!(d->h = sbx_http_new(endpoint, err)))
		goto fail;
	if (sbx_http_do(d->h, &rq, &rs, err) < 0) {
		char why[sizeof err->msg];
		const char *p = strstr(err->msg, "': ");

		snprintf(why, sizeof why, "%s", p ? p + 3 : err->msg);
		sbx_err_set(err, SBX_EX_FAIL, "cannot reach the Docker engine "
		    "at '%s': %s", endpoint, why);
		goto fail;
	}
	/* The cheapest request there is, and it says the version. */
	v = sbx_http_header(&rs, "Api-Version", ver, sizeof ver);
	if (rs.status != 200 || !v || sscanf(v, "%d.%d", &major, &minor) != 2) {
		sbx_err_set(err, SBX_EX_FAIL, "'%s' does not answer as a "
		    "Docker engine (status %ld)", endpoint, rs.status);
		sbx_http_resp_release(&rs);
		goto fail;
	}
	sbx_http_resp_release(&rs);
	if (major != API_MAJOR || minor < API_MIN) {
		sbx_err_set(err, SBX_EX_FAIL, "the Docker engine at '%s' "
		    "speaks API %d.%d; sbx needs %d.%d or later", endpoint,
		    major, minor, API_MAJOR, API_MIN);
		goto fail;
	}
	d->minor = minor < API_WANT ? minor : API_WANT;
	return 0;
fail:
	sbx_docker_close(d);
	return -1;
}

/* A request to the versioned API; fmt gives the path. */
int __attribute__((format(printf, 6, 7)))
sbx_docker_req(struct dk *d, const char *method, json_t *body,
    struct sbx_http_resp *rs, struct sbx_err *err, const char *fmt, ...)
{
	struct sbx_http_req rq = {.method = method, .body = body, .in_fd = -1,
	    .out_fd = -1};
	char *path, *full;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	path = sbx_xvasprintf(fmt, ap);
	va_end(ap);
	full = sbx_xasprintf("/v%d.%d%s", API_MAJOR, d->minor, path);
	rq.path = full;
	rq.idempotent = !strcmp(method, "GET");
	rc = sbx_http_do(d->h, &rq, rs, err);
	free(full);
	free(path);
	return rc;
}

/* The engine's own words for a failed request. */
const char *
sbx_docker_msg(const struct sbx_http_resp *rs)
{
	const char *m = sbx_json_str(rs->json, "message");

	return m ? m : rs->body.data ? rs->body.data : "no reason given";
}

#define STREAM_LINE_MAX (1 << 20)

static void
stream_msg(struct sbx_docker_stream *f, const char *p, size_t n)
{
	json_t *j = json_loadb(p, n, 0, NULL);
	const char *s;
	size_t i;

	if (!json_is_object(j)) {
		json_decref(j);
		return;
	}
	s = json_string_value(json_object_get(json_object_get(j,
	    "errorDetail"), "message"));
	if (!s)
		s = json_string_value(json_object_get(j, "error"));
	if (s && !f->error[0]) {
		snprintf(f->error, sizeof f->error, "%s", s);
		/* One line: the engine's message may hold several. */
		for (i = 0; f->error[i]; i++)
			if (f->error[i] == '\n' || f->error[i] == '\r')
				f->error[i] = ' ';
	}
	if (f->on_msg)
		f->on_msg(f, j);
	json_decref(j);
}

int
sbx_docker_stream_body(const char *p, size_t n, void *arg)
{
	struct sbx_docker_stream *f = arg;
	const char *nl;
	size_t k;

	while (n) {
		nl = memchr(p, '\n', n);
		k = nl ? (size_t)(nl - p) + 1 : n;
		sbx_buf_add(&f->line, p, k);
		if (f->line.len > STREAM_LINE_MAX)
			return 1;
		if (nl) {
			stream_msg(f, f->line.data, f->line.len);
			f->line.len = 0;
		}
		p += k;
		n -= k;
	}
	return 0;
}

void
sbx_docker_stream_end(struct sbx_docker_stream *f)
{
	if (f->line.len)
		stream_msg(f, f->line.data, f->line.len);
	f->line.len = 0;
}

int
sbx_docker_fail(const struct sbx_http_resp *rs, int code, const char *what,
    struct sbx_err *err)
{
	return sbx_err_set(err, code, "%s: %s (status %ld)", what,
	    sbx_docker_msg(rs), rs->status);
}

static int
valid_ref_id(const char *id)
{
	return id && *id && strlen(id) < 128 && strspn(id,
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
	    == strlen(id);
}

/* Inspect the container a ref names, which must be one of ours: its
 * inspect object in *out, and the ref's id made its full one. */
int
sbx_docker_find(struct dk *d, const json_t *ref, json_t **out,
    struct sbx_err *err)
{
	const char *id = sbx_json_str(ref, "id");
	struct sbx_http_resp rs;
	json_t *labels;

	*out = NULL;
	if (!valid_ref_id(id))
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    id ? id : "?");
	if (sbx_docker_req(d, "GET", NULL, &rs, err, "/containers/%s/json",
	    id) < 0)
		return -1;
	if (rs.status == 404) {
		sbx_http_resp_release(&rs);
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    id);
	}
	if (rs.status != 200 || !json_is_object(rs.json)) {
		sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot inspect a container",
		    err);
		sbx_http_resp_release(&rs);
		return -1;
	}
	labels = json_object_get(json_object_get(rs.json, "Config"), "Labels");
	if (sbx_labels_ours(labels, id, "container", err) == 0)
		*out = json_incref(rs.json);
	sbx_http_resp_release(&rs);
	return *out ? 0 : -1;
}

int
sbx_docker_ref_open(struct dk *d, const json_t *ref, json_t **c,
    struct sbx_err *err)
{
	if (sbx_docker_open(d, sbx_json_str(ref, "endpoint"), err) < 0)
		return -1;
	if (sbx_docker_find(d, ref, c, err) < 0) {
		sbx_docker_close(d);
		return -1;
	}
	return 0;
}

const char *
sbx_docker_status_of(const json_t *c)
{
	json_t *st = json_object_get(c, "State");
	const char *s = sbx_json_str(st, "Status");
	long long code = sbx_json_int(st, "ExitCode", 0);

	if (!s)
		return "dead";
	if (json_is_true(json_object_get(st, "Paused")) || !strcmp(s,
	    "paused"))
		return "paused";
	if (!strcmp(s, "running") || !strcmp(s, "restarting") ||
	    !strcmp(s, "created"))
		return "running";
	if (!strcmp(s, "removing"))
		return "killed";
	if (code == EXPIRED_CODE)
		return "expired";
	if (code == KILLED_CODE)
		return "killed";
	/* Stopped on purpose (sbx-pause --mode stop): docker's init ends on
	 * the SIGTERM it forwards. A SIGKILL, or an OOM kill, is a death. */
	if (code == 128 + SIGTERM)
		return "stopped";
	return "dead";
}

/* A limit of HostConfig; 0 for none (the engine says 0, -1 or null). */
static uint64_t
hc_u64(const json_t *hc, const char *key)
{
	long long v = sbx_json_int(hc, key, 0);

	return v > 0 ? (uint64_t)v : 0;
}

/* The listing entry, shaped as the local backend's. */
json_t *
sbx_docker_info_of(const json_t *c, const char *endpoint)
{
	json_t *cfg = json_object_get(c, "Config"), *o = json_object();
	json_t *hc = json_object_get(c, "HostConfig");
	json_t *labels = json_object_get(cfg, "Labels"), *mine = json_object();
	const char *k, *name = sbx_json_str(c, "Name");
	long long now = sbx_now(), created;
	json_t *v;

	json_object_foreach(labels, k, v)
		if (strncmp(k, LABEL_PREFIX, strlen(LABEL_PREFIX)))
			json_object_set(mine, k, v);
	created = sbx_time_parse(sbx_json_str(c, "Created"));
	json_object_set_new(o, "backend", json_string("docker"));
	json_object_set_new(o, "id", json_string(sbx_json_str(c, "Id")));
	json_object_set_new(o, "name", name && name[0] == '/' && name[1] &&
	    sbx_json_str(labels, "io.sbx.named") ? json_string(name + 1) :
	    json_null());
	json_object_set_new(o, "status", json_string(sbx_docker_status_of(c)));
	json_object_set(o, "image", json_object_get(cfg, "Image") ?
	    json_object_get(cfg, "Image") : json_null());
	json_object_set(o, "workdir", json_object_get(cfg, "WorkingDir") ?
	    json_object_get(cfg, "WorkingDir") : json_null());
	/* The engine does not say when an exec last ran: never "idle". */
	sbx_info_times(o, now, created, -1);
	json_object_set_new(o, "timeout", json_integer(strtoll(
	    sbx_json_str(labels, "io.sbx.timeout") ? sbx_json_str(labels,
	    "io.sbx.timeout") : "0", NULL, 10)));
	json_object_set_new(o, "labels", mine);
	json_object_set_new(o, "processes", json_null());
	json_object_set_new(o, "memory_bytes", json_null());
	json_object_set_new(o, "cpu_s", json_null());
	json_object_set_new(o, "limits", sbx_limits_json(hc_u64(hc,
	    "Memory"), hc_u64(hc, "NanoCpus") / 1000000, hc_u64(hc,
	    "PidsLimit"), hc_u64(hc, "ShmSize")));
	json_object_set_new(o, "dir", json_null());
	json_object_set_new(o, "runtime", json_incref(json_object_get(hc,
	    "Runtime")));
	json_object_set_new(o, "endpoint", json_string(endpoint));
	return o;
}
