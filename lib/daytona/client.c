/* client.c - the daytona backend's clients: the control plane's REST API
 * (the key, requests, errors, a sandbox, its state) and the toolbox's */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daytona.h"

/* The key of this process, kept out of a server's message; set by
 * sbx_dt_open. */
static char *the_key;

#define BEARER "Authorization: Bearer "

const char *
sbx_dt_endpoint_config(void)
{
	const char *mine = getenv("SBX_DAYTONA_ENDPOINT"), *env =
	    getenv("DAYTONA_API_URL");

	if (mine && *mine)
		return mine;
	return env && *env ? env : sbx_config_get("daytona.endpoint", NULL);
}

int
sbx_dt_answers(void)
{
	char *key;

	if (!sbx_dt_endpoint_config())
		return 0;
	if (!(key = sbx_cred_get("DAYTONA_API_KEY", "daytona", NULL)))
		return 0;
	explicit_bzero(key, strlen(key));
	free(key);
	return 1;
}

static void
wipe(char **s)
{
	if (*s) {
		explicit_bzero(*s, strlen(*s));
		free(*s);
		*s = NULL;
	}
}

void
sbx_dt_close(struct dt *d)
{
	sbx_http_free(d->h);
	free(d->endpoint);
	if (d->auth && the_key == d->auth + strlen(BEARER))
		the_key = NULL;
	wipe(&d->auth);
	memset(d, 0, sizeof *d);
}

static int
url_ok(const char *u)
{
	return !strncmp(u, "http://", 7) || !strncmp(u, "https://", 8);
}

int
sbx_dt_open(struct dt *d, const char *endpoint, struct sbx_err *err)
{
	const char *env = sbx_dt_endpoint_config();
	size_t n;
	char *key;

	memset(d, 0, sizeof *d);
	if (!(key = sbx_cred_key("DAYTONA_API_KEY", "daytona", "Daytona",
	    err)))
		return -1;
	d->auth = sbx_xasprintf(BEARER "%s", key);
	explicit_bzero(key, strlen(key));
	free(key);
	the_key = d->auth + strlen(BEARER);
	d->hdrs[0] = d->auth;
	d->endpoint = sbx_xstrdup(endpoint && *endpoint ? endpoint :
	    env && *env ? env : DT_DEFAULT_API);
	/* "http://host/api/" and "http://host/api" are one API. */
	n = strlen(d->endpoint);
	while (n > 8 && d->endpoint[n - 1] == '/')
		d->endpoint[--n] = '\0';
	if (!url_ok(d->endpoint)) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid endpoint '%s' (http:// "
		    "or https://)", d->endpoint);
		sbx_dt_close(d);
		return -1;
	}
	if (!(d->h = sbx_http_new(d->endpoint, err))) {
		sbx_dt_close(d);
		return -1;
	}
	return 0;
}

int __attribute__((format(printf, 6, 7)))
sbx_dt_req(struct dt *d, const char *method, json_t *body,
    struct sbx_http_resp *rs, struct sbx_err *err, const char *fmt, ...)
{
	struct sbx_http_req rq = {.method = method, .body = body, .in_fd = -1,
	    .out_fd = -1, .headers = d->hdrs};
	char *path;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	path = sbx_xvasprintf(fmt, ap);
	va_end(ap);
	rq.path = path;
	rq.idempotent = !strcmp(method, "GET") || !strcmp(method, "DELETE");
	rc = sbx_http_do(d->h, &rq, rs, err);
	free(path);
	return rc;
}

static int
has(const char *hay, const char *needle)
{
	return hay && strcasestr(hay, needle) != NULL;
}

int
sbx_dt_fail(const struct sbx_http_resp *rs, const char *what, const char *id,
    struct sbx_err *err)
{
	char why[256];

	if (rs->status == 401 || rs->status == 403)
		return sbx_err_set(err, SBX_EX_CRED, "the Daytona API key was "
		    "rejected (status %ld)", rs->status);
	if (rs->status == 404 && id)
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    id);
	sbx_http_reason(rs, the_key, why, sizeof why);
	if (has(why, "no available runners") || has(why, "no runners"))
		return sbx_err_set(err, SBX_EX_FAIL, "%s: Daytona has no "
		    "runner free for it in this region now (%s); try again "
		    "later, or another region or snapshot", what, why);
	if (has(why, "limit exceeded") || has(why, "quota"))
		return sbx_err_set(err, SBX_EX_FAIL, "%s: %s (status %ld; "
		    "stopped sandboxes keep their disk: sbx-ls -b daytona, "
		    "sbx-kill what you no longer need)", what, why,
		    rs->status);
	if (rs->status == 429)
		return sbx_err_set(err, SBX_EX_FAIL, "%s: Daytona's rate limit "
		    "held after %d tries: %s", what, 4, why);
	return sbx_err_set(err, SBX_EX_FAIL, "%s: %s (status %ld)", what, why,
	    rs->status);
}

