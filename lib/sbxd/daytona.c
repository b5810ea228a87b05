/* daytona.c - Daytona's control plane (/api): its sandboxes are sbxd's */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sbxd.h"
#include "../net/net.h"

#define DT_AUTO_STOP 15         /* minutes, Daytona's defaults */
#define DT_AUTO_ARCHIVE 10080
#define DT_MAX_ARCHIVE 43200
#define DT_LIST_LIMIT 100
/* A minute of the intervals, in ms (sbxd --daytona-minute). */
#define DT_MINUTE_MS ((long long)sbxd.o.dt_minute * 1000)
#define DT_ORG "sbxd"

/* Named creates one at a time: a name is checked and taken at once. */
static pthread_mutex_t create_mu = PTHREAD_MUTEX_INITIALIZER;

void
sbxd_dt_time(long long ms, char *buf, size_t n)
{
	time_t sec = (time_t)(ms / 1000);
	struct tm tm;
	char s[32];

	gmtime_r(&sec, &tm);
	strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, n, "%s.%03lldZ", s, ms % 1000);
}

static const char *
status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 501: return "Not Implemented";
	default: return "Internal Server Error";
	}
}

enum MHD_Result
sbxd_dt_api_err(struct sbxd_req *r, int status, const char *fmt, ...)
{
	char msg[512], ts[40];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	sbxd_dt_time(sbxd_now_ms(), ts, sizeof ts);
	return sbxd_reply_json(r, status, json_pack("{s:s,s:s,s:i,s:s,s:s}",
	    "path", r->path, "timestamp", ts, "statusCode", status, "error",
	    status_text(status), "message", msg));
}

enum MHD_Result
sbxd_dt_tb_err(struct sbxd_req *r, int status, const char *code,
    const char *fmt, ...)
{
	char msg[512], ts[40];
	const char *p = r->path + strlen("/toolbox/");
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	sbxd_dt_time(sbxd_now_ms(), ts, sizeof ts);
	/* The daemon's path: what follows /toolbox/ID. */
	p = strncmp(r->path, "/toolbox/", 9) ? r->path : strchr(p, '/') ?
	    strchr(p, '/') : "/";
	return sbxd_reply_json(r, status, json_pack("{s:i,s:s,s:s,s:s,s:s,"
	    "s:s}", "statusCode", status, "message", msg, "code", code,
	    "timestamp", ts, "path", p, "method", r->method));
}

int
sbxd_dt_path(const char *path)
{
	return !strcmp(path, "/api") || !strncmp(path, "/api/", 5) ||
	    !strncmp(path, "/toolbox/", 9);
}

/* The legacy toolbox route /api/toolbox/ID/toolbox/P: /toolbox/ID/P. */
static void
legacy_path(struct sbxd_req *r)
{
	const char *id, *e;
	char *p;

	if (strncmp(r->path, "/api/toolbox/", 13))
		return;
	id = r->path + 13;
	e = strchr(id, '/');
	if (!e || e == id || strncmp(e, "/toolbox/", 9))
		return;
	p = sbx_xasprintf("/toolbox/%.*s%s", (int)(e - id), id, e + 8);
	free(r->path);
	r->path = p;
}

/* The route of table that r takes, or NULL. */
static const struct sbxd_route *
route_in(const struct sbxd_route *table, const struct sbxd_req *r)
{
	const struct sbxd_route *rt;

	for (rt = table; rt->path; rt++)
		if (sbxd_path_match(rt->path, r->path) &&
		    !strcmp(rt->method, r->method))
			return rt;
	return NULL;
}

const struct sbxd_route *
sbxd_dt_dispatch(struct sbxd_req *r, enum MHD_Result *ret)
{
	const struct sbxd_route *found;
	struct sbxd_box *b;
	int tb, paused;
	char *id;

	legacy_path(r);
	tb = !strncmp(r->path, "/toolbox/", 9);

	if (!tb) {
		if (!(found = route_in(sbxd_dt_api_routes, r)))
			found = route_in(sbxd_dt_snap_routes, r);
	} else if (!(found = route_in(sbxd_dt_tb_routes, r)) &&
	    !(found = route_in(sbxd_dt_sess_routes, r)))
		found = route_in(sbxd_dt_pty_routes, r);
	/* What needs no key: the config, and the event socket's refusal
	 * (its handshake carries the key later, inside the socket). */
	if (!(found && (!strcmp(found->path, "/api/config") ||
	    !strcmp(found->path, "/api/socket.io"))) && !sbxd_key_ok(r)) {
		*ret = tb ? sbxd_dt_tb_err(r, 401, "UNAUTHORIZED",
		    "authentication failed: invalid API key") :
		    sbxd_dt_api_err(r, 401, "Invalid API key");
		return NULL;
	}
	if (!found) {
		*ret = tb ? sbxd_dt_tb_err(r, 404, "NOT_FOUND", "sbxd does not "
		    "serve %s %s (see sbxd(8))", r->method, r->path) :
		    sbxd_dt_api_err(r, 404, "Cannot %s %s", r->method,
		    r->path);
		return NULL;
	}
	if (!tb)
		return found;
	id = sbxd_path_seg(r, 1);
	b = id ? sbxd_box_get(id) : NULL;
	if (!b) {
		*ret = sbxd_dt_tb_err(r, 404, "NOT_FOUND", "sandbox %s not "
		    "found", id ? id : "");
		free(id);
		return NULL;
	}
	free(id);
	r->box = b;
	pthread_mutex_lock(&sbxd.mu);
	paused = b->paused;
	pthread_mutex_unlock(&sbxd.mu);
	if (paused) {
		*ret = sbxd_dt_tb_err(r, 409, "CONFLICT", "sandbox %s is not "
		    "started", b->id);
		return NULL;
	}
	sbxd_dt_touch(b);
	return found;
}

/* The body as a JSON object; NULL after answering 400. */
static json_t *
dt_body(struct sbxd_req *r, enum MHD_Result *ret)
{
	json_t *j = r->body.len ? json_loadb(r->body.data, r->body.len, 0,
	    NULL) : NULL;

	if (!json_is_object(j)) {
		json_decref(j);
		*ret = sbxd_dt_api_err(r, 400, "%s", r->body.len ? "the body "
		    "is not a JSON object" : "the body is empty");
		return NULL;
	}
	return j;
}

/* --- the model ---------------------------------------------------------- */

/* An interval of a box (mu held): what Daytona's API set, else what a
 * sandbox made through E2B's has. */
static long long
dt_int(const struct sbxd_box *b, const char *k)
{
	json_t *v = json_object_get(b->daytona, k);

	if (json_is_integer(v))
		return json_integer_value(v);
	if (!strcmp(k, "autoStopInterval"))
		return 0;
	if (!strcmp(k, "autoArchiveInterval"))
		return DT_AUTO_ARCHIVE;
	return -1;
}

