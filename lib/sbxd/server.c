/* server.c - sbxd's HTTP side: libmicrohttpd, routing, auth, answers */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "sbxd.h"

struct sbxd sbxd;

/* Seconds a request whose head is in may be silent while its body
 * comes. */
#define REQUEST_TIMEOUT 300u
/* MHD's pool: connections are spread over its threads, each an epoll
 * loop; a handler that blocks (a create) holds up its thread's other
 * connections for that while, so there are more than the cores. */
#define POOL_THREADS 16u

void
sbxd_log(const char *fmt, ...)
{
	va_list ap;
	char line[1024];
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof line - 2)
		n = sizeof line - 2;
	line[n++] = '\n';
	/* One write: lines of two threads never mix. */
	if (sbx_write_all(2, "sbxd: ", 6) < 0 || sbx_write_all(2, line, n) < 0)
		return;
}

enum MHD_Result
sbxd_reply(struct sbxd_req *r, int status, const char *type, const void *p,
    size_t n)
{
	struct MHD_Response *rs;
	enum MHD_Result ret;

	rs = MHD_create_response_from_buffer(n, (void *)p,
	    MHD_RESPMEM_MUST_COPY);
	if (!rs)
		return MHD_NO;
	if (type)
		MHD_add_response_header(rs, "Content-Type", type);
	r->status = status;
	ret = MHD_queue_response(r->c, status, rs);
	MHD_destroy_response(rs);
	return ret;
}

enum MHD_Result
sbxd_reply_json(struct sbxd_req *r, int status, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	enum MHD_Result ret;

	json_decref(j);
	if (!s)
		return sbxd_reply_err(r, 500, "out of memory");
	ret = sbxd_reply(r, status, "application/json", s, strlen(s));
	free(s);
	return ret;
}

enum MHD_Result
sbxd_reply_stream(struct sbxd_req *r, size_t block,
    MHD_ContentReaderCallback rd, void *cls,
    MHD_ContentReaderFreeCallback fr)
{
	struct MHD_Response *rs;
	enum MHD_Result ret;

	rs = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, block, rd,
	    cls, fr);
	if (!rs) {
		fr(cls);
		return MHD_NO;
	}
	MHD_add_response_header(rs, "Content-Type", "application/connect+json");
	r->status = 200;
	ret = MHD_queue_response(r->c, 200, rs);
	MHD_destroy_response(rs);
	return ret;
}

enum MHD_Result
sbxd_reply_empty(struct sbxd_req *r, int status)
{
	return sbxd_reply(r, status, NULL, "", 0);
}

enum MHD_Result
sbxd_reply_err(struct sbxd_req *r, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return sbxd_reply_json(r, status, json_pack("{s:i,s:s}", "code", status,
	    "message", msg));
}

enum MHD_Result
sbxd_reply_connect(struct sbxd_req *r, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return sbxd_reply_json(r, sbx_e2b_code_status(code),
	    sbx_e2b_error(code, msg));
}

const char *
sbxd_header(struct sbxd_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, name);
}

const char *
sbxd_query(struct sbxd_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->c, MHD_GET_ARGUMENT_KIND, name);
}

json_t *
sbxd_body_json(struct sbxd_req *r, enum MHD_Result *ret)
{
	json_error_t e;
	json_t *j;

	if (!r->body.len) {
		*ret = sbxd_reply_err(r, 400,
		    "Error when parsing request: request body has no content");
		return NULL;
	}
	j = json_loadb(r->body.data, r->body.len, 0, &e);
	if (!j || !json_is_object(j)) {
		json_decref(j);
		*ret = sbxd_reply_err(r, 400,
		    "Error when parsing request: %s", j ? "not an object" :
		    e.text);
		return NULL;
	}
	return j;
}

char *
sbxd_path_seg(const struct sbxd_req *r, int i)
{
	const char *p = r->path, *e;

	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			return NULL;
		e = strchr(p, '/');
		if (!e)
			e = p + strlen(p);
		if (i-- == 0)
			return strndup(p, (size_t)(e - p));
		p = e;
	}
}