int
sbx_dt_valid_id(const char *id)
{
	return id && *id && strlen(id) < 128 && strspn(id,
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
	    == strlen(id);
}

int
sbx_dt_get(struct dt *d, const char *id, json_t **out, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	const char *st;

	*out = NULL;
	if (!sbx_dt_valid_id(id))
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    id ? id : "?");
	if (sbx_dt_req(d, "GET", NULL, &rs, err, "/sandbox/%s", id) < 0)
		return -1;
	if (rs.status != 200 || !json_is_object(rs.json)) {
		sbx_dt_fail(&rs, "cannot look at a sandbox", id, err);
		sbx_http_resp_release(&rs);
		return -1;
	}
	st = sbx_json_str(rs.json, "state");
	if (st && (!strcmp(st, "destroyed") || !strcmp(st, "destroying")))
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s' (it is %s)",
		    id, st);
	else if (sbx_labels_ours(json_object_get(rs.json, "labels"), id,
	    "sandbox", err) == 0)
		*out = json_incref(rs.json);
	sbx_http_resp_release(&rs);
	return *out ? 0 : -1;
}

int
sbx_dt_ref_open(struct dt *d, const json_t *ref, const char **id, json_t **s,
    struct sbx_err *err)
{
	*id = sbx_json_str(ref, "id");
	*s = NULL;
	if (!sbx_dt_valid_id(*id))
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    *id ? *id : "?");
	if (sbx_dt_open(d, sbx_json_str(ref, "endpoint"), err) < 0)
		return -1;
	if (sbx_dt_get(d, *id, s, err) < 0) {
		sbx_dt_close(d);
		return -1;
	}
	return 0;
}

static int
is(const char *st, const char *want)
{
	return st && !strcmp(st, want);
}

int
sbx_dt_wait(struct dt *d, const char *id, const char *want, long long ms,
    json_t **s, struct sbx_err *err)
{
	long long until = sbx_mono_ms() + ms, pause_ms = 100;
	const char *st = NULL;
	json_t *cur = NULL;

	if (s)
		*s = NULL;
	for (;;) {
		json_decref(cur);
		if (sbx_dt_get(d, id, &cur, err) < 0) {
			/* An ephemeral one is deleted as it stops. */
			if (err->code == SBX_EX_NOSANDBOX && is(want, "stopped"))
				return 0;
			return -1;
		}
		st = sbx_json_str(cur, "state");
		if (is(st, want) || (is(want, "stopped") && (is(st,
		    "archived"))))
			break;
		if (is(st, "error") || is(st, "build_failed")) {
			sbx_err_set(err, SBX_EX_FAIL, "sandbox '%s' is in state "
			    "%s: %s", id, st, sbx_json_str(cur, "errorReason") ?
			    sbx_json_str(cur, "errorReason") : "no reason given");
			json_decref(cur);
			return -1;
		}
		if (sbx_mono_ms() >= until) {
			sbx_err_set(err, SBX_EX_FAIL, "sandbox '%s' is still %s "
			    "after %llds (waiting for %s)", id, st ? st : "?",
			    ms / 1000, want);
			json_decref(cur);
			return -1;
		}
		/* As the SDKs poll: 0.1 s, slower after a while, 1 s at
		 * most. */
		usleep((useconds_t)pause_ms * 1000);
		if (pause_ms < 1000 && ms - (until - sbx_mono_ms()) > 5000)
			pause_ms = pause_ms * 11 / 10 + 1;
	}
	if (s)
		*s = cur;
	else
		json_decref(cur);
	return 0;
}

const char *
sbx_dt_status(const char *st)
{
	static const char *const stopped[] = {"stopped", "stopping",
	    "archived", "archiving", "restoring", NULL};
	size_t i;

	if (!st)
		return "unknown";
	if (!strcmp(st, "started"))
		return "running";
	if (!strcmp(st, "paused") || !strcmp(st, "pausing"))
		return "paused";
	for (i = 0; stopped[i]; i++)
		if (!strcmp(st, stopped[i]))
			return "stopped";
	return st;
}