static const char *
dt_name(const struct sbxd_box *b)
{
	const char *n = sbx_json_str(b->daytona, "name");

	return n ? n : b->id;
}

char *
sbxd_dt_user(struct sbxd_box *b)
{
	const char *u;
	char *s;

	pthread_mutex_lock(&sbxd.mu);
	u = sbx_json_str(b->daytona, "user");
	s = sbx_xstrdup(u ? u : "user");
	pthread_mutex_unlock(&sbxd.mu);
	return s;
}

/* The end of a box's life from now (mu held): its auto-stop interval
 * of idleness, or the longest life sbxd gives, from its start. */
static void
dt_set_end(struct sbxd_box *b)
{
	long long now = sbxd_now_ms(), stop = dt_int(b, "autoStopInterval");
	long long cap = b->started_ms + (long long)sbxd.o.max_timeout * 1000;

	stop *= DT_MINUTE_MS;
	b->end_ms = stop > 0 && now + stop < cap ? now + stop : cap;
	/* Ephemeral (auto-delete 0): killed at its end; else stopped,
	 * its processes ended (Daytona's stop). */
	b->auto_pause = dt_int(b, "autoDeleteInterval") != 0;
	b->pause_files_only = 1;
	pthread_cond_broadcast(&sbxd.cv);
}

void
sbxd_dt_stopped(struct sbxd_box *b)
{
	long long n = dt_int(b, "autoDeleteInterval");

	b->delete_ms = n >= 0 ? sbxd_now_ms() + n * DT_MINUTE_MS : 0;
	pthread_cond_broadcast(&sbxd.cv);
}

void
sbxd_dt_touch(struct sbxd_box *b)
{
	pthread_mutex_lock(&sbxd.mu);
	if (dt_int(b, "autoStopInterval") > 0 && !b->paused && !b->busy)
		dt_set_end(b);
	pthread_mutex_unlock(&sbxd.mu);
}

/* A box's Daytona fields with k set to v (mu held): a new object. */
static void
dt_set(struct sbxd_box *b, const char *k, json_t *v)
{
	json_t *d = b->daytona ? json_deep_copy(b->daytona) :
	    json_pack("{s:s,s:s,s:I}", "name", b->id, "user", "user",
	    "createdAt", (json_int_t)b->started_ms);

	json_object_set_new(d, k, v);
	json_object_set_new(d, "updatedAt", json_integer(sbxd_now_ms()));
	json_decref(b->daytona);
	b->daytona = d;
}

/* Where the toolbox is: this server, as the client reached it. */
char *
sbxd_dt_proxy_url(struct sbxd_req *r)
{
	const char *host = sbxd_header(r, "Host");

	return sbx_xasprintf("http://%s/toolbox", host && *host &&
	    !strpbrk(host, "/\\ \"") ? host : sbxd.o.listen);
}

static json_int_t
gib(json_int_t mb)
{
	return (mb + 1023) / 1024;
}

/* Daytona's allow-lists: IPv4 CIDRs, and names ("*.name"). */
static const char *const lists[] = {"networkAllowList", "domainAllowList"};

/* E2B's allowOut (allow) as Daytona's networkAllowList and
 * domainAllowList of j: comma-separated, each there when not empty. */
static void
allow_shown(json_t *j, const json_t *allow)
{
	struct sbx_buf l[2] = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_net_rule nr;
	struct sbx_err err;
	const json_t *v;
	size_t i;
	int k;

	json_array_foreach(allow, i, v) {
		if (!json_is_string(v) || sbx_net_rule_parse(
		    json_string_value(v), &nr, &err) < 0)
			continue;
		k = nr.kind == SBX_NR_CIDR || nr.kind == SBX_NR_ALL ? 0 : 1;
		if (l[k].len)
			sbx_buf_add(&l[k], ",", 1);
		sbx_buf_add(&l[k], json_string_value(v),
		    strlen(json_string_value(v)));
	}
	for (k = 0; k < 2; k++) {
		if (l[k].len)
			json_object_set_new(j, lists[k], json_stringn(l[k].data,
			    l[k].len));
		sbx_buf_release(&l[k]);
	}
}

/* Its class: its snapshot's, "container" (a linux-vm one pauses with its
 * processes, frozen; sbxd(8)). */
static const char *
dt_class(const struct sbxd_box *b)
{
	const char *c = sbx_json_str(b->daytona, "sandboxClass");

	return c ? c : "container";
}

/* Daytona's Sandbox of a box (mu held); full: the fields a list leaves
 * out too. state NULL: the box's own. */
static json_t *
dt_sandbox(struct sbxd_box *b, const char *proxy, int full,
    const char *state)
{
	json_int_t cpus, mem, disk;
	long long created = sbx_json_int(b->daytona, "createdAt",
	    b->started_ms), stop = dt_int(b, "autoStopInterval");
	char c[40], u[40], a[40];
	json_t *j;

	sbxd_box_size(b, &cpus, &mem, &disk);
	sbxd_dt_time(created, c, sizeof c);
	sbxd_dt_time(sbx_json_int(b->daytona, "updatedAt", created), u,
	    sizeof u);
	sbxd_dt_time(stop > 0 && !b->paused ? b->end_ms - stop * DT_MINUTE_MS :
	    sbx_json_int(b->daytona, "updatedAt", created), a, sizeof a);
	if (!state)
		state = !b->paused ? "started" : json_is_true(json_object_get(
		    b->daytona, "vmPaused")) ? "paused" : json_is_true(
		    json_object_get(b->daytona, "archived")) ? "archived" :
		    "stopped";
	j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:O,s:b,s:s,s:I,s:i,s:I,s:I,"
	    "s:s,s:s,s:s,s:I,s:I,s:I,s:s,s:s,s:s,s:s,s:s,s:s,s:b}",
	    "id", b->id, "organizationId", DT_ORG, "name", dt_name(b),
	    "snapshot", sbx_json_str(b->daytona, "snapshot") ?
	    sbx_json_str(b->daytona, "snapshot") : b->template, "user",
	    sbx_json_str(b->daytona, "user") ? sbx_json_str(b->daytona,
	    "user") : "user", "labels", b->metadata, "public", !b->traffic[0],
	    "target", "local", "cpu", cpus, "gpu", 0, "memory", gib(mem),
	    "disk", disk ? gib(disk) : (json_int_t)0, "state", state,
	    "desiredState", state, "backupState", "None", "autoStopInterval",
	    (json_int_t)stop, "autoArchiveInterval",
	    (json_int_t)dt_int(b, "autoArchiveInterval"),
	    "autoDeleteInterval", (json_int_t)dt_int(b, "autoDeleteInterval"),
	    "createdAt", c, "updatedAt", u, "lastActivityAt", a,
	    "toolboxProxyUrl", proxy, "sandboxClass", dt_class(b),
	    "daemonVersion", SBX_VERSION, "recoverable", 0);
	if (full) {
		json_object_set(j, "env", b->envs);
		json_object_set_new(j, "networkBlockAll",
		    json_boolean(!b->internet));
		allow_shown(j, json_object_get(b->network, "allowOut"));
		json_object_set_new(j, "volumes", json_array());
	}
	return j;
}