/* --- auth -------------------------------------------------------------- */

static int
load_keys(struct sbx_err *err)
{
	FILE *f = fopen(sbxd.o.key_file, "r");
	struct sbxd_key *keys = NULL;
	long long now = sbx_mono_ms();
	size_t n = 0, cap = 0, i, j;
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;

	if (!f)
		return sbx_err_set(err, SBX_EX_CRED, "cannot open '%s':",
		    sbxd.o.key_file);
	while ((len = getline(&line, &lcap, f)) >= 0) {
		while (len > 0 && (line[len - 1] == '\n' ||
		    line[len - 1] == '\r' || line[len - 1] == ' '))
			line[--len] = 0;
		if (!len || line[0] == '#')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 4;
			keys = sbx_xrealloc(keys, cap * sizeof *keys);
		}
		SHA256((unsigned char *)line, (size_t)len, keys[n].sha);
		keys[n].tokens = sbxd.o.create_rate;
		keys[n++].t = now;
	}
	if (line)
		OPENSSL_cleanse(line, lcap);
	free(line);
	fclose(f);
	if (!n) {
		free(keys);
		return sbx_err_set(err, SBX_EX_CRED, "no API key in '%s'",
		    sbxd.o.key_file);
	}
	pthread_mutex_lock(&sbxd.mu);
	/* A key kept across a reload keeps its bucket. */
	for (i = 0; i < n; i++)
		for (j = 0; j < sbxd.nkeys; j++)
			if (!memcmp(keys[i].sha, sbxd.keys[j].sha, 32)) {
				keys[i].tokens = sbxd.keys[j].tokens;
				keys[i].t = sbxd.keys[j].t;
			}
	free(sbxd.keys);
	sbxd.keys = keys;
	sbxd.nkeys = n;
	pthread_mutex_unlock(&sbxd.mu);
	return 0;
}

/* Whether the request carries one of the keys (r->key says which):
 * compared as digests, in constant time, every key tried. */
static int
key_ok(struct sbxd_req *r)
{
	const char *k = sbxd_header(r, "X-API-Key");
	const char *a = sbxd_header(r, "Authorization");
	unsigned char d[32];
	size_t i;
	int eq;

	r->key = -1;
	if (!k && a && !strncasecmp(a, "Bearer ", 7))
		k = a + 7;
	if (!k || !*k)
		return 0;
	SHA256((const unsigned char *)k, strlen(k), d);
	pthread_mutex_lock(&sbxd.mu);
	for (i = 0; i < sbxd.nkeys; i++) {
		eq = !CRYPTO_memcmp(d, sbxd.keys[i].sha, 32);
		r->key = eq ? (int)i : r->key;
	}
	pthread_mutex_unlock(&sbxd.mu);
	return r->key >= 0;
}

int
sbxd_key_ok(struct sbxd_req *r)
{
	return key_ok(r);
}

/* Whether header holds want ("" wants nothing), in constant time. */
static int
secret_ok(struct sbxd_req *r, const char *header, const char *want)
{
	const char *t = sbxd_header(r, header);
	unsigned char a[32], b[32];

	if (!want[0])
		return 1;
	if (!t)
		return 0;
	SHA256((const unsigned char *)t, strlen(t), a);
	SHA256((const unsigned char *)want, strlen(want), b);
	return !CRYPTO_memcmp(a, b, 32);
}

static int
token_ok(struct sbxd_req *r)
{
	return secret_ok(r, "X-Access-Token", r->box->token);
}

/* --- routing ----------------------------------------------------------- */

static int
path_match(const char *pat, const char *path)
{
	while (*pat && *path) {
		if (*pat == '*') {
			while (*path && *path != '/')
				path++;
			pat++;
			continue;
		}
		if (*pat++ != *path++)
			return 0;
	}
	while (*path == '/')
		path++;
	return !*pat && !*path;
}

int
sbxd_path_match(const char *pat, const char *path)
{
	return path_match(pat, path);
}