json_t *
sbx_dt_info_of(const json_t *s, const char *endpoint)
{
	json_t *labels = json_object_get(s, "labels"), *mine = json_object();
	json_t *o = json_object(), *v;
	const char *k, *t, *name = sbx_json_str(s, "name"), *id =
	    sbx_json_str(s, "id");
	long long created, gib = sbx_json_int(s, "memory", 0);

	json_object_foreach(labels, k, v)
		if (strncmp(k, DT_LABEL_PREFIX, strlen(DT_LABEL_PREFIX)) &&
		    strcmp(k, "code-toolbox-language"))
			json_object_set(mine, k, v);
	t = sbx_json_str(labels, DT_CREATED);
	created = t && *t ? strtoll(t, NULL, 10) : 0;
	if (created <= 0)
		created = sbx_time_parse(sbx_json_str(s, "createdAt"));
	t = sbx_json_str(labels, DT_TIMEOUT);
	json_object_set_new(o, "backend", json_string("daytona"));
	json_object_set_new(o, "id", json_string(id ? id : ""));
	/* Daytona names every sandbox (its id when not told): only a name
	 * of its own is one. */
	json_object_set_new(o, "name", name && id && strcmp(name, id) ?
	    json_string(name) : json_null());
	json_object_set_new(o, "status", json_string(sbx_dt_status(
	    sbx_json_str(s, "state"))));
	json_object_set_new(o, "state", json_string(sbx_json_str(s, "state") ?
	    sbx_json_str(s, "state") : "unknown"));
	json_object_set(o, "image", json_is_string(json_object_get(s,
	    "snapshot")) ? json_object_get(s, "snapshot") : json_null());
	json_object_set(o, "workdir", json_is_string(json_object_get(labels,
	    DT_WORKDIR)) ? json_object_get(labels, DT_WORKDIR) : json_null());
	sbx_info_times(o, sbx_now(), created, sbx_time_parse(sbx_json_str(s,
	    "lastActivityAt")));
	json_object_set_new(o, "timeout", json_integer(t ? strtoll(t, NULL,
	    10) : 0));
	json_object_set_new(o, "labels", mine);
	json_object_set_new(o, "processes", json_null());
	json_object_set_new(o, "memory_bytes", gib > 0 && gib <= LLONG_MAX >>
	    30 ? json_integer(gib << 30) : json_null());
	json_object_set_new(o, "cpu_s", json_null());
	json_object_set_new(o, "dir", json_null());
	json_object_set_new(o, "cpus", json_integer(sbx_json_int(s, "cpu",
	    0)));
	json_object_set_new(o, "disk_bytes", sbx_json_int(s, "disk", 0) > 0 ?
	    json_integer(sbx_json_int(s, "disk", 0) << 30) : json_null());
	json_object_set(o, "class", json_is_string(json_object_get(s,
	    "sandboxClass")) ? json_object_get(s, "sandboxClass") :
	    json_null());
	json_object_set_new(o, "endpoint", json_string(endpoint));
	return o;
}

/* --- the toolbox --------------------------------------------------------- */

void
sbx_dt_tb_close(struct dtb *t)
{
	sbx_http_free(t->h);
	free(t->base);
	wipe(&t->auth);
	memset(t, 0, sizeof *t);
}

int
sbx_dt_tb_open(struct dtb *t, const struct dt *d, const json_t *s,
    struct sbx_err *err)
{
	const char *url = sbx_json_str(s, "toolboxProxyUrl"), *id =
	    sbx_json_str(s, "id"), *st = sbx_json_str(s, "state");
	size_t n;

	memset(t, 0, sizeof *t);
	if (!is(st, "started"))
		return sbx_err_set(err, SBX_EX_FAIL, "sandbox '%s' is %s, not "
		    "started", id ? id : "?", st ? st : "in no state");
	if (!url || !url_ok(url) || !sbx_dt_valid_id(id))
		return sbx_err_set(err, SBX_EX_FAIL, "'%s' did not say where "
		    "the toolbox of sandbox '%s' is", d->endpoint, id ? id :
		    "?");
	n = strlen(url);
	while (n > 8 && url[n - 1] == '/')
		n--;
	t->base = sbx_xasprintf("%.*s/%s", (int)n, url, id);
	t->auth = sbx_xstrdup(d->auth);
	t->hdrs[0] = t->auth;
	t->hdrs[1] = "X-Daytona-SDK-Version: " DT_SDK_VERSION;
	if (!(t->h = sbx_http_new(t->base, err))) {
		sbx_dt_tb_close(t);
		return -1;
	}
	return 0;
}

int __attribute__((format(printf, 5, 6)))
sbx_dt_tb_do(struct dtb *t, struct sbx_http_req *rq, struct sbx_http_resp *rs,
    struct sbx_err *err, const char *fmt, ...)
{
	char *path;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	path = sbx_xvasprintf(fmt, ap);
	va_end(ap);
	rq->path = path;
	rq->headers = t->hdrs;
	if (!rq->method)
		rq->method = "GET";
	rc = sbx_http_do(t->h, rq, rs, err);
	rq->path = NULL;
	free(path);
	return rc;
}

int
sbx_dt_tb_fail(const struct sbx_http_resp *rs, const char *what,
    struct sbx_err *err)
{
	char why[256];

	if (rs->status == 401 || rs->status == 403)
		return sbx_err_set(err, SBX_EX_CRED, "the sandbox's toolbox "
		    "refused the Daytona API key (status %ld)", rs->status);
	sbx_http_reason(rs, the_key, why, sizeof why);
	return sbx_err_set(err, SBX_EX_FAIL, "%s: %s (status %ld)", what, why,
	    rs->status);
}