static enum MHD_Result
reply_box(struct sbxd_req *r, int status, struct sbxd_box *b,
    const char *state)
{
	char *proxy = sbxd_dt_proxy_url(r);
	json_t *j;

	pthread_mutex_lock(&sbxd.mu);
	j = dt_sandbox(b, proxy, 1, state);
	pthread_mutex_unlock(&sbxd.mu);
	free(proxy);
	return sbxd_reply_json(r, status, j);
}

/* The box of an id or a name, with a ref; NULL. */
static struct sbxd_box *
box_find(const char *s)
{
	struct sbxd_box *b = sbxd_box_get(s);

	if (b)
		return b;
	pthread_mutex_lock(&sbxd.mu);
	for (b = sbxd.boxes; b; b = b->next)
		if (!b->gone && !strcmp(dt_name(b), s))
			break;
	if (b)
		b->refs++;
	pthread_mutex_unlock(&sbxd.mu);
	return b;
}

static struct sbxd_box *
path_box(struct sbxd_req *r, enum MHD_Result *ret)
{
	char *id = sbxd_path_seg(r, 2);
	struct sbxd_box *b = id ? box_find(id) : NULL;

	if (!b)
		*ret = sbxd_dt_api_err(r, 404, "Sandbox with ID or name %s not "
		    "found", id ? id : "");
	free(id);
	return b;
}

/* The path's box taken for a change of state; NULL after answering
 * (404, or 409 when one is under way). */
static struct sbxd_box *
path_box_take(struct sbxd_req *r, enum MHD_Result *ret)
{
	struct sbxd_box *b = path_box(r, ret);

	if (!b || sbxd_box_take(b) == 0)
		return b;
	*ret = sbxd_dt_api_err(r, 409, "Sandbox state change in progress");
	sbxd_box_put(b);
	return NULL;
}

/* A taken box given back and let go; ret MHD_YES with nothing answered
 * yet: it is answered with its state now. */
static enum MHD_Result
box_done(struct sbxd_req *r, struct sbxd_box *b, enum MHD_Result ret)
{
	sbxd_box_give(b);
	if (ret == MHD_YES && !r->status)
		ret = reply_box(r, 200, b, NULL);
	sbxd_box_put(b);
	return ret;
}

/* --- routes -------------------------------------------------------------- */

static enum MHD_Result
h_config(struct sbxd_req *r)
{
	char *proxy = sbxd_dt_proxy_url(r);
	json_t *j;

	j = json_pack("{s:s,s:{s:s,s:s,s:s},s:b,s:{},s:s,s:s,s:s,s:s,s:i,"
	    "s:b,s:s}", "version", SBX_VERSION, "oidc", "issuer", "",
	    "clientId", "", "audience", "", "linkedAccountsEnabled", 0,
	    "announcements", "proxyTemplateUrl", "", "proxyToolboxUrl", proxy,
	    "defaultSnapshot", "base", "dashboardUrl", "", "maxAutoArchiveInterval",
	    DT_MAX_ARCHIVE, "maintananceMode", 0, "environment", "sbxd");
	free(proxy);
	return sbxd_reply_json(r, 200, j);
}

static int
strmap_ok(const json_t *o)
{
	return json_is_null(o) || sbxd_strmap_ok(o);
}

/* An interval of the create body (minutes, at least min), def when it
 * is not there; -2 when it is bad. */
static long long
body_interval(const json_t *j, const char *k, long long min, long long def)
{
	json_t *v = json_object_get(j, k);

	if (!v || json_is_null(v))
		return def;
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > 1000000000)
		return -2;
	return json_integer_value(v);
}

static int
name_taken(const char *name)
{
	struct sbxd_box *b;
	int taken = 0;

	pthread_mutex_lock(&sbxd.mu);
	for (b = sbxd.boxes; b; b = b->next)
		taken |= !b->gone && (!strcmp(dt_name(b), name) ||
		    !strcmp(b->id, name));
	pthread_mutex_unlock(&sbxd.mu);
	return taken;
}

/* Whether the box's sandbox has the user (the files helper knows it). */
static int
user_ok(struct sbxd_box *b, const char *user)
{
	json_t *a = sbxd_inbox_do(b, json_pack("{s:s,s:s,s:s}", "op", "user",
	    "user", user, "path", "/"), NULL);
	int ok = a && !sbx_json_str(a, "error");

	json_decref(a);
	return ok;
}

static const char *const refused[] = {"cpu", "memory", "disk", "gpu",
    "gpuType", NULL};
static const char *const not_served[] = {"volumes",
    "linkedSandbox", "secrets",
    "autoPauseInterval", "ttlMinutes", "spot", "kvm", "outboundProxyUrl",
    "otelEndpointOverride", NULL};

/* Whether a field asks for something: not null, false, 0, "" or []. */
static int
asks(const json_t *v)
{
	return v && !json_is_null(v) && !json_is_false(v) &&
	    !(json_is_integer(v) && !json_integer_value(v)) &&
	    !(json_is_array(v) && !json_array_size(v)) &&
	    !(json_is_object(v) && !json_object_size(v)) &&
	    !(json_is_string(v) && !*json_string_value(v));
}

int
sbxd_dt_size(struct sbxd_req *r, const json_t *j, struct sbxd_new *o,
    enum MHD_Result *ret)
{
	static const char *const k[] = {"cpu", "memory", "disk"};
	static const char *const what[] = {"CPU", "Memory", "Disk"};
	static const json_int_t max[] = {4, 8, 10};
	json_int_t v[3] = {0, 0, 0};
	json_t *x;
	int i;