static const struct sbxd_route *
route_find(const char *method, const char *path, int envd, int *allowed)
{
	const struct sbxd_route *tabs[] = {sbxd_tpl_routes,
	    sbxd_control_routes, sbxd_secret_routes, sbxd_proc_routes,
	    sbxd_fs_routes, sbxd_volc_routes};
	size_t t;
	const struct sbxd_route *rt;

	*allowed = 0;
	for (t = 0; t < sizeof tabs / sizeof tabs[0]; t++)
		for (rt = tabs[t]; rt->path; rt++) {
			if (rt->envd != envd || !path_match(rt->path, path))
				continue;
			*allowed = 1;
			if (!strcmp(rt->method, method))
				return rt;
		}
	return NULL;
}

/* envd's requests name their sandbox by headers, or by a host of the
 * form <port>-<id>.<domain>. */
static int
envd_target(struct sbxd_req *r, char *id, size_t n, long *port)
{
	const char *sid = sbxd_header(r, "E2b-Sandbox-Id");
	const char *sport = sbxd_header(r, "E2b-Sandbox-Port");
	const char *host = sbxd_header(r, "Host");
	const char *dash, *dot;
	char *end;

	if (sid) {
		snprintf(id, n, "%s", sid);
		*port = sport ? strtol(sport, &end, 10) : -1;
		if (sport && (*end || end == sport))
			*port = -1;
		return 1;
	}
	if (!host || !(dash = strchr(host, '-')) ||
	    !(dot = strchr(dash, '.')))
		return 0;
	*port = strtol(host, &end, 10);
	if (end != dash || *port <= 0)
		return 0;
	if ((size_t)(dot - dash - 1) >= n)
		return 0;
	memcpy(id, dash + 1, (size_t)(dot - dash - 1));
	id[dot - dash - 1] = 0;
	return 1;
}

static enum MHD_Result
proxy_err(struct sbxd_req *r, const char *id, const char *msg)
{
	return sbxd_reply_json(r, 502, json_pack("{s:s,s:s,s:i}",
	    "sandboxId", id, "message", msg, "code", 502));
}

/* Pick the route and the sandbox; answers and returns NULL when there
 * is none, or the caller may not. */
static const struct sbxd_route *
dispatch(struct sbxd_req *r, enum MHD_Result *ret)
{
	char id[64];
	long port = 0;
	int envd, allowed;
	const struct sbxd_route *rt;

	envd = envd_target(r, id, sizeof id, &port);
	/* Daytona's API and toolbox: their own auth and error bodies. */
	if (!envd && sbxd_dt_path(r->path))
		return sbxd_dt_dispatch(r, ret);
	/* A signed /files URL on its own (no sandbox named, no key): the
	 * sandbox is the one whose token signed it. */
	if (!envd && !strcmp(r->path, "/files") && sbxd_query(r,
	    "signature") && !sbxd_header(r, "X-API-Key")) {
		if (sbxd_fs_signed_box(r, id, sizeof id) < 0) {
			*ret = sbxd_reply_err(r, 401, "invalid signature");
			return NULL;
		}
		envd = 1;
		port = SBX_E2B_ENVD_PORT;
	}
	if (envd && !sbxd_header(r, "E2b-Sandbox-Port") &&
	    sbxd_header(r, "E2b-Sandbox-Id")) {
		*ret = sbxd_reply_err(r, 400, "Missing header: E2b-Sandbox-Port");
		return NULL;
	}
	rt = route_find(r->method, r->path, envd, &allowed);
	if (envd) {
		struct sbxd_box *b = sbxd_box_get(id);

		if (!b) {
			*ret = proxy_err(r, id, "The sandbox was not found");
			return NULL;
		}
		r->box = b;
		pthread_mutex_lock(&sbxd.mu);
		if (b->paused) {
			pthread_mutex_unlock(&sbxd.mu);
			*ret = proxy_err(r, id, "The sandbox was not found");
			return NULL;
		}
		pthread_mutex_unlock(&sbxd.mu);
		r->port = port;
		/* Another port: the sandbox's server answers, without
		 * envd's token (E2B's public traffic), unless the sandbox
		 * was made with allowPublicTraffic false. */
		if (port != SBX_E2B_ENVD_PORT) {
			if (port < 1 || port > 65535) {
				*ret = proxy_err(r, id, "The sandbox is running "
				    "but port is not open");
				return NULL;
			}
			/* Daytona's preview token is the same one. */
			if (!secret_ok(r, "E2b-Traffic-Access-Token",
			    b->traffic) && !secret_ok(r,
			    "X-Daytona-Preview-Token", b->traffic)) {
				*ret = sbxd_reply_err(r, 403, "Missing or "
				    "invalid traffic access token");
				return NULL;
			}
			return &sbxd_port_route;
		}
		/* /files checks a presigned URL's signature itself. */
		if (!(rt && (!strcmp(rt->path, "/health") ||
		    (!strcmp(rt->path, "/files") &&
		    sbxd_query(r, "signature")))) && !token_ok(r)) {
			*ret = sbxd_reply_err(r, 401, "unauthorized access, "
			    "please provide a valid access token or method "
			    "signing if supported");
			return NULL;
		}
	} else if (strcmp(r->path, "/health") && !sbxd_tpl_upload_ok(r) &&
	    /* The volume content API checks a volume's own token. */
	    !(rt && !strncmp(rt->path, "/volumecontent/", 15)) &&
	    !key_ok(r)) {
		*ret = sbxd_reply_err(r, 401, "Invalid API key");
		return NULL;
	}
	if (!rt) {
		if (allowed)
			*ret = sbxd_reply_err(r, 405, "method %s not allowed",
			    r->method);
		else if (envd)
			*ret = sbxd_reply_err(r, 404, "no such route: %s",
			    r->path);
		else
			*ret = sbxd_reply_err(r, 404, "sbxd does not serve "
			    "%s %s (see sbxd(8))", r->method, r->path);
		return NULL;
	}
	return rt;
}

static void
req_free(struct sbxd_req *r)
{
	if (r->up_free)
		r->up_free(r);
	if (r->box)
		sbxd_box_put(r->box);
	sbx_buf_release(&r->body);
	free(r->path);
	free(r);
	pthread_mutex_lock(&sbxd.mu);
	sbxd.active--;
	pthread_cond_broadcast(&sbxd.cv);
	pthread_mutex_unlock(&sbxd.mu);
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *upload,
    size_t *upload_size, void **ctx)
{
	struct sbxd_req *r = *ctx;
	enum MHD_Result ret = MHD_YES;
	unsigned char rnd[8];
	const char *q;
	int i;

	(void)cls;
	(void)version;
	if (!r) {
		r = sbx_xcalloc(1, sizeof *r);
		*ctx = r;
		pthread_mutex_lock(&sbxd.mu);
		sbxd.active++;
		pthread_mutex_unlock(&sbxd.mu);
		r->c = c;
		r->key = -1;
		r->method = method;
		/* The head is in: the body may take its time. */
		MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
		    REQUEST_TIMEOUT);
		r->t0 = sbx_mono_ms();
		q = strchr(url, '?');
		r->path = q ? strndup(url, (size_t)(q - url)) :
		    sbx_xstrdup(url);
		if (RAND_bytes(rnd, sizeof rnd) != 1)
			memset(rnd, 0, sizeof rnd);
		for (i = 0; i < 8; i++)
			snprintf(r->rid + 2 * i, 3, "%02x", rnd[i]);
		if (!(r->route = dispatch(r, &ret)))
			r->status = r->status ? r->status : 500;
		return ret;
	}
	/* The body is in: from here on, and until the next request is
	 * whole, the connection may be silent only for the header
	 * timeout. */
	if (!*upload_size)
		MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
		    sbxd.o.header_timeout);
	if (r->status) {
		/* Answered already: let the rest of the body go. */
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		if (r->route->data) {
			if (!r->too_big && r->route->data(r, upload,
			    *upload_size) < 0)
				r->too_big = 1;
		} else if (r->body.len + *upload_size > sbxd.o.max_body) {
			r->too_big = 1;
		} else if (!r->too_big) {
			sbx_buf_add(&r->body, upload, *upload_size);
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->too_big && !r->route->data)
		return sbxd_reply_err(r, 413, "request body is over %llu bytes",
		    (unsigned long long)sbxd.o.max_body);
	return r->route->fn(r);
}