	for (i = 0; i < 3; i++) {
		x = json_object_get(j, k[i]);
		if (!x || json_is_null(x))
			continue;
		if (!json_is_integer(x) || json_integer_value(x) < 1) {
			*ret = sbxd_dt_api_err(r, 400, "%s must be an integer "
			    "of 1 or more", k[i]);
			return -1;
		}
		if ((v[i] = json_integer_value(x)) > max[i]) {
			*ret = sbxd_dt_api_err(r, 400, "%s request %lld "
			    "exceeds maximum allowed per sandbox (%lld)",
			    what[i], (long long)v[i], (long long)max[i]);
			return -1;
		}
	}
	if (asks(json_object_get(j, "gpu")) ||
	    asks(json_object_get(j, "gpuType"))) {
		*ret = sbxd_dt_api_err(r, 400, "sbxd does not serve 'gpu' (see "
		    "sbxd(8))");
		return -1;
	}
	o->cpus = v[0];
	o->mem_mb = v[1] * 1024;
	o->disk_mb = v[2] * 1024;
	return 0;
}

/* A create's networkAllowList (CIDRs) and domainAllowList (names,
 * "*.name"), comma-separated strings, as E2B's allowOut (*allow, NULL
 * when both are empty). -1 with msg on a bad entry. */
static int
allow_lists(const json_t *j, json_t **allow, char *msg, size_t n)
{
	struct sbx_net_rule nr;
	struct sbx_err err;
	const json_t *v;
	const char *p, *e;
	char item[300];
	size_t k, len;

	*allow = NULL;
	for (k = 0; k < 2; k++) {
		if (!(v = json_object_get(j, lists[k])) || json_is_null(v))
			continue;
		if (!json_is_string(v)) {
			snprintf(msg, n, "%s must be a string", lists[k]);
			goto bad;
		}
		for (p = json_string_value(v); *p; p = *e ? e + 1 : e) {
			if (!(e = strchr(p, ',')))
				e = p + strlen(p);
			while (p < e && (*p == ' ' || *p == '\t'))
				p++;
			len = (size_t)(e - p);
			while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
				len--;
			if (!len)
				continue;
			if (len >= sizeof item || (snprintf(item, sizeof item,
			    "%.*s", (int)len, p), sbx_net_rule_parse(item, &nr,
			    &err) < 0) || (k == 0) != (nr.kind == SBX_NR_CIDR) ||
			    (k == 0 && nr.family != AF_INET)) {
				snprintf(msg, n, "Invalid %s entry '%.*s': %s",
				    lists[k], (int)(len > 200 ? 200 : len), p,
				    k == 0 ? "not an IPv4 CIDR" : "not a domain");
				goto bad;
			}
			if (!*allow)
				*allow = json_array();
			json_array_append_new(*allow, json_string(item));
		}
	}
	return 0;
bad:
	json_decref(*allow);
	*allow = NULL;
	return -1;
}

/* allow (E2B's allowOut, taken) into net, E2B's network object, as an
 * allow-list: all else denied. Blocked, or no list: nothing. */
static void
allow_put(json_t *net, json_t *allow, int block)
{
	if (!allow || block) {
		json_decref(allow);
		return;
	}
	json_object_set_new(net, "allowOut", allow);
	json_object_set_new(net, "denyOut", json_pack("[s]", "0.0.0.0/0"));
}

int
sbxd_dt_new(struct sbxd_req *r, int key, json_t *j, const struct sbxd_new *o,
    struct sbxd_box **bp, char *emsg, size_t en)
{
	const char *name = sbx_json_str(j, "name");
	const char *snap = sbx_json_str(j, "snapshot");
	const char *user = sbx_json_str(j, "user"), *cls;
	long long stop, archive, del, secs;
	struct sbxd_req bg = {0};
	struct sbxd_box *b = NULL;
	json_t *e2b, *out = NULL, *allow, *net, *snaprec;
	struct sbx_err err;
	int status;

	*bp = NULL;
	if (!r) {
		/* Off a request (a build's end): its key's rate. */
		bg.key = key;
		r = &bg;
	}
	stop = body_interval(j, "autoStopInterval", 0, DT_AUTO_STOP);
	archive = body_interval(j, "autoArchiveInterval", 0, DT_AUTO_ARCHIVE);
	del = body_interval(j, "autoDeleteInterval", -1, -1);
	if (!archive)
		archive = DT_MAX_ARCHIVE;
	secs = stop > 0 && (uint64_t)stop * sbxd.o.dt_minute <
	    sbxd.o.max_timeout ? stop * (long long)sbxd.o.dt_minute :
	    (long long)sbxd.o.max_timeout;
	e2b = json_pack("{s:s,s:O?,s:O?,s:I,s:b,s:b}", "templateID", snap ?
	    snap : "base", "metadata", json_object_get(j, "labels"),
	    "envVars", json_object_get(j, "env"), "timeout", (json_int_t)secs,
	    "autoPause", del != 0, "allow_internet_access",
	    !json_is_true(json_object_get(j, "networkBlockAll")));
	if (json_is_null(json_object_get(e2b, "metadata")))
		json_object_del(e2b, "metadata");
	if (json_is_null(json_object_get(e2b, "envVars")))
		json_object_del(e2b, "envVars");
	/* An allow-list: all else denied (networkBlockAll wins). */
	if (allow_lists(j, &allow, emsg, en) < 0) {
		json_decref(e2b);
		return 400;
	}
	net = json_object();
	allow_put(net, allow, json_is_true(json_object_get(j,
	    "networkBlockAll")));
	/* Not public: its ports want the preview token (its traffic
	 * access token). */
	if (!json_is_true(json_object_get(j, "public")))
		json_object_set_new(net, "allowPublicTraffic", json_false());
	if (json_object_size(net))
		json_object_set(e2b, "network", net);
	json_decref(net);
	status = sbxd_e2b_new_box(r, e2b, o, &out, emsg, en);
	json_decref(e2b);
	if (status != 201) {
		json_decref(out);
		if (status == 404) {
			json_t *f = snap ? sbxd_tpl_dt_find(snap) : NULL;
			const char *why;

			/* One there but not built (yet, or ever). */
			if (f)
				snprintf(emsg, en, "Snapshot %s is %s", snap,
				    sbxd_dt_snap_state(json_array_get(f, 1),
				    &why));
			else
				snprintf(emsg, en, "Snapshot %s not found",
				    snap ? snap : "base");
			json_decref(f);
			return 400;
		}
		return status;
	}
	b = sbxd_box_get(sbx_json_str(out, "sandboxID"));
	json_decref(out);
	if (!b) {
		snprintf(emsg, en, "the sandbox went away");
		return 500;
	}
	/* Its snapshot's class. */
	snaprec = snap ? sbxd_tpl_dt_find(snap) : NULL;
	cls = sbx_json_str(json_object_get(json_array_get(snaprec, 1),
	    "daytona"), "sandboxClass");
	pthread_mutex_lock(&sbxd.mu);
	json_decref(b->daytona);
	b->daytona = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I}", "name",
	    name && *name ? name : b->id, "user", user ? user : "user",
	    "snapshot", snap ? snap : "base",
	    "autoStopInterval", (json_int_t)stop, "autoArchiveInterval",
	    (json_int_t)archive, "autoDeleteInterval", (json_int_t)del,
	    "createdAt", (json_int_t)b->started_ms, "updatedAt",
	    (json_int_t)b->started_ms);
	if (cls)
		json_object_set_new(b->daytona, "sandboxClass",
		    json_string(cls));
	dt_set_end(b);
	pthread_mutex_unlock(&sbxd.mu);
	json_decref(snaprec);
	if (user && !user_ok(b, user)) {
		if (sbxd_box_take(b) == 0) {
			if (sbxd_box_kill(b, &err) < 0)
				sbxd_log("cannot kill sandbox %s: %s", b->id,
				    err.msg);
			sbxd_box_give(b);
		}
		sbxd_box_put(b);
		snprintf(emsg, en, "User %s does not exist in snapshot %s",
		    user, snap ? snap : "base");
		return 400;
	}
	sbxd_box_save(b);
	*bp = b;
	return 0;
}