static void
on_done(void *cls, struct MHD_Connection *c, void **ctx,
    enum MHD_RequestTerminationCode toe)
{
	struct sbxd_req *r = *ctx;

	(void)cls;
	(void)c;
	if (!r)
		return;
	if (sbxd.o.access_log)
		sbxd_log("%s %s %s %d %lldms%s", r->rid, r->method, r->path,
		    r->status, sbx_mono_ms() - r->t0,
		    toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" :
		    " (cut)");
	req_free(r);
	*ctx = NULL;
}

/* The connection cap, kept here: MHD splits its own evenly among the
 * pool's threads, and the accepts are not even. A connection takes its
 * place as it is accepted (two threads accepting at once cannot both
 * take the last one) and gives it back when it closes. */
static unsigned conns_open, conns_max;

static enum MHD_Result
on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
	(void)cls;
	(void)addr;
	(void)len;
	if (__atomic_add_fetch(&conns_open, 1, __ATOMIC_RELAXED) <=
	    conns_max)
		return MHD_YES;
	__atomic_sub_fetch(&conns_open, 1, __ATOMIC_RELAXED);
	return MHD_NO;
}

static void
on_connection(void *cls, struct MHD_Connection *c, void **ctx,
    enum MHD_ConnectionNotificationCode toe)
{
	(void)cls;
	(void)c;
	(void)ctx;
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED)
		__atomic_sub_fetch(&conns_open, 1, __ATOMIC_RELAXED);
}

/* MHD's messages, 10 a second at most: a client that opens and drops
 * connections by the thousand does not fill the log. */
static void
on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	static pthread_mutex_t lmu = PTHREAD_MUTEX_INITIALIZER;
	static long long t0;
	static unsigned n_in, dropped;
	unsigned was = 0;
	long long now = sbx_mono_ms();
	char msg[512];
	size_t n;

	(void)cls;
	pthread_mutex_lock(&lmu);
	if (now - t0 >= 1000) {
		t0 = now;
		n_in = 0;
		was = dropped;
		dropped = 0;
	}
	if (n_in++ >= 10) {
		dropped++;
		pthread_mutex_unlock(&lmu);
		return;
	}
	pthread_mutex_unlock(&lmu);
	if (was)
		sbxd_log("%u messages of libmicrohttpd's left out", was);
	vsnprintf(msg, sizeof msg, fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = 0;
	sbxd_log("%s", msg);
}

/* "127.0.0.1:3000", "[::1]:3000", ":3000" (loopback). */
static int
parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *len,
    struct sbx_err *err)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	char host[128];
	const char *colon = strrchr(s, ':');
	uint64_t port;

	memset(ss, 0, sizeof *ss);
	if (!colon || sbx_parse_u64(colon + 1, 1, 65535, &port) < 0 ||
	    (size_t)(colon - s) >= sizeof host)
		return sbx_err_set(err, SBX_EX_USAGE, "bad address '%s' "
		    "(want HOST:PORT)", s);
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = 0;
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = 0;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
			return sbx_err_set(err, SBX_EX_USAGE,
			    "bad address '%s'", s);
		*len = sizeof *in6;
		return 0;
	}
	in4->sin_family = AF_INET;
	in4->sin_port = htons((uint16_t)port);
	if (!*host)
		snprintf(host, sizeof host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &in4->sin_addr) != 1)
		return sbx_err_set(err, SBX_EX_USAGE, "bad address '%s'", s);
	*len = sizeof *in4;
	return 0;
}

static int
templates_init(struct sbx_err *err)
{
	size_t n = 0, i;
	char *eq;

	while (sbxd.o.templates && sbxd.o.templates[n])
		n++;
	sbxd.tmpl = sbx_xcalloc(2 * n + 3, sizeof *sbxd.tmpl);
	sbxd.tmpl[0] = sbx_xstrdup("base");
	sbxd.tmpl[1] = sbx_xstrdup("host");
	for (i = 0; i < n; i++) {
		eq = strchr(sbxd.o.templates[i], '=');
		if (!eq || eq == sbxd.o.templates[i] || !eq[1])
			return sbx_err_set(err, SBX_EX_USAGE, "bad template "
			    "'%s' (want NAME=IMAGE)", sbxd.o.templates[i]);
		sbxd.tmpl[2 + 2 * i] = strndup(sbxd.o.templates[i],
		    (size_t)(eq - sbxd.o.templates[i]));
		sbxd.tmpl[3 + 2 * i] = sbx_xstrdup(eq + 1);
	}
	return 0;
}

static void
on_exit_boxes(void)
{
	struct sbxd_box *b, **all = NULL;
	size_t n = 0, i;
	struct sbx_err err;

	if (!strcmp(sbxd.o.on_exit, "leave"))
		return;
	pthread_mutex_lock(&sbxd.mu);
	for (b = sbxd.boxes; b; b = b->next) {
		all = sbx_xrealloc(all, (n + 1) * sizeof *all);
		b->refs++;
		all[n++] = b;
	}
	pthread_mutex_unlock(&sbxd.mu);
	for (i = 0; i < n; i++) {
		b = all[i];
		if (!strcmp(sbxd.o.on_exit, "kill")) {
			sbxd_proc_end_all(b);
			if (sbxd_be_kill(b->ref, &err) < 0 &&
			    err.code != SBX_EX_NOSANDBOX)
				sbxd_log("cannot kill sandbox %s: %s", b->id,
				    err.msg);
			sbxd_box_unlink(b);
		} else if (!b->paused) {
			if (sbxd_be_pause(b->ref, &err) < 0)
				sbxd_log("cannot pause sandbox %s: %s", b->id,
				    err.msg);
			pthread_mutex_lock(&sbxd.mu);
			b->paused = 1;
			pthread_mutex_unlock(&sbxd.mu);
			sbxd_box_save(b);
		}
		sbxd_box_put(b);
	}
	free(all);
}

/* Let the requests under way finish (streams end at once, seeing
 * stopping) before the connections are closed, for 5 s at most. */
static void
drain(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	pthread_mutex_lock(&sbxd.mu);
	while (sbxd.active &&
	    pthread_cond_timedwait(&sbxd.cv, &sbxd.mu, &ts) != ETIMEDOUT)
		;
	if (sbxd.active)
		sbxd_log("stopping with %u requests unfinished", sbxd.active);
	pthread_mutex_unlock(&sbxd.mu);
}

/* Enough open files for the connection cap, and what each connection
 * may bring (a process's pipes, a files helper's socket): the soft
 * limit raised, the hard one too when we may. The cap comes down to
 * fit when they cannot be had. */
static unsigned
files_for(unsigned conns, char *note, size_t n)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)conns * 2 + 1024, was;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		snprintf(note, n, "unknown");
		return conns;
	}
	was = rl.rlim_cur;
	if (rl.rlim_cur < need) {
		if (rl.rlim_max < need) {
			struct rlimit up = {need, need};

			if (setrlimit(RLIMIT_NOFILE, &up) == 0)
				rl = up;
		}
		rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			rl.rlim_cur = was;
	}
	if (rl.rlim_cur == was)
		snprintf(note, n, "%llu", (unsigned long long)was);
	else
		snprintf(note, n, "%llu (raised from %llu)",
		    (unsigned long long)rl.rlim_cur,
		    (unsigned long long)was);
	if (rl.rlim_cur < need) {
		rlim_t fit = rl.rlim_cur > 1024 ? (rl.rlim_cur - 1024) / 2 : 64;

		sbxd_log("only %llu open files: at most %llu connections",
		    (unsigned long long)rl.rlim_cur, (unsigned long long)fit);
		return (unsigned)fit;
	}
	return conns;
}

static const char *
cap_str(unsigned v, char *buf, size_t n)
{
	if (!v)
		return "none";
	snprintf(buf, n, "%u", v);
	return buf;
}