static enum MHD_Result
h_create(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = dt_body(r, &ret);
	const char *name, *snap, *user;
	long long stop, archive, del;
	struct sbxd_new size = {0};
	json_t *allow = NULL;
	struct sbxd_box *b = NULL;
	char emsg[512];
	int status, locked = 0, built;
	size_t i;

	if (!j)
		return ret;
	name = sbx_json_str(j, "name");
	snap = sbx_json_str(j, "snapshot");
	user = sbx_json_str(j, "user");
	built = json_object_get(j, "buildInfo") &&
	    !json_is_null(json_object_get(j, "buildInfo"));
	if (built && json_object_get(j, "snapshot") &&
	    !json_is_null(json_object_get(j, "snapshot"))) {
		ret = sbxd_dt_api_err(r, 400, "Cannot specify a snapshot when "
		    "using a build info entry");
		goto out;
	}
	if (built && sbxd_dt_size(r, j, &size, &ret) < 0)
		goto out;
	for (i = 0; !built && refused[i]; i++)
		if (asks(json_object_get(j, refused[i]))) {
			ret = sbxd_dt_api_err(r, 400, "Cannot specify Sandbox "
			    "resources when using a snapshot");
			goto out;
		}
	for (i = 0; not_served[i]; i++)
		if (asks(json_object_get(j, not_served[i]))) {
			ret = sbxd_dt_api_err(r, 400, "sbxd does not serve "
			    "'%s' (see sbxd(8))", not_served[i]);
			goto out;
		}
	if ((json_object_get(j, "name") && !json_is_null(json_object_get(j,
	    "name")) && (!name || !*name || strlen(name) > 255 ||
	    strchr(name, '/'))) || (json_object_get(j, "snapshot") &&
	    !json_is_null(json_object_get(j, "snapshot")) && !snap) ||
	    (json_object_get(j, "user") && !json_is_null(json_object_get(j,
	    "user")) && (!user || !*user))) {
		ret = sbxd_dt_api_err(r, 400, "name, snapshot and user must be "
		    "strings (a name without '/')");
		goto out;
	}
	if (!strmap_ok(json_object_get(j, "env")) ||
	    !strmap_ok(json_object_get(j, "labels"))) {
		ret = sbxd_dt_api_err(r, 400, "env and labels must map strings "
		    "to strings");
		goto out;
	}
	/* A build's lists, before it starts (sbxd_dt_new checks a create's
	 * own). */
	if (built && allow_lists(j, &allow, emsg, sizeof emsg) < 0) {
		ret = sbxd_dt_api_err(r, 400, "%s", emsg);
		goto out;
	}
	json_decref(allow);
	stop = body_interval(j, "autoStopInterval", 0, DT_AUTO_STOP);
	archive = body_interval(j, "autoArchiveInterval", 0, DT_AUTO_ARCHIVE);
	del = body_interval(j, "autoDeleteInterval", -1, -1);
	if (stop == -2 || archive == -2 || del == -2) {
		ret = sbxd_dt_api_err(r, 400, "autoStopInterval and "
		    "autoArchiveInterval must be non-negative integers, "
		    "autoDeleteInterval an integer of -1 or more");
		goto out;
	}
	if (name && *name) {
		pthread_mutex_lock(&create_mu);
		locked = 1;
		if (name_taken(name) || sbxd_dt_pending_name(name)) {
			ret = sbxd_dt_api_err(r, 409, "Sandbox with name %s "
			    "already exists", name);
			goto out;
		}
	}
	if (built) {
		ret = sbxd_dt_create_built(r, j);
		goto out;
	}
	if ((status = sbxd_dt_new(r, r->key, j, NULL, &b, emsg,
	    sizeof emsg))) {
		ret = sbxd_dt_api_err(r, status, "%s", emsg);
		goto out;
	}
	ret = reply_box(r, 200, b, NULL);
out:
	if (locked)
		pthread_mutex_unlock(&create_mu);
	if (b)
		sbxd_box_put(b);
	json_decref(j);
	return ret;
}

/* A sandbox still being built answers from its pending record. */
static int
pending_reply(struct sbxd_req *r, enum MHD_Result *ret)
{
	char *id = sbxd_path_seg(r, 2), *proxy = sbxd_dt_proxy_url(r);
	json_t *j = id ? sbxd_dt_pending(id, proxy) : NULL;

	free(id);
	free(proxy);
	if (!j)
		return 0;
	*ret = sbxd_reply_json(r, 200, j);
	return 1;
}

static enum MHD_Result
h_get(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b;

	if (pending_reply(r, &ret))
		return ret;
	if (!(b = path_box(r, &ret)))
		return ret;
	ret = reply_box(r, 200, b, NULL);
	sbxd_box_put(b);
	return ret;
}

struct states {
	int n, started, stopped, archived, building, bad;
	char badv[64];
};

static enum MHD_Result
state_arg(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *value)
{
	struct states *s = cls;

	(void)kind;
	if (strcmp(key, "states") && strcmp(key, "states[]"))
		return MHD_YES;
	s->n++;
	if (value && !strcmp(value, "started"))
		s->started = 1;
	else if (value && !strcmp(value, "stopped"))
		s->stopped = 1;
	else if (value && !strcmp(value, "archived"))
		s->archived = 1;
	else if (value && (!strcmp(value, "pending_build") ||
	    !strcmp(value, "building_snapshot") ||
	    !strcmp(value, "build_failed") || !strcmp(value, "starting")))
		s->building = 1;
	else if (!value || !strcmp(value, "destroyed")) {
		s->bad = 1;
		snprintf(s->badv, sizeof s->badv, "%s", value ? value : "");
	}
	return MHD_YES;
}