int
sbx_sbxd_run(const struct sbx_sbxd_opts *o, struct sbx_err *err)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct MHD_Daemon *d;
	sigset_t sigs;
	pthread_t reaper;
	unsigned flags, conns;
	char files[96], c1[16], c2[16], c3[16], c4[16];
	int sig;

	sbxd.o = *o;
	pthread_mutex_init(&sbxd.mu, NULL);
	pthread_cond_init(&sbxd.cv, NULL);
	if (!(sbxd.be = sbx_backend_get(o->backend ? o->backend : "local",
	    err)))
		return -1;
	if (sbx_limits_default(sbxd.be, &sbxd.limits, 0, err) < 0 ||
	    sbx_limits_disk(sbxd.be, &sbxd.limits, err) < 0 ||
	    parse_listen(o->listen, &ss, &sslen, err) < 0 ||
	    templates_init(err) < 0 || load_keys(err) < 0)
		return -1;
	/* Before any thread: it forks every child of sbxd's. */
	if (sbxd_spawner_start(err) < 0 || sbxd_store_adopt(err) < 0 ||
	    sbxd_tpl_init(err) < 0)
		return -1;
	/* Every thread starts with these blocked: main takes them. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* Event-driven: a pool of epoll loops; a stream waiting for output
	 * is a suspended connection (wake.c), not a thread. */
	conns = files_for(o->max_conns ? o->max_conns : 1u << 20, files,
	    sizeof files);
	flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG |
	    MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (sbxd_wake_start(err) < 0)
		return -1;
	/* Its thread makes nothing before a create asks. */
	if (sbxd_warm_start(err) < 0) {
		sbxd_wake_end();
		return -1;
	}
	conns_max = conns;
	d = MHD_start_daemon(flags, 0, on_accept, NULL, on_request, NULL,
	    MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
	    MHD_OPTION_THREAD_POOL_SIZE, POOL_THREADS,
	    MHD_OPTION_CONNECTION_TIMEOUT, o->header_timeout,
	    MHD_OPTION_CONNECTION_LIMIT, conns * 2,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->max_per_addr,
	    MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
	    MHD_OPTION_END);
	if (!d) {
		sbxd_warm_end();
		sbxd_wake_end();
		return sbx_err_set(err, SBX_EX_FAIL, "cannot listen on '%s'",
		    o->listen);
	}
	if (pthread_create(&reaper, NULL, sbxd_reaper, NULL)) {
		MHD_stop_daemon(d);
		sbxd_warm_end();
		sbxd_wake_end();
		return sbx_err_set(err, SBX_EX_FAIL, "cannot start a thread");
	}
	sbxd_log("listening on %s (%s backend)", o->listen, sbxd.be->name);
	sbxd_log("limits: connections %s, per address %s, header timeout "
	    "%us, sandboxes %s, creates a second per key %s, open files %s",
	    cap_str(conns, c1, sizeof c1),
	    cap_str(o->max_per_addr, c2, sizeof c2), o->header_timeout,
	    cap_str(o->max_sandboxes, c3, sizeof c3),
	    cap_str(o->create_rate, c4, sizeof c4), files);
	if (o->warm)
		sbxd_log("made ahead: up to %u sandboxes like the last create",
		    o->warm);
	for (;;) {
		if (sigwait(&sigs, &sig))
			continue;
		if (sig == SIGHUP) {
			if (load_keys(err) < 0)
				sbxd_log("keys not reloaded: %s", err->msg);
			else
				sbxd_log("keys reloaded");
			continue;
		}
		break;
	}
	sbxd_log("stopping (%s)", strsignal(sig));
	MHD_quiesce_daemon(d);
	pthread_mutex_lock(&sbxd.mu);
	sbxd.stopping = 1;
	pthread_cond_broadcast(&sbxd.cv);
	pthread_mutex_unlock(&sbxd.mu);
	sbxd_wake_all();
	pthread_join(reaper, NULL);
	drain();
	MHD_stop_daemon(d);
	sbxd_wake_end();
	sbxd_warm_end();
	on_exit_boxes();
	return 0;
}