/* Whether have holds every key of want with its value. */
static int
labels_match(const json_t *have, const json_t *want)
{
	const char *k;
	json_t *v, *h;

	json_object_foreach((json_t *)want, k, v) {
		h = json_object_get(have, k);
		if (!h || !json_equal(h, v))
			return 0;
	}
	return 1;
}

json_t **
sbxd_dt_sorted(json_t *a, int (*cmp)(const void *, const void *))
{
	size_t i, n = json_array_size(a);
	json_t **v = sbx_xcalloc(n + 1, sizeof *v);

	for (i = 0; i < n; i++)
		v[i] = json_array_get(a, i);
	qsort(v, n, sizeof *v, cmp);
	return v;
}

static int
by_created_desc(const void *x, const void *y)
{
	long long a = sbx_json_int(*(json_t *const *)x, "_t", 0);
	long long b = sbx_json_int(*(json_t *const *)y, "_t", 0);

	return a < b ? 1 : a > b ? -1 : 0;
}

static enum MHD_Result
h_list(struct sbxd_req *r)
{
	const char *lq = sbxd_query(r, "labels"), *lim = sbxd_query(r,
	    "limit"), *cur = sbxd_query(r, "cursor");
	const char *idp = sbxd_query(r, "id"), *np = sbxd_query(r, "name");
	struct states st = {0};
	json_t *want = NULL, *items, *all, *row;
	uint64_t limit = DT_LIST_LIMIT, off = 0;
	struct sbxd_box *b;
	char *proxy;
	size_t i, n;
	json_t **v;

	if (lq && *lq) {
		want = json_loads(lq, 0, NULL);
		if (!json_is_object(want) || !strmap_ok(want)) {
			json_decref(want);
			return sbxd_dt_api_err(r, 400, "Invalid labels JSON "
			    "format");
		}
	}
	if ((lim && sbx_parse_u64(lim, 1, 200, &limit) < 0) ||
	    (cur && *cur && sbx_parse_u64(cur, 0, UINT32_MAX, &off) < 0)) {
		json_decref(want);
		return sbxd_dt_api_err(r, 400, "limit must be 1 to 200, and "
		    "cursor one this server gave");
	}
	MHD_get_connection_values(r->c, MHD_GET_ARGUMENT_KIND, state_arg, &st);
	if (st.bad) {
		json_decref(want);
		return sbxd_dt_api_err(r, 400, "states: '%s' is not a state "
		    "one may list", st.badv);
	}
	proxy = sbxd_dt_proxy_url(r);
	all = json_array();
	pthread_mutex_lock(&sbxd.mu);
	for (b = sbxd.boxes; b; b = b->next) {
		if (b->gone || (want && !labels_match(b->metadata, want)))
			continue;
		if (st.n && !(!b->paused ? st.started : json_is_true(
		    json_object_get(b->daytona, "archived")) ? st.archived :
		    st.stopped))
			continue;
		if (idp && strncasecmp(b->id, idp, strlen(idp)))
			continue;
		if (np && strncasecmp(dt_name(b), np, strlen(np)))
			continue;
		row = dt_sandbox(b, proxy, 0, NULL);
		json_object_set_new(row, "_t", json_integer(sbx_json_int(
		    b->daytona, "createdAt", b->started_ms)));
		json_array_append_new(all, row);
	}
	pthread_mutex_unlock(&sbxd.mu);
	/* Those being built (their labels and state as a box's). */
	if (!st.n || st.building) {
		json_t *pend = sbxd_dt_pending_all(np, proxy);

		json_array_foreach(pend, i, row)
			if ((!want || labels_match(json_object_get(row,
			    "labels"), want)) && (!idp || !strncasecmp(
			    sbx_json_str(row, "id"), idp, strlen(idp))))
				json_array_append(all, row);
		json_decref(pend);
	}
	free(proxy);
	json_decref(want);
	n = json_array_size(all);
	v = sbxd_dt_sorted(all, by_created_desc);
	items = json_array();
	for (i = off; i < n && i < off + limit; i++) {
		json_object_del(v[i], "_t");
		json_array_append(items, v[i]);
	}
	free(v);
	row = json_pack("{s:o}", "items", items);
	if (off + limit < n) {
		char c[32];

		snprintf(c, sizeof c, "%llu", (unsigned long long)(off +
		    limit));
		json_object_set_new(row, "nextCursor", json_string(c));
	} else {
		json_object_set_new(row, "nextCursor", json_null());
	}
	json_decref(all);
	return sbxd_reply_json(r, 200, row);
}

static enum MHD_Result
h_delete(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b;
	struct sbx_err err;
	json_t *j;
	char *proxy, *id = sbxd_path_seg(r, 2);
	int done = id && sbxd_dt_pending_delete(r, id, &ret);

	free(id);
	if (done)
		return ret;
	if (!(b = path_box_take(r, &ret)))
		return ret;
	proxy = sbxd_dt_proxy_url(r);
	pthread_mutex_lock(&sbxd.mu);
	j = dt_sandbox(b, proxy, 1, "destroyed");
	pthread_mutex_unlock(&sbxd.mu);
	free(proxy);
	if (sbxd_box_kill(b, &err) < 0) {
		json_decref(j);
		ret = sbxd_dt_api_err(r, 500, "cannot delete the sandbox: %s",
		    err.msg);
	} else {
		ret = sbxd_reply_json(r, 200, j);
	}
	sbxd_box_give(b);
	sbxd_box_put(b);
	return ret;
}

static enum MHD_Result
h_start(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b = path_box_take(r, &ret);
	struct sbx_err err;

	if (!b)
		return ret;
	if (b->paused && sbxd_be_resume(b->ref, &err) < 0) {
		ret = sbxd_dt_api_err(r, 500, "cannot start the sandbox: %s",
		    err.msg);
	} else {
		pthread_mutex_lock(&sbxd.mu);
		if (b->paused) {
			b->paused = 0;
			b->delete_ms = 0;
			if (json_is_true(json_object_get(b->daytona,
			    "vmPaused")))
				dt_set(b, "vmPaused", json_false());
			if (json_object_get(b->daytona, "archived"))
				dt_set(b, "archived", json_false());
			/* A started sandbox's life starts again. */
			b->started_ms = sbxd_now_ms();
		}
		dt_set_end(b);
		pthread_mutex_unlock(&sbxd.mu);
		sbxd_box_save(b);
		ret = MHD_YES;
	}
	return box_done(r, b, ret);
}

static enum MHD_Result
h_stop(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b = path_box_take(r, &ret);
	struct sbx_err err;
	json_t *j = NULL;
	char *proxy;
	int eph, vmp;

	if (!b)
		return ret;
	pthread_mutex_lock(&sbxd.mu);
	eph = dt_int(b, "autoDeleteInterval") == 0;
	vmp = json_is_true(json_object_get(b->daytona, "vmPaused"));
	pthread_mutex_unlock(&sbxd.mu);
	if (b->paused && !vmp) {
		ret = sbxd_dt_api_err(r, 400, "Sandbox is not in a stoppable "
		    "state");
	} else if (vmp && sbxd_be_resume(b->ref, &err) < 0) {
		/* Frozen: thawed to be stopped (a stop of a paused one is
		 * none). */
		ret = sbxd_dt_api_err(r, 500, "cannot stop the sandbox: %s",
		    err.msg);
	} else if (eph) {
		/* Ephemeral: deleted as it stops. */
		proxy = sbxd_dt_proxy_url(r);
		pthread_mutex_lock(&sbxd.mu);
		j = dt_sandbox(b, proxy, 1, "destroyed");
		pthread_mutex_unlock(&sbxd.mu);
		free(proxy);
		ret = sbxd_box_kill(b, &err) < 0 ? sbxd_dt_api_err(r, 500, "cannot "
		    "stop the sandbox: %s", err.msg) : sbxd_reply_json(r, 200,
		    json_incref(j));
	} else if (sbxd_be_stop(b->ref, &err) < 0) {
		ret = sbxd_dt_api_err(r, 500, "cannot stop the sandbox: %s",
		    err.msg);
	} else {
		pthread_mutex_lock(&sbxd.mu);
		b->paused = 1;
		if (vmp)
			dt_set(b, "vmPaused", json_false());
		sbxd_dt_stopped(b);
		pthread_mutex_unlock(&sbxd.mu);
		sbxd_box_save(b);
		ret = MHD_YES;
	}
	json_decref(j);
	return box_done(r, b, ret);
}

/* POST /api/sandbox/X/pause: a linux-vm one's processes frozen with its
 * memory (the local backend's suspend); a container cannot (422, as
 * Daytona). /start thaws it; /stop ends it from there. */
static enum MHD_Result
h_pause(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b = path_box_take(r, &ret);
	struct sbx_err err;
	int vm, vmp;

	if (!b)
		return ret;
	pthread_mutex_lock(&sbxd.mu);
	vm = !strcmp(dt_class(b), "linux-vm");
	vmp = json_is_true(json_object_get(b->daytona, "vmPaused"));
	pthread_mutex_unlock(&sbxd.mu);
	if (!vm) {
		ret = sbxd_dt_api_err(r, 422, "Sandbox class container does "
		    "not support pause");
	} else if (b->paused && !vmp) {
		ret = sbxd_dt_api_err(r, 400, "Sandbox is not started");
	} else if (!b->paused && sbxd_be_pause(b->ref, &err) < 0) {
		ret = sbxd_dt_api_err(r, 500, "cannot pause the sandbox: %s",
		    err.msg);
	} else {
		pthread_mutex_lock(&sbxd.mu);
		b->paused = 1;
		dt_set(b, "vmPaused", json_true());
		pthread_mutex_unlock(&sbxd.mu);
		sbxd_box_save(b);
		ret = MHD_YES;
	}
	return box_done(r, b, ret);
}

/* POST /api/sandbox/X/archive: a stopped one's files stay where they
 * are (sbxd has no object storage); its state says archived. */
static enum MHD_Result
h_archive(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b = path_box_take(r, &ret);
	int paused, eph;

	if (!b)
		return ret;
	pthread_mutex_lock(&sbxd.mu);
	paused = b->paused;
	eph = dt_int(b, "autoDeleteInterval") == 0;
	if (paused && !eph)
		dt_set(b, "archived", json_true());
	pthread_mutex_unlock(&sbxd.mu);
	if (eph) {
		ret = sbxd_dt_api_err(r, 400, "Ephemeral sandboxes cannot be "
		    "archived");
	} else if (!paused) {
		ret = sbxd_dt_api_err(r, 400, "Sandbox is not stopped");
	} else {
		sbxd_box_save(b);
		ret = MHD_YES;
	}
	return box_done(r, b, ret);
}

/* GET /api/sandbox/X/ports/P/preview-url: E2B's host form of a port,
 * P-ID.DOMAIN (sbxd's --domain, else the Host the client reached),
 * which port.c serves; the token is the box's traffic access token. */
static enum MHD_Result
h_preview(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b = path_box(r, &ret);
	const char *host = sbxd_header(r, "Host");
	char *ps = sbxd_path_seg(r, 4), *url;
	uint64_t port = 0;
	json_t *j;

	if (!b) {
		free(ps);
		return ret;
	}
	if (!ps || sbx_parse_u64(ps, 1, 65535, &port) < 0) {
		ret = sbxd_dt_api_err(r, 400, "Invalid port %s", ps ? ps : "");
	} else if (!sbxd.o.domain && (!host || !*host ||
	    strpbrk(host, "/\\ \"@"))) {
		ret = sbxd_dt_api_err(r, 400, "no Host to make a preview URL "
		    "of");
	} else {
		url = sbx_xasprintf("http://%llu-%s.%s", (unsigned long long)
		    port, b->id, sbxd.o.domain ? sbxd.o.domain : host);
		j = json_pack("{s:s,s:s,s:s}", "sandboxId", b->id, "url", url,
		    "token", b->traffic);
		free(url);
		ret = sbxd_reply_json(r, 200, j);
	}
	free(ps);
	sbxd_box_put(b);
	return ret;
}

static enum MHD_Result
h_labels(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = dt_body(r, &ret), *l;
	struct sbxd_box *b;

	if (!j)
		return ret;
	l = json_object_get(j, "labels");
	if (!json_is_object(l) || !strmap_ok(l)) {
		json_decref(j);
		return sbxd_dt_api_err(r, 400, "labels must map strings to "
		    "strings");
	}
	if (!(b = path_box(r, &ret))) {
		json_decref(j);
		return ret;
	}
	pthread_mutex_lock(&sbxd.mu);
	json_decref(b->metadata);
	b->metadata = json_deep_copy(l);
	dt_set(b, "updatedAt", json_integer(sbxd_now_ms()));
	pthread_mutex_unlock(&sbxd.mu);
	sbxd_box_save(b);
	sbxd_box_put(b);
	ret = sbxd_reply_json(r, 200, json_pack("{s:O}", "labels", l));
	json_decref(j);
	return ret;
}

/* POST /api/sandbox/X/{autostop,autoarchive,autodelete}/N */
static enum MHD_Result
interval(struct sbxd_req *r, const char *k, long long min)
{
	enum MHD_Result ret;
	char *s = sbxd_path_seg(r, 4);
	uint64_t n = 0;
	long long v;
	struct sbxd_box *b;

	if (!s || (strcmp(s, "-1") && sbx_parse_u64(s, 0, 1000000000,
	    &n) < 0) || (!strcmp(s, "-1") && min > -1)) {
		free(s);
		return sbxd_dt_api_err(r, 400, "%s must be %s", k, min < 0 ?
		    "an integer of -1 or more" : "non-negative");
	}
	v = strcmp(s, "-1") ? (long long)n : -1;
	free(s);
	if (!strcmp(k, "autoArchiveInterval") && !v)
		v = DT_MAX_ARCHIVE;
	if (!(b = path_box(r, &ret)))
		return ret;
	pthread_mutex_lock(&sbxd.mu);
	dt_set(b, k, json_integer(v));
	/* Its end is Daytona's from the first auto-stop or auto-delete
	 * set (one made through E2B's API keeps its timeout till then). */
	if (!b->paused && !b->busy && strcmp(k, "autoArchiveInterval"))
		dt_set_end(b);
	/* A stopped one's auto-delete counts from now. */
	if (b->paused && !strcmp(k, "autoDeleteInterval"))
		sbxd_dt_stopped(b);
	pthread_mutex_unlock(&sbxd.mu);
	sbxd_box_save(b);
	ret = reply_box(r, 201, b, NULL);
	sbxd_box_put(b);
	return ret;
}

static enum MHD_Result
h_autostop(struct sbxd_req *r)
{
	return interval(r, "autoStopInterval", 0);
}

static enum MHD_Result
h_autoarchive(struct sbxd_req *r)
{
	return interval(r, "autoArchiveInterval", 0);
}

static enum MHD_Result
h_autodelete(struct sbxd_req *r)
{
	return interval(r, "autoDeleteInterval", -1);
}

static enum MHD_Result
h_proxy_url(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b;
	char *id = sbxd_path_seg(r, 2), *proxy;

	/* An id only, as Daytona's. */
	b = id ? sbxd_box_get(id) : NULL;
	if (!b) {
		ret = sbxd_dt_api_err(r, 404, "Sandbox with ID %s not found",
		    id ? id : "");
		free(id);
		return ret;
	}
	free(id);
	sbxd_box_put(b);
	proxy = sbxd_dt_proxy_url(r);
	ret = sbxd_reply_json(r, 200, json_pack("{s:s}", "url", proxy));
	free(proxy);
	return ret;
}

static enum MHD_Result
h_activity(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b = path_box(r, &ret);

	if (!b)
		return ret;
	sbxd_dt_touch(b);
	sbxd_box_put(b);
	return sbxd_reply_empty(r, 201);
}

/* The SDK's Socket.IO event socket: not served; the SDK then polls. */
static enum MHD_Result
h_socket(struct sbxd_req *r)
{
	return sbxd_dt_api_err(r, 404, "sbxd does not serve Daytona's event "
	    "socket (see sbxd(8))");
}

/* POST /api/sandbox/X/network-settings: networkBlockAll and the two
 * allow-lists; what the body leaves out stays ("" clears a list). As
 * E2B's update of its network (sbxd_net_put). */
static enum MHD_Result
h_network(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = dt_body(r, &ret), *now, *allow = NULL, *e2b = NULL;
	const json_t *v;
	struct sbxd_box *b;
	char msg[512];
	int block, st, k;

	if (!j)
		return ret;
	v = json_object_get(j, "networkBlockAll");
	if (v && !json_is_boolean(v) && !json_is_null(v)) {
		json_decref(j);
		return sbxd_dt_api_err(r, 400, "networkBlockAll must be a "
		    "boolean");
	}
	if (!(b = path_box_take(r, &ret))) {
		json_decref(j);
		return ret;
	}
	/* The lists now, what the body says in their place. */
	now = json_object();
	pthread_mutex_lock(&sbxd.mu);
	block = !b->internet;
	allow_shown(now, json_object_get(b->network, "allowOut"));
	pthread_mutex_unlock(&sbxd.mu);
	if (json_is_boolean(v))
		block = json_is_true(v);
	for (k = 0; k < 2; k++)
		if ((v = json_object_get(j, lists[k])) && !json_is_null(v))
			json_object_set(now, lists[k], (json_t *)v);
	if (allow_lists(now, &allow, msg, sizeof msg) < 0) {
		st = 400;
		goto end;
	}
	e2b = json_pack("{s:b}", "allow_internet_access", !block);
	allow_put(e2b, allow, block);
	allow = NULL;
	if (!(st = sbxd_net_put(b, e2b, msg, sizeof msg))) {
		pthread_mutex_lock(&sbxd.mu);
		dt_set(b, "updatedAt", json_integer(sbxd_now_ms()));
		pthread_mutex_unlock(&sbxd.mu);
		sbxd_box_save(b);
	}
end:
	ret = st ? sbxd_dt_api_err(r, st, "%s", msg) : reply_box(r, 200, b,
	    NULL);
	sbxd_box_give(b);
	sbxd_box_put(b);
	json_decref(allow);
	json_decref(e2b);
	json_decref(now);
	json_decref(j);
	return ret;
}

const struct sbxd_route sbxd_dt_api_routes[] = {
	{"GET", "/api/config", 0, h_config, NULL},
	{"GET", "/api/socket.io", 0, h_socket, NULL},
	{"POST", "/api/sandbox", 0, h_create, NULL},
	{"GET", "/api/sandbox", 0, h_list, NULL},
	{"GET", "/api/sandbox/*", 0, h_get, NULL},
	{"DELETE", "/api/sandbox/*", 0, h_delete, NULL},
	{"POST", "/api/sandbox/*/start", 0, h_start, NULL},
	{"POST", "/api/sandbox/*/stop", 0, h_stop, NULL},
	{"POST", "/api/sandbox/*/pause", 0, h_pause, NULL},
	{"POST", "/api/sandbox/*/archive", 0, h_archive, NULL},
	{"GET", "/api/sandbox/*/ports/*/preview-url", 0, h_preview, NULL},
	{"PUT", "/api/sandbox/*/labels", 0, h_labels, NULL},
	{"POST", "/api/sandbox/*/autostop/*", 0, h_autostop, NULL},
	{"POST", "/api/sandbox/*/autoarchive/*", 0, h_autoarchive, NULL},
	{"POST", "/api/sandbox/*/autodelete/*", 0, h_autodelete, NULL},
	{"POST", "/api/sandbox/*/last-activity", 0, h_activity, NULL},
	{"POST", "/api/sandbox/*/network-settings", 0, h_network, NULL},
	{"GET", "/api/sandbox/*/toolbox-proxy-url", 0, h_proxy_url, NULL},
	{NULL, NULL, 0, NULL, NULL},
};
