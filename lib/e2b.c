/* e2b.c - the e2b backend: sandboxes of E2B's cloud, or of any server
 * that speaks its API (sbxd), through the REST API and envd's Connect RPC */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "execio.h"
#include "internal.h"

#define DEFAULT_DOMAIN "e2b.app"
#define DEFAULT_TEMPLATE "base"
#define DEFAULT_TIMEOUT 300 /* seconds, as the SDKs send */
#define MANAGED "io.sbx.managed"
#define LABEL_PREFIX "io.sbx."
#define WORKDIR "io.sbx.workdir"
#define CREATED "io.sbx.created"  /* seconds since the epoch */
#define OWNER "io.sbx.owner"      /* user@host */
/* envd's user for every call: root, as the other backends' commands
 * run (HOME=/root, and the workdir can be made anywhere). */
#define AS_ROOT "Authorization: Basic cm9vdDo=" /* base64("root:") */
#define FRAME_MAX (16u << 20) /* an envelope of a process's stream */
#define INPUT_CHUNK 65536     /* stdin, as the SDKs send it */

/* A client of the control plane. */
struct eb {
	struct sbx_http *h;
	char *endpoint;   /* the API's URL */
	char *key_hdr;    /* "X-API-Key: ..." */
	const char *hdrs[2];
};

/* What reaches a sandbox's envd. */
struct envd {
	struct sbx_http *h;
	char *hdr[5];     /* token, sandbox id and port when proxied, user */
	const char *hdrs[7];
};

/* The key of this process, for redact(); set by eb_open. */
static char *the_key;

static const char *
domain(void)
{
	const char *d = getenv("E2B_DOMAIN");

	return d && *d ? d : DEFAULT_DOMAIN;
}

/* The key from E2B_API_KEY, else the first line of the credentials
 * file (DESIGN.md 8), which should be mode 0600. */
static char *
api_key(struct sbx_err *err)
{
	const char *k = getenv("E2B_API_KEY"), *x = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	char *path = NULL, *line = NULL, *key = NULL;
	size_t cap = 0, n;
	struct stat sb;
	FILE *f;

	if (k && *k)
		return sbx_xstrdup(k);
	if (x && *x)
		path = sbx_xasprintf("%s/sbx/credentials/e2b", x);
	else if (home && *home)
		path = sbx_xasprintf("%s/.config/sbx/credentials/e2b", home);
	if (path && (f = fopen(path, "r"))) {
		if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & 077))
			sbx_warn("credentials file '%s' is readable by others "
			    "(want mode 0600)", path);
		if (getline(&line, &cap, f) > 0) {
			n = strcspn(line, "\r\n");
			while (n && isspace((unsigned char)line[n - 1]))
				n--;
			line[n] = '\0';
			if (*line)
				key = sbx_xstrdup(line);
			explicit_bzero(line, cap);
		}
		free(line);
		fclose(f);
	}
	if (!key)
		sbx_err_set(err, SBX_EX_CRED, "no E2B API key (set E2B_API_KEY "
		    "or write it to '%s')", path ? path :
		    "$XDG_CONFIG_HOME/sbx/credentials/e2b");
	free(path);
	return key;
}

static void
eb_close(struct eb *e)
{
	sbx_http_free(e->h);
	free(e->endpoint);
	if (e->key_hdr) {
		if (the_key == e->key_hdr + strlen("X-API-Key: "))
			the_key = NULL;
		explicit_bzero(e->key_hdr, strlen(e->key_hdr));
		free(e->key_hdr);
	}
	memset(e, 0, sizeof *e);
}

/* The API at endpoint: the ref's, else E2B_API_URL, else E2B_DOMAIN's. */
static int
eb_open(struct eb *e, const char *endpoint, struct sbx_err *err)
{
	const char *env = getenv("E2B_API_URL");
	char *key;

	memset(e, 0, sizeof *e);
	if (!(key = api_key(err)))
		return -1;
	e->key_hdr = sbx_xasprintf("X-API-Key: %s", key);
	explicit_bzero(key, strlen(key));
	free(key);
	the_key = e->key_hdr + strlen("X-API-Key: ");
	e->hdrs[0] = e->key_hdr;
	if (endpoint && *endpoint)
		e->endpoint = sbx_xstrdup(endpoint);
	else if (env && *env)
		e->endpoint = sbx_xstrdup(env);
	else
		e->endpoint = sbx_xasprintf("https://api.%s", domain());
	if (strncmp(e->endpoint, "http://", 7) &&
	    strncmp(e->endpoint, "https://", 8)) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid endpoint '%s' (http:// "
		    "or https://)", e->endpoint);
		eb_close(e);
		return -1;
	}
	if (!(e->h = sbx_http_new(e->endpoint, err))) {
		eb_close(e);
		return -1;
	}
	return 0;
}

/* A request to the API; fmt gives the path. GET, DELETE and connect
 * are retried (429, 502, 503, 504, a reset): doing them twice is
 * harmless. */
static int __attribute__((format(printf, 6, 7)))
eb_req(struct eb *e, const char *method, json_t *body,
    struct sbx_http_resp *rs, struct sbx_err *err, const char *fmt, ...)
{
	struct sbx_http_req rq = {.method = method, .body = body, .in_fd = -1,
	    .out_fd = -1, .headers = e->hdrs};
	char *path;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	if (vasprintf(&path, fmt, ap) < 0)
		path = NULL;
	va_end(ap);
	if (!path)
		return sbx_err_set(err, SBX_EX_FAIL, "out of memory");
	rq.path = path;
	rq.idempotent = !strcmp(method, "GET") || !strcmp(method, "DELETE") ||
	    (strlen(path) > 8 && !strcmp(path + strlen(path) - 8,
	    "/connect"));
	rc = sbx_http_do(e->h, &rq, rs, err);
	free(path);
	return rc;
}

/* A server that echoes the key back must not put it in our message. */
static void
redact(char *msg)
{
	size_t n = the_key ? strlen(the_key) : 0;
	char *p;

	while (n >= 4 && (p = strstr(msg, the_key)))
		memset(p, '*', n);
}

/* A server's words for a failed request, on one line: the message of a
 * JSON error, else the body with its markup and runs of space taken
 * out (a gateway's HTML page), cut short. */
static void
reason(const struct sbx_http_resp *rs, char *buf, size_t n)
{
	const char *m = sbx_json_str(rs->json, "message"), *p;
	char *copy;
	size_t i = 0, len;
	int tag = 0, space = 1;

	if (!m) {
		m = rs->body.data;
		len = m ? rs->body.len : 0;
	} else {
		len = strlen(m);
	}
	/* Redacted whole, before it is cut short. */
	copy = sbx_xmalloc(len + 1);
	if (len)
		memcpy(copy, m, len);
	copy[len] = '\0';
	redact(copy);
	m = copy;
	len = strlen(copy);
	for (p = m; p && p < m + len && i + 4 < n; p++) {
		if (*p == '<' || *p == '>') {
			/* A tag is markup, and it parts words. */
			tag = *p == '<';
			if (!space)
				buf[i++] = ' ';
			space = 1;
		} else if (tag) {
			continue;
		} else if (isspace((unsigned char)*p) ||
		    iscntrl((unsigned char)*p)) {
			if (!space)
				buf[i++] = ' ';
			space = 1;
		} else {
			buf[i++] = *p;
			space = 0;
		}
	}
	while (i && buf[i - 1] == ' ')
		i--;
	if (p && p < m + len && i + 4 >= n) {
		memcpy(buf + i, "...", 3);
		i += 3;
	}
	buf[i] = '\0';
	if (!i)
		snprintf(buf, n, "no reason given");
	free(copy);
}

/* Map a failed answer: 401 and 403 the key, 404 the sandbox. */
static int
eb_fail(const struct sbx_http_resp *rs, const char *what, const char *id,
    struct sbx_err *err)
{
	char why[256];

	if (rs->status == 401 || rs->status == 403)
		return sbx_err_set(err, SBX_EX_CRED, "the E2B API key was "
		    "rejected (status %ld)", rs->status);
	if (rs->status == 404 && id)
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    id);
	reason(rs, why, sizeof why);
	return sbx_err_set(err, SBX_EX_FAIL, "%s: %s (status %ld)", what, why,
	    rs->status);
}

static int
valid_id(const char *id)
{
	return id && *id && strlen(id) < 128 && strspn(id,
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
	    == strlen(id);
}

static int
ref_id(const json_t *ref, const char **id, struct sbx_err *err)
{
	*id = sbx_json_str(ref, "id");
	if (!valid_id(*id))
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    *id ? *id : "?");
	return 0;
}

/* "2026-12-02T16:21:49.582Z" into seconds since the epoch. */
static long long
parse_time(const char *s)
{
	struct tm tm = {0};

	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return (long long)timegm(&tm);
}

/* The listing entry of a SandboxDetail or ListedSandbox, shaped as the
 * other backends'. */
static json_t *
info_of(const json_t *s, const char *endpoint)
{
	json_t *meta = json_object_get(s, "metadata"), *mine = json_object();
	json_t *o = json_object(), *v;
	const char *k, *st = sbx_json_str(s, "state"), *t;
	long long now = sbx_now(), created;
	char ts[32];

	json_object_foreach(meta, k, v)
		if (strncmp(k, LABEL_PREFIX, strlen(LABEL_PREFIX)))
			json_object_set(mine, k, v);
	t = sbx_json_str(meta, CREATED);
	created = t && *t ? strtoll(t, NULL, 10) : 0;
	if (created <= 0)
		created = parse_time(sbx_json_str(s, "startedAt"));
	t = sbx_json_str(meta, "io.sbx.timeout");
	json_object_set_new(o, "backend", json_string("e2b"));
	json_object_set_new(o, "id", json_string(sbx_json_str(s,
	    "sandboxID")));
	json_object_set_new(o, "name", json_null());
	json_object_set_new(o, "status", json_string(st && !strcmp(st,
	    "paused") ? "paused" : "running"));
	json_object_set(o, "image", json_object_get(s, "templateID") ?
	    json_object_get(s, "templateID") : json_null());
	json_object_set(o, "workdir", json_is_string(json_object_get(meta,
	    WORKDIR)) ? json_object_get(meta, WORKDIR) : json_null());
	sbx_time_fmt(created, ts, sizeof ts);
	json_object_set_new(o, "created_at", json_string(ts));
	json_object_set_new(o, "created_at_epoch", json_integer(created));
	json_object_set_new(o, "last_activity_at", json_null());
	json_object_set_new(o, "last_activity_epoch", json_null());
	json_object_set_new(o, "age", json_integer(now - created));
	json_object_set_new(o, "idle", json_null());
	json_object_set_new(o, "timeout", json_integer(t ? strtoll(t, NULL,
	    10) : 0));
	json_object_set_new(o, "labels", mine);
	json_object_set_new(o, "processes", json_null());
	json_object_set_new(o, "memory_bytes", json_integer(sbx_json_int(s,
	    "memoryMB", 0) << 20));
	json_object_set_new(o, "cpu_s", json_null());
	json_object_set_new(o, "dir", json_null());
	json_object_set_new(o, "cpus", json_integer(sbx_json_int(s,
	    "cpuCount", 0)));
	json_object_set_new(o, "expires_at", json_string(sbx_json_str(s,
	    "endAt") ? sbx_json_str(s, "endAt") : ""));
	json_object_set_new(o, "endpoint", json_string(endpoint));
	return o;
}

/* GET /sandboxes/ID: the detail of one of ours. */
static int
eb_get(struct eb *e, const char *id, json_t **out, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	const char *m;

	*out = NULL;
	if (eb_req(e, "GET", NULL, &rs, err, "/sandboxes/%s", id) < 0)
		return -1;
	if (rs.status != 200 || !json_is_object(rs.json)) {
		eb_fail(&rs, "cannot look at a sandbox", id, err);
		sbx_http_resp_release(&rs);
		return -1;
	}
	m = sbx_json_str(json_object_get(rs.json, "metadata"), MANAGED);
	if (!m || strcmp(m, "1")) {
		sbx_http_resp_release(&rs);
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' "
		    SBX_NOT_OURS "sandbox", id);
	}
	*out = json_incref(rs.json);
	sbx_http_resp_release(&rs);
	return 0;
}

/* --- size (--cpus, --memory) ---------------------------------------------- */

/* E2B sizes a sandbox by its template: the ref records what it got, for
 * sbx-cost's per vCPU and per GiB rates (null: not told). Less than
 * --cpus or --memory asks for is refused (the caller kills it); more is
 * said, since it is billed. */
static int
size_check(struct eb *e, const char *id, const struct sbx_spec *spec,
    json_t *ref, struct sbx_err *err)
{
	json_t *s = NULL;
	struct sbx_err gerr = {0};
	long long cpus = 0, mib = 0;
	const char *t;
	int few_cpus, few_mib;

	if (eb_get(e, id, &s, &gerr) == 0) {
		cpus = sbx_json_int(s, "cpuCount", 0);
		mib = sbx_json_int(s, "memoryMB", 0);
	}
	t = s && sbx_json_str(s, "templateID") ? sbx_json_str(s,
	    "templateID") : "?";
	json_object_set_new(ref, "resources", json_pack("{s:o,s:o}", "vcpus",
	    cpus > 0 ? json_integer(cpus) : json_null(), "memory_mib",
	    mib > 0 ? json_integer(mib) : json_null()));
	if ((spec->cpus_milli || spec->memory) && (cpus <= 0 || mib <= 0)) {
		json_decref(s);
		if (gerr.code)
			return sbx_err_set(err, gerr.code, "%s", gerr.msg);
		return sbx_err_set(err, SBX_EX_FAIL, "'%s' did not say the "
		    "size of sandbox '%s' (--cpus, --memory)", e->endpoint,
		    id);
	}
	few_cpus = spec->cpus_milli > (uint64_t)cpus * 1000;
	few_mib = spec->memory > (uint64_t)mib << 20;
	if (few_cpus || few_mib) {
		sbx_err_set(err, SBX_EX_USAGE, "template '%s' gives %lld vCPU "
		    "and %lld MiB, less than %s asks: E2B sizes a sandbox by "
		    "its template (build one with more)", t, cpus, mib,
		    few_cpus && few_mib ? "--cpus and --memory" : few_cpus ?
		    "--cpus" : "--memory");
		json_decref(s);
		return -1;
	}
	if ((spec->cpus_milli && spec->cpus_milli < (uint64_t)cpus * 1000) ||
	    (spec->memory && spec->memory < (uint64_t)mib << 20))
		sbx_warn("template '%s' gives %lld vCPU and %lld MiB, more than "
		    "--cpus/--memory ask, and is billed as such", t, cpus, mib);
	json_decref(s);
	return 0;
}

/* A sandbox made for nothing goes again. */
static void
discard(struct eb *e, const char *id)
{
	struct sbx_http_resp rs;
	struct sbx_err err;

	if (eb_req(e, "DELETE", NULL, &rs, &err, "/sandboxes/%s", id) == 0)
		sbx_http_resp_release(&rs);
}

/* --- create --------------------------------------------------------------- */

static int e2b_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err);

/* As the local backend's: absolute, plain. */
static int
valid_workdir(const char *w)
{
	size_t n = strlen(w);

	return w[0] == '/' && w[1] && !strstr(w, "/../") && !strstr(w, "//")
	    && (n < 3 || strcmp(w + n - 3, "/..")) && !strstr(w, "/./") &&
	    n < 1024;
}

/* The workdir, made in the new sandbox (a template has /home/user). */
static int
make_workdir(const json_t *ref, const char *dir, struct sbx_err *err)
{
	char *argv[] = {"mkdir", "-p", "--", (char *)dir, NULL};
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4096,
	    .cwd = "/", .timeout_ms = 30000};
	struct sbx_exec_result res;
	int rc = 0;

	if (e2b_exec(ref, argv, &o, &res, err) < 0)
		return -1;
	if (res.exit_code)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot make the workdir "
		    "'%s': %.*s", dir, (int)strcspn(res.err.data ?
		    res.err.data : "", "\n"), res.err.data ? res.err.data :
		    "");
	sbx_buf_release(&res.out);
	sbx_buf_release(&res.err);
	return rc;
}

/* "user@host", who made a sandbox. */
static char *
owner(void)
{
	struct passwd *pw = getpwuid(geteuid());
	char host[256] = "";

	if (gethostname(host, sizeof host - 1) < 0)
		host[0] = '\0';
	return sbx_xasprintf("%s@%s", pw && pw->pw_name ? pw->pw_name : "?",
	    *host ? host : "?");
}

static json_t *
create_body(const struct sbx_spec *spec)
{
	json_t *b = json_object(), *meta = json_object(), *env = json_object();
	char t[32], *k;
	size_t i;
	uint64_t timeout = spec->timeout ? spec->timeout : DEFAULT_TIMEOUT;

	snprintf(t, sizeof t, "%llu", (unsigned long long)spec->timeout);
	json_object_update(meta, spec->labels);
	json_object_set_new(meta, MANAGED, json_string("1"));
	json_object_set_new(meta, "io.sbx.timeout", json_string(t));
	/* Who made it, and when (startedAt may be a resume's): E2B's own
	 * tools show them; sbx-ls and sbx-gc date it by the latter. */
	snprintf(t, sizeof t, "%lld", sbx_now());
	json_object_set_new(meta, CREATED, json_string(t));
	k = owner();
	json_object_set_new(meta, OWNER, json_string(k));
	free(k);
	if (spec->workdir)
		json_object_set_new(meta, WORKDIR, json_string(spec->workdir));
	for (i = 0; spec->env && spec->env[i]; i++) {
		k = sbx_xstrdup(spec->env[i]);
		k[strcspn(k, "=")] = '\0';
		json_object_set_new(env, k, json_string(spec->env[i] +
		    strlen(k) + (spec->env[i][strlen(k)] == '=')));
		free(k);
	}
	json_object_set_new(b, "templateID", json_string(!spec->image ||
	    !strcmp(spec->image, "host") ? DEFAULT_TEMPLATE : spec->image));
	json_object_set_new(b, "timeout", json_integer((json_int_t)timeout));
	json_object_set_new(b, "metadata", meta);
	json_object_set_new(b, "envVars", env);
	json_object_set_new(b, "secure", json_true());
	json_object_set_new(b, "allow_internet_access",
	    json_boolean(spec->network == SBX_NET_ALLOW));
	return b;
}

/* Where envd is: at the API's own URL, named by headers, when the
 * endpoint was given (as sbxd wants) or E2B_SANDBOX_URL says; else at
 * the sandbox's host of the domain. */
static void
envd_where(json_t *ref, const char *id, int explicit, const char *endpoint,
    const json_t *sb)
{
	const char *su = getenv("E2B_SANDBOX_URL"), *d;
	char *u;

	if (su && *su) {
		json_object_set_new(ref, "envd", json_string(su));
		json_object_set_new(ref, "envd_proxy", json_true());
	} else if (explicit) {
		json_object_set_new(ref, "envd", json_string(endpoint));
		json_object_set_new(ref, "envd_proxy", json_true());
	} else {
		d = sbx_json_str(sb, "domain");
		u = sbx_xasprintf("https://%d-%s.%s", SBX_E2B_ENVD_PORT, id,
		    d && *d ? d : domain());

		json_object_set_new(ref, "envd", json_string(u));
		free(u);
		json_object_set_new(ref, "envd_proxy", json_false());
	}
}

static int
e2b_create(const struct sbx_spec *spec, json_t **ref, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct eb e;
	json_t *body = NULL;
	const char *id;
	const char *api = getenv("E2B_API_URL");
	int rc = -1;

	*ref = NULL;
	if (spec->workdir && !valid_workdir(spec->workdir))
		return sbx_err_set(err, SBX_EX_USAGE, "invalid workdir '%s' "
		    "(want an absolute, plain path)", spec->workdir);
	if (eb_open(&e, spec->endpoint, err) < 0)
		return -1;
	body = create_body(spec);
	if (eb_req(&e, "POST", body, &rs, err, "/sandboxes") < 0)
		goto out;
	if (rs.status != 201 && rs.status != 200) {
		eb_fail(&rs, "cannot create a sandbox", NULL, err);
		goto out;
	}
	id = sbx_json_str(rs.json, "sandboxID");
	if (!valid_id(id)) {
		sbx_err_set(err, SBX_EX_FAIL, "'%s' created a sandbox but did "
		    "not say its id", e.endpoint);
		goto out;
	}
	*ref = json_pack("{ssssss}", "backend", "e2b", "id", id, "endpoint",
	    e.endpoint);
	json_object_set_new(*ref, "timeout", json_integer((json_int_t)(
	    spec->timeout ? spec->timeout : DEFAULT_TIMEOUT)));
	envd_where(*ref, id, spec->endpoint || (api && *api), e.endpoint,
	    rs.json);
	if (size_check(&e, id, spec, *ref, err) < 0) {
		discard(&e, id);
		json_decref(*ref);
		*ref = NULL;
		goto out;
	}
	if (spec->workdir && make_workdir(*ref, spec->workdir, err) < 0) {
		/* Not made whole: not made. */
		discard(&e, id);
		json_decref(*ref);
		*ref = NULL;
		goto out;
	}
	rc = 0;
out:
	sbx_http_resp_release(&rs);
	if (body) {
		/* It holds the values of --env. */
		json_object_clear(body);
		json_decref(body);
	}
	eb_close(&e);
	return rc;
}

/* --- kill, info, list, pause ---------------------------------------------- */

static int
e2b_kill(json_t *ref, int keep, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	struct eb e;
	json_t *s;
	const char *id;
	int rc = 0;

	(void)keep; /* no KEEP: the caps say so */
	if (ref_id(ref, &id, err) < 0 || eb_open(&e, sbx_json_str(ref,
	    "endpoint"), err) < 0)
		return -1;
	/* Only one of ours: never another's sandbox by a mistyped id. */
	if (eb_get(&e, id, &s, err) < 0) {
		eb_close(&e);
		return -1;
	}
	json_decref(s);
	if (eb_req(&e, "DELETE", NULL, &rs, err, "/sandboxes/%s", id) < 0) {
		eb_close(&e);
		return -1;
	}
	if (rs.status >= 300)
		rc = eb_fail(&rs, "cannot kill the sandbox", id, err);
	sbx_http_resp_release(&rs);
	eb_close(&e);
	return rc;
}

static json_t *
e2b_info(const json_t *ref, struct sbx_err *err)
{
	struct eb e;
	json_t *s, *o;
	const char *id;

	if (ref_id(ref, &id, err) < 0 || eb_open(&e, sbx_json_str(ref,
	    "endpoint"), err) < 0)
		return NULL;
	if (eb_get(&e, id, &s, err) < 0) {
		eb_close(&e);
		return NULL;
	}
	o = info_of(s, e.endpoint);
	json_decref(s);
	eb_close(&e);
	return o;
}

/* GET /v2/sandboxes, running and paused, page after page, with the
 * metadata filter for sbx's own (encoded twice, as the SDKs do). */
static int
e2b_list(int (*fn)(json_t *info, void *arg), void *arg, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	struct eb e;
	json_t *one, *o;
	char next[1024], *q, *tok = NULL, *nq;
	const char *nt;
	size_t i;
	int rc = 0;

	if (eb_open(&e, NULL, err) < 0)
		return -1;
	q = sbx_http_escape(MANAGED "=1");
	for (;;) {
		nq = tok ? sbx_http_escape(tok) : NULL;
		rc = eb_req(&e, "GET", NULL, &rs, err, "/v2/sandboxes?"
		    "metadata=%s&state=running,paused&limit=100%s%s", q,
		    nq ? "&nextToken=" : "", nq ? nq : "");
		free(nq);
		free(tok);
		tok = NULL;
		if (rc < 0)
			break;
		if (rs.status != 200 || !json_is_array(rs.json)) {
			rc = eb_fail(&rs, "cannot list sandboxes", NULL, err);
			sbx_http_resp_release(&rs);
			break;
		}
		json_array_foreach(rs.json, i, one) {
			const char *m = sbx_json_str(json_object_get(one,
			    "metadata"), MANAGED);

			if (!m || strcmp(m, "1"))
				continue;
			o = info_of(one, e.endpoint);
			if (!rc && fn(o, arg) < 0)
				rc = -1;
			json_decref(o);
		}
		nt = sbx_http_header(&rs, "X-Next-Token", next, sizeof next);
		if (nt && *nt && json_array_size(rs.json) && !rc)
			tok = sbx_xstrdup(nt);
		sbx_http_resp_release(&rs);
		if (!tok)
			break;
	}
	free(q);
	eb_close(&e);
	return rc;
}

/* POST /sandboxes/ID/connect: resumes a paused sandbox, refreshes the
 * TTL of a running one; *sb (if asked) is its Sandbox, with the envd
 * access token, which is kept nowhere. */
static int
eb_connect(struct eb *e, const json_t *ref, const char *id, json_t **sb,
    struct sbx_err *err)
{
	struct sbx_http_resp rs;
	json_t *body;
	long long t = sbx_json_int(ref, "timeout", DEFAULT_TIMEOUT);
	int rc = 0;

	body = json_pack("{sI}", "timeout", (json_int_t)(t > 0 ? t :
	    DEFAULT_TIMEOUT));
	rc = eb_req(e, "POST", body, &rs, err, "/sandboxes/%s/connect", id);
	json_decref(body);
	if (rc < 0)
		return -1;
	if ((rs.status != 200 && rs.status != 201) || !json_is_object(rs.json))
		rc = eb_fail(&rs, "cannot reach the sandbox", id, err);
	else if (sb)
		*sb = json_incref(rs.json);
	sbx_http_resp_release(&rs);
	return rc;
}

static int
e2b_pause(json_t *ref, int stop, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	struct eb e;
	json_t *s;
	const char *id;
	int rc = 0;

	(void)stop; /* only suspend: the caps say so */
	if (ref_id(ref, &id, err) < 0 || eb_open(&e, sbx_json_str(ref,
	    "endpoint"), err) < 0)
		return -1;
	if (eb_get(&e, id, &s, err) < 0) {
		eb_close(&e);
		return -1;
	}
	if (!strcmp(sbx_json_str(s, "state") ? sbx_json_str(s, "state") : "",
	    "paused"))
		goto out;
	if (eb_req(&e, "POST", NULL, &rs, err, "/sandboxes/%s/pause", id) < 0) {
		rc = -1;
		goto out;
	}
	/* 409: paused already, or on its way. */
	if (rs.status >= 300 && rs.status != 409)
		rc = eb_fail(&rs, "cannot pause the sandbox", id, err);
	sbx_http_resp_release(&rs);
out:
	json_decref(s);
	eb_close(&e);
	return rc;
}

static int
e2b_resume(json_t *ref, struct sbx_err *err)
{
	struct eb e;
	json_t *s;
	const char *id;
	int rc;

	if (ref_id(ref, &id, err) < 0 || eb_open(&e, sbx_json_str(ref,
	    "endpoint"), err) < 0)
		return -1;
	if (eb_get(&e, id, &s, err) < 0) {
		eb_close(&e);
		return -1;
	}
	json_decref(s);
	rc = eb_connect(&e, ref, id, NULL, err);
	eb_close(&e);
	return rc;
}

/* --- exec ----------------------------------------------------------------- */

static char *
b64(const void *p, size_t n)
{
	char *s = sbx_xmalloc(4 * ((n + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)s, (const unsigned char *)p, (int)n);
	return s;
}

static void
envd_close(struct envd *v)
{
	size_t i;

	sbx_http_free(v->h);
	for (i = 0; i < sizeof v->hdr / sizeof v->hdr[0]; i++)
		if (v->hdr[i]) {
			explicit_bzero(v->hdr[i], strlen(v->hdr[i]));
			free(v->hdr[i]);
		}
	memset(v, 0, sizeof *v);
}

static int
envd_open(struct envd *v, const json_t *ref, const char *id,
    const json_t *sb, struct sbx_err *err)
{
	const char *url = sbx_json_str(ref, "envd"), *tok;
	json_t *where = NULL;
	size_t n = 0, i;

	memset(v, 0, sizeof *v);
	if (!url) {
		/* A ref from --id: the environment says where. */
		where = json_object();
		envd_where(where, id, getenv("E2B_API_URL") &&
		    *getenv("E2B_API_URL"), getenv("E2B_API_URL"), sb);
		url = sbx_json_str(where, "envd");
		ref = where;
	}
	if (!(v->h = sbx_http_new(url, err))) {
		json_decref(where);
		return -1;
	}
	if ((tok = sbx_json_str(sb, "envdAccessToken")))
		v->hdr[n++] = sbx_xasprintf("X-Access-Token: %s", tok);
	if (json_is_true(json_object_get(ref, "envd_proxy"))) {
		v->hdr[n++] = sbx_xasprintf("E2b-Sandbox-Id: %s", id);
		v->hdr[n++] = sbx_xasprintf("E2b-Sandbox-Port: %d",
		    SBX_E2B_ENVD_PORT);
	}
	v->hdr[n++] = sbx_xstrdup(AS_ROOT);
	for (i = 0; i < n; i++)
		v->hdrs[i] = v->hdr[i];
	json_decref(where);
	return 0;
}

/* A unary Connect call to envd. */
static int
envd_call(struct envd *v, const char *method, json_t *msg,
    struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "POST", .body = msg, .in_fd = -1,
	    .out_fd = -1, .headers = v->hdrs, .timeout_ms = 30000};
	struct sbx_http_resp rs;
	char *path = sbx_xasprintf("/process.Process/%s", method);
	int rc = 0;

	rq.path = path;
	if (sbx_http_do(v->h, &rq, &rs, err) < 0) {
		free(path);
		return -1;
	}
	if (rs.status != 200) {
		if (rs.status == 401 || rs.status == 403)
			rc = sbx_err_set(err, SBX_EX_CRED, "envd refused the "
			    "sandbox's access token (status %ld)", rs.status);
		else
			rc = eb_fail(&rs, method, NULL, err);
	}
	sbx_http_resp_release(&rs);
	free(path);
	return rc;
}

/* --- pty (sbx-exec -t) ---------------------------------------------------- */

/* The size of the caller's terminal, as a PTY message; 80x24 without
 * one (as sbxd and envd take a pty of no size). */
static json_t *
pty_size(void)
{
	struct winsize ws;

	if (sbx_xs_winsize(&ws) < 0) {
		ws.ws_row = 24;
		ws.ws_col = 80;
	}
	return json_pack("{s{sisi}}", "size", "cols", (int)ws.ws_col, "rows",
	    (int)ws.ws_row);
}

/* A Start message's pty, and the caller's TERM inside unless -e set
 * one. */
static void
pty_start_msg(json_t *msg)
{
	json_t *envs = json_object_get(json_object_get(msg, "process"),
	    "envs");

	if (!json_object_get(envs, "TERM"))
		json_object_set_new(envs, "TERM", json_string(sbx_xs_term()));
	json_object_set_new(msg, "pty", pty_size());
	json_object_set_new(msg, "stdin", json_true());
}

/* --- the process's stream, on a thread of its own ------------------------ */

/* The process's stream is one Connect request, a blocking call: it runs
 * on a thread of its own, which writes the output as the envelopes come
 * and tells the session's loop (a byte on note) when the process has its
 * pid, and at the end (EOF). The loop makes the other calls: stdin
 * (SendInput, CloseStdin), resizes (Update), the forwarded signals
 * (SendSignal) and the keep-alive.
 *
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to sbx-exec go on to the
 * command, as the other backends forward them, and the command's status
 * is then sbx-exec's. envd's SendSignal knows SIGTERM and SIGKILL only:
 * each of them goes as SIGTERM. A guard, a child of ours in a session of
 * its own, kills the command should we die without saying it ended
 * (SIGKILL included): envd never ends a process whose stream's client is
 * gone. Both name the process by a tag of ours, given in its Start: no
 * wait for its pid. */
struct run {
	/* The stream's thread's own. */
	struct sbx_buf in;      /* what is not yet a whole envelope */
	struct sbx_buf bytes;   /* a decoded chunk */
	struct sbx_xs *xs;
	int started, ended, eos;
	long long exit_code;
	char status[128];
	char error_code[64];
	char error_msg[256];
	int bad;                /* what came was not Connect */
	struct envd v;          /* the stream's client */
	struct sbx_http_req rq;
	struct sbx_http_resp rs;
	struct sbx_err rerr;
	int rc;
	/* The loop's, once told. */
	long long pid;
	int note[2];            /* the thread's news; its end at EOF */
	pthread_t th;
	int th_running;
	const json_t *ref;
	const char *id;
	const json_t *sb;
	struct eb *e;           /* the API */
	char *const *argv;
	char tag[40];
	struct envd calls;      /* the loop's client */
	long long dur;          /* seconds each refresh asks for */
	long long every_ms;     /* between refreshes; 0: none */
	long long last_ms;      /* the last one (sbx_mono_ms) */
	int connect;            /* the first is the API's connect */
	int sig_pending;        /* a SIGTERM for the command, to send */
	long long sig_at;       /* when to try it again */
	int told;               /* the loop has the pid */
	int resize_pending;     /* asked before it had */
	int guard;              /* our end of the guard's socket; -1 */
	pid_t guard_pid;
};

static const struct {
	const char *name;
	int sig;
} signames[] = {
	{"killed", SIGKILL}, {"terminated", SIGTERM}, {"interrupt", SIGINT},
	{"hangup", SIGHUP}, {"quit", SIGQUIT}, {"aborted", SIGABRT},
	{"segmentation fault", SIGSEGV}, {"broken pipe", SIGPIPE},
	{"alarm clock", SIGALRM}, {"user defined signal 1", SIGUSR1},
	{"user defined signal 2", SIGUSR2}, {"bus error", SIGBUS},
	{"floating point exception", SIGFPE}, {"illegal instruction", SIGILL},
};

/* "signal: killed" (Go's ProcessState.String()) into 9; 0 when not. */
static int
signal_of(const char *status)
{
	size_t i;

	if (strncmp(status, "signal: ", 8))
		return 0;
	for (i = 0; i < sizeof signames / sizeof signames[0]; i++)
		if (!strcmp(status + 8, signames[i].name))
			return signames[i].sig;
	return 0;
}

static int
output(struct run *r, int stream, const char *b64s)
{
	if (sbx_e2b_unb64(b64s, &r->bytes) < 0) {
		r->bad = 1;
		return -1;
	}
	sbx_xs_output(r->xs, stream, r->bytes.data, r->bytes.len);
	return 0;
}

static int
event(struct run *r, const json_t *msg)
{
	json_t *ev = json_object_get(msg, "event"), *x;
	const char *s;

	if ((x = json_object_get(ev, "start"))) {
		r->started = 1;
		r->pid = sbx_json_int(x, "pid", 0);
		/* Our pipe, and the loop reads it: it takes the byte. */
		return write(r->note[1], "s", 1) == 1 ? 0 : -1;
	}
	if ((x = json_object_get(ev, "data"))) {
		if ((s = sbx_json_str(x, "stdout")))
			return output(r, 1, s);
		if ((s = sbx_json_str(x, "stderr")))
			return output(r, 2, s);
		if ((s = sbx_json_str(x, "pty")))
			return output(r, 1, s);
		return 0;
	}
	if ((x = json_object_get(ev, "end"))) {
		r->ended = 1;
		r->exit_code = sbx_json_int(x, "exitCode", 0);
		snprintf(r->status, sizeof r->status, "%s", sbx_json_str(x,
		    "status") ? sbx_json_str(x, "status") : "");
		return 0;
	}
	return 0; /* keepalive, and what a later envd adds */
}

/* Take the whole envelopes out of what came. */
static int
on_body(const char *p, size_t n, void *arg)
{
	struct run *r = arg;
	const char *payload;
	size_t len, off = 0;
	long used;
	int flags;
	json_t *msg, *e;

	sbx_buf_add(&r->in, p, n);
	while ((used = sbx_e2b_unframe(r->in.data + off, r->in.len - off,
	    FRAME_MAX, &flags, &payload, &len)) > 0) {
		off += (size_t)used;
		msg = json_loadb(payload, len, 0, NULL);
		if (!json_is_object(msg)) {
			json_decref(msg);
			r->bad = 1;
			return -1;
		}
		if (flags & SBX_E2B_FRAME_END) {
			r->eos = 1;
			e = json_object_get(msg, "error");
			if (e) {
				snprintf(r->error_code, sizeof r->error_code,
				    "%s", sbx_json_str(e, "code") ?
				    sbx_json_str(e, "code") : "unknown");
				snprintf(r->error_msg, sizeof r->error_msg,
				    "%s", sbx_json_str(e, "message") ?
				    sbx_json_str(e, "message") : "");
			}
		} else if (event(r, msg) < 0) {
			json_decref(msg);
			return -1;
		}
		json_decref(msg);
	}
	if (used < 0) {
		r->bad = 1;
		return -1;
	}
	memmove(r->in.data, r->in.data + off, r->in.len - off);
	r->in.len -= off;
	return 0;
}

/* envd could not start the command: as env(1) says so. */
static int
start_error(const struct run *r, char *const argv[], struct sbx_err *err)
{
	const char *t = r->error_msg[0] ? r->error_msg : r->status;
	enum sbx_xs_why why = sbx_xs_start_why(t);
	char detail[400];

	/* envd's "cwd '/x' does not exist" (sbxd's: "cannot change
	 * directory to '/x': ..."): the workdir, not the command; as
	 * envd says it. */
	if (why == SBX_XS_START_WORKDIR)
		return sbx_xs_start_fail(err, why, argv[0], t);
	snprintf(detail, sizeof detail, "%s%s%s", r->error_code[0] ?
	    r->error_code : "", r->error_code[0] ? ": " : "", t[0] ? t :
	    "no reason given");
	return sbx_xs_start_fail(err, why, argv[0], detail);
}

static json_t *
start_msg(char *const argv[], const struct sbx_exec_opts *o)
{
	json_t *args = json_array(), *envs = json_object(), *proc;
	char *k;
	size_t i;

	for (i = 1; argv[i]; i++)
		json_array_append_new(args, json_string(argv[i]));
	for (i = 0; o->env && o->env[i]; i++) {
		k = sbx_xstrdup(o->env[i]);
		k[strcspn(k, "=")] = '\0';
		json_object_set_new(envs, k, json_string(o->env[i] + strlen(k) +
		    (o->env[i][strlen(k)] == '=')));
		free(k);
	}
	proc = json_pack("{sssoso}", "cmd", argv[0], "args", args, "envs",
	    envs);
	if (o->cwd)
		json_object_set_new(proc, "cwd", json_string(o->cwd));
	return json_pack("{sosb}", "process", proc, "stdin", o->interactive);
}

/* --- signals: forwarded to the command, and a guard ---------------------- */

/* SendSignal to the tagged process. */
static int
send_signal(struct envd *v, const char *tag, const char *sig)
{
	struct sbx_err err;
	json_t *m;
	int rc;

	m = json_pack("{s{ss}ss}", "process", "tag", tag, "signal", sig);
	rc = envd_call(v, "SendSignal", m, &err);
	json_decref(m);
	return rc;
}

static void __attribute__((noreturn))
guard_main(struct run *r, const sigset_t *old, int sock)
{
	static const int quiet[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
	struct sbx_err err;
	struct envd v;
	char c;
	size_t i;
	ssize_t n;
	int null;

	setsid();
	for (i = 0; i < sizeof quiet / sizeof quiet[0]; i++)
		signal(quiet[i], SIG_IGN);
	sigprocmask(SIG_SETMASK, old, NULL);
	/* Holding none of the caller's pipes: a reader sees our EOF. */
	if ((null = open("/dev/null", O_RDWR)) >= 0)
		for (i = 0; i < 3; i++)
			dup2(null, (int)i);
	if (dup2(sock, 3) < 0)
		_exit(0);
	close_range(4, ~0U, 0);
	/* "k" once the command ended; EOF: we died. (Gone already is as
	 * good.) */
	while ((n = read(3, &c, 1)) < 0 && errno == EINTR)
		;
	if (n != 1 && envd_open(&v, r->ref, r->id, r->sb, &err) == 0)
		send_signal(&v, r->tag, "SIGNAL_SIGKILL");
	_exit(0);
}

/* Before the command starts: its guard. */
static void
guard_start(struct run *r, const sigset_t *old)
{
	int sv[2];

	r->guard = -1;
	r->guard_pid = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	fflush(NULL);
	if ((r->guard_pid = fork()) == 0) {
		close(sv[0]);
		guard_main(r, old, sv[1]);
	}
	close(sv[1]);
	if (r->guard_pid > 0)
		r->guard = sv[0];
	else
		close(sv[0]);
}

/* The command ended (or never started): the guard stands down. */
static void
guard_stop(struct run *r)
{
	if (r->guard >= 0) {
		if (write(r->guard, "k", 1) < 0) {
		}
		close(r->guard);
		r->guard = -1;
	}
	if (r->guard_pid > 0)
		while (waitpid(r->guard_pid, NULL, 0) < 0 && errno == EINTR)
			;
	r->guard_pid = -1;
}

/* The API's refresh (extend only; a paused sandbox stays paused), on a
 * client of its own; a failure waits for the next one. */
static void
keep_alive(struct run *r)
{
	struct eb te = *r->e;
	struct sbx_http_resp rs;
	struct sbx_err err;
	json_t *b;

	if (!(te.h = sbx_http_new(r->e->endpoint, &err)))
		return;
	if (r->connect) {
		eb_connect(&te, r->ref, r->id, NULL, &err);
		sbx_http_free(te.h);
		return;
	}
	b = json_pack("{sI}", "duration", (json_int_t)r->dur);
	if (eb_req(&te, "POST", b, &rs, &err, "/sandboxes/%s/refreshes",
	    r->id) == 0)
		sbx_http_resp_release(&rs);
	json_decref(b);
	sbx_http_free(te.h);
}

/* --- exec: the session's transport -------------------------------------- */

static void *
stream_main(void *arg)
{
	struct run *r = arg;

	r->rc = sbx_http_do(r->v.h, &r->rq, &r->rs, &r->rerr);
	close(r->note[1]);
	r->note[1] = -1;
	return NULL;
}

static int
rx_start(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct run *r = t;

	/* No stdin before the process has its pid. */
	sbx_xs_hold_input(xs, 1);
	guard_start(r, &xs->old);
	if (envd_open(&r->calls, r->ref, r->id, r->sb, err) < 0)
		return -1;
	if (pipe2(r->note, O_CLOEXEC) < 0)
		return sbx_err_set(err, SBX_EX_EXECFAIL, "pipe:");
	if (pthread_create(&r->th, NULL, stream_main, r)) {
		close(r->note[1]);
		r->note[1] = -1;
		return sbx_err_set(err, SBX_EX_EXECFAIL, "cannot start a "
		    "thread");
	}
	r->th_running = 1;
	return 0;
}

static int
rx_fds(void *t, struct pollfd *p, long long *wake)
{
	struct run *r = t;
	long long at = -1;

	p[0] = (struct pollfd){r->note[0], POLLIN, 0};
	if (r->connect)
		at = 0;
	else if (r->every_ms)
		at = r->last_ms + r->every_ms;
	/* Before the process is there, not_found: again in 20 ms. */
	if (r->sig_pending && (at < 0 || at > r->sig_at))
		at = r->sig_at;
	if (at >= 0 && (*wake < 0 || *wake > at))
		*wake = at;
	return 1;
}

static void
resize_send(struct run *r)
{
	struct sbx_err err;
	json_t *msg = json_pack("{s{sI}so}", "process", "pid",
	    (json_int_t)r->pid, "pty", pty_size());

	/* The process may have ended meanwhile: not our failure. */
	envd_call(&r->calls, "Update", msg, &err);
	json_decref(msg);
}

static int
rx_ready(void *t, struct sbx_xs *xs, const struct pollfd *p, int n,
    struct sbx_err *err)
{
	struct run *r = t;
	char c;
	ssize_t k;

	(void)n;
	(void)err;
	if (r->sig_pending && sbx_mono_ms() >= r->sig_at) {
		if (send_signal(&r->calls, r->tag, "SIGNAL_SIGTERM") == 0)
			r->sig_pending = 0;
		r->sig_at = sbx_mono_ms() + 20;
	}
	if (r->connect) {
		keep_alive(r);
		r->connect = 0;
		r->last_ms = sbx_mono_ms();
	} else if (r->every_ms && sbx_mono_ms() >= r->last_ms + r->every_ms) {
		/* The sandbox is not idle while a command runs. */
		keep_alive(r);
		r->last_ms = sbx_mono_ms();
	}
	if (!p[0].revents)
		return 0;
	if ((k = read(r->note[0], &c, 1)) == 1) {
		/* The pid: stdin, and a resize asked before, go to it. */
		r->told = 1;
		sbx_xs_hold_input(xs, 0);
		if (r->resize_pending)
			resize_send(r);
		r->resize_pending = 0;
	} else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
		pthread_join(r->th, NULL);
		r->th_running = 0;
		sbx_xs_done(xs);
	}
	return 0;
}

/* Stdin, chunk by chunk (SendInput), and CloseStdin at its end. */
static int
rx_input(void *t, struct sbx_xs *xs, const char *p, size_t n)
{
	struct run *r = t;
	struct sbx_err err;
	json_t *msg;
	char *s;
	int rc;

	if (!n) {
		msg = json_pack("{s{sI}}", "process", "pid",
		    (json_int_t)r->pid);
		envd_call(&r->calls, "CloseStdin", msg, &err);
		json_decref(msg);
		return 0;
	}
	s = b64(p, n);
	msg = json_pack("{s{sI}s{ss}}", "process", "pid", (json_int_t)r->pid,
	    "input", xs->o->tty ? "pty" : "stdin", s);
	free(s);
	/* The process may have ended meanwhile: not our failure. */
	rc = envd_call(&r->calls, "SendInput", msg, &err);
	json_decref(msg);
	return rc;
}

static void
rx_signal(void *t, int sig)
{
	struct run *r = t;

	(void)sig;
	r->sig_pending = 1;
	r->sig_at = 0;
}

static void
rx_resize(void *t)
{
	struct run *r = t;

	if (r->told)
		resize_send(r);
	else
		r->resize_pending = 1;
}

/* The stream broke before the end: is the sandbox still there? */
static int
vanished(struct run *r, struct sbx_err *err)
{
	struct sbx_err gerr = {0};
	json_t *s2 = NULL;
	int rc;

	if (eb_get(r->e, r->id, &s2, &gerr) < 0 && gerr.code ==
	    SBX_EX_NOSANDBOX)
		rc = sbx_xs_vanished(err, r->id, r->argv[0]);
	else
		rc = sbx_err_set(err, SBX_EX_FAIL, "the stream of '%s' broke "
		    "before its end", r->argv[0]);
	json_decref(s2);
	return rc;
}

static int
rx_finish(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct run *r = t;
	const struct sbx_exec_opts *o = xs->o;
	int sig;

	guard_stop(r);
	/* Idle from now on: its timeout counts from the command's end. */
	if (r->rc == 0 && r->rs.status == 200 && r->ended &&
	    sbx_mono_ms() - r->last_ms >= 1000) {
		struct sbx_err cerr;

		eb_connect(r->e, r->ref, r->id, NULL, &cerr);
	}
	if (r->rc < 0 && r->rs.timed_out && o->timeout_ms && r->started) {
		struct sbx_err kerr;
		json_t *k = json_pack("{s{sI}ss}", "process", "pid",
		    (json_int_t)r->pid, "signal", "SIGNAL_SIGKILL");

		/* Gone already (envd's own deadline) is as good. */
		envd_call(&r->calls, "SendSignal", k, &kerr);
		json_decref(k);
		sbx_xs_end(xs->res, SBX_XS_TIMEDOUT, 0);
		return 0;
	}
	if (r->rc < 0) {
		if (r->bad)
			return sbx_err_set(err, SBX_EX_FAIL, "envd at '%s' sent "
			    "what is not a process's stream",
			    sbx_http_endpoint(r->v.h));
		if (r->started && !r->ended)
			return vanished(r, err);
		*err = r->rerr;
		return -1;
	}
	if (r->rs.status != 200) {
		if (r->rs.status == 401 || r->rs.status == 403)
			return sbx_err_set(err, SBX_EX_CRED, "envd refused the "
			    "sandbox's access token (status %ld)",
			    r->rs.status);
		if (r->rs.status == 502)
			/* E2B's edge: the sandbox is no more. */
			return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox "
			    "'%s': it is gone", r->id);
		return eb_fail(&r->rs, "cannot start the command", NULL, err);
	}
	if (!strcmp(r->error_code, "deadline_exceeded") && o->timeout_ms) {
		sbx_xs_end(xs->res, SBX_XS_TIMEDOUT, 0);
		return 0;
	}
	if (!r->ended) {
		if (!r->eos || r->started)
			return vanished(r, err);
		return start_error(r, r->argv, err);
	}
	/* Ended, not by a signal, without a status: it never ran. */
	if (r->exit_code < 0 && !signal_of(r->status))
		return start_error(r, r->argv, err);
	if ((sig = signal_of(r->status))) {
		struct sbx_err gerr = {0};
		json_t *s2 = NULL;

		/* A sandbox killed under it kills the command too: that
		 * is the sandbox's end, not the command's. */
		if (sig == SIGKILL && eb_get(r->e, r->id, &s2, &gerr) < 0 &&
		    gerr.code == SBX_EX_NOSANDBOX)
			return sbx_xs_vanished(err, r->id, r->argv[0]);
		json_decref(s2);
		sbx_xs_end(xs->res, SBX_XS_KILLED, sig);
	} else {
		sbx_xs_end(xs->res, SBX_XS_EXITED, (int)(r->exit_code & 0xff));
	}
	return 0;
}

static const struct sbx_xs_transport rx_transport = {
	.signals = SBX_XS_SIGS_END, /* each goes as SIGTERM */
	.start = rx_start,
	.fds = rx_fds,
	.ready = rx_ready,
	.input = rx_input,
	.signal = rx_signal,
	.resize = rx_resize,
	.finish = rx_finish,
};

static int
exec_once(const json_t *ref, char *const argv[], const struct sbx_exec_opts *o,
    struct sbx_exec_result *res, struct sbx_err *err, int detail,
    int *from_detail)
{
	struct sbx_buf frame = SBX_BUF_INIT;
	struct sbx_exec_opts wo = *o;
	unsigned char rnd[16];
	char *wdir = NULL;
	const char *wd;
	struct sbx_xs xs;
	struct run r;
	struct eb e;
	json_t *sb = NULL, *msg = NULL;
	const char *hdrs[10];
	char tmo[64];
	const char *id;
	size_t i, n;
	int rc = -1;

	memset(&r, 0, sizeof r);
	r.note[0] = r.note[1] = r.guard = -1;
	r.guard_pid = -1;
	sbx_xs_init(&xs, &wo, res, &rx_transport, &r);
	if (!argv[0])
		return sbx_err_set(err, SBX_EX_USAGE, "no command to run");
	if (ref_id(ref, &id, err) < 0 || eb_open(&e, sbx_json_str(ref,
	    "endpoint"), err) < 0)
		return -1;
	/* Only one of ours, and connect would resume a paused one. */
	if (eb_get(&e, id, &sb, err) < 0)
		goto out;
	if (!strcmp(sbx_json_str(sb, "state") ? sbx_json_str(sb, "state") :
	    "", "paused")) {
		sbx_xs_paused(err, id, "paused");
		goto out;
	}
	/* The sandbox's workdir, kept in its metadata, by default. */
	if (!wo.cwd && (wd = sbx_json_str(json_object_get(sb, "metadata"),
	    WORKDIR)))
		wo.cwd = wdir = sbx_xstrdup(wd);
	/* Connect refreshes the sandbox's TTL and gives envd's token. The
	 * detail has the token too on E2B and sbxd: then connect goes
	 * beside the command's start, first thing in the session's loop. */
	if (detail && sbx_json_str(sb, "envdAccessToken")) {
		r.connect = 1;
		*from_detail = 1;
	} else {
		json_decref(sb);
		sb = NULL;
		if (eb_connect(&e, ref, id, &sb, err) < 0)
			goto out;
	}
	/* Then again while the command runs (E2B takes at most an hour
	 * a time, and makes less 15 s), and once more at its end. */
	r.last_ms = sbx_mono_ms();
	r.dur = sbx_json_int(ref, "timeout", DEFAULT_TIMEOUT);
	if (r.dur <= 0)
		r.dur = DEFAULT_TIMEOUT;
	if (r.dur > 3600)
		r.dur = 3600;
	r.every_ms = r.dur * 1000 / 3 < 1000 ? 1000 : r.dur * 1000 / 3;
	r.e = &e;
	if (envd_open(&r.v, ref, id, sb, err) < 0)
		goto out;
	for (n = 0; r.v.hdrs[n]; n++)
		hdrs[n] = r.v.hdrs[n];
	hdrs[n++] = "Keepalive-Ping-Interval: 50";
	/* envd ends the process at its deadline too, should our signal
	 * not reach it. */
	if (o->timeout_ms) {
		snprintf(tmo, sizeof tmo, "Connect-Timeout-Ms: %llu",
		    (unsigned long long)o->timeout_ms);
		hdrs[n++] = tmo;
	}
	hdrs[n] = NULL;
	msg = start_msg(argv, &wo);
	if (o->tty)
		pty_start_msg(msg);
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		memset(rnd, 0, sizeof rnd);
	memcpy(r.tag, "sbx-", 4);
	for (i = 0; i < sizeof rnd; i++)
		snprintf(r.tag + 4 + 2 * i, 3, "%02x", rnd[i]);
	json_object_set_new(msg, "tag", json_string(r.tag));
	sbx_e2b_frame_json(&frame, 0, msg);
	r.rq = (struct sbx_http_req){.method = "POST", .in_fd = -1,
	    .out_fd = -1, .path = "/process.Process/Start", .in_type =
	    "application/connect+json", .data = frame.data, .data_len =
	    frame.len, .headers = hdrs, .timeout_ms = (long)o->timeout_ms,
	    .on_body = on_body, .on_body_arg = &r};
	r.ref = ref;
	r.id = id;
	r.sb = sb;
	r.argv = argv;
	r.xs = &xs;
	r.in.limit = FRAME_MAX + 16;
	rc = sbx_xs_run(&xs, err);
out:
	if (r.th_running)
		pthread_join(r.th, NULL);
	guard_stop(&r);
	for (i = 0; i < 2; i++)
		if (r.note[i] >= 0)
			close(r.note[i]);
	for (i = 0; i < frame.len; i++)
		frame.data[i] = 0;
	sbx_buf_release(&frame);
	sbx_buf_release(&r.in);
	sbx_buf_release(&r.bytes);
	if (r.rq.path)
		sbx_http_resp_release(&r.rs);
	if (msg) {
		/* It holds the values of --env. */
		json_object_clear(msg);
		json_decref(msg);
	}
	envd_close(&r.calls);
	envd_close(&r.v);
	if (sb) {
		json_object_clear(sb);
		json_decref(sb);
	}
	free(wdir);
	eb_close(&e);
	return rc;
}

static int
e2b_exec(const json_t *ref, char *const argv[], const struct sbx_exec_opts *o,
    struct sbx_exec_result *res, struct sbx_err *err)
{
	int from_detail = 0;

	if (exec_once(ref, argv, o, res, err, 1, &from_detail) == 0)
		return 0;
	if (!from_detail || err->code != SBX_EX_CRED)
		return -1;
	/* envd refused the detail's token (before anything ran): the
	 * one connect gives, as the SDKs take it. */
	return exec_once(ref, argv, o, res, err, 0, &from_detail);
}

/* --- files: sbx-sync's transfers ----------------------------------------- */

/*
 * envd moves files over plain HTTP (/files), the shell in the sandbox
 * packs and unpacks them. A push streams the tar into a temporary file
 * in the sandbox, then tar unpacks it there; a pull uploads the list of
 * paths (no argv nor message limit for a big tree), tar packs them into
 * a temporary file, and its download streams to the caller: raw bytes,
 * not the base64 of a command's output.
 */

#define XFER_TMP "/tmp/sbx-sync-" /* the temporary files' prefix */

/* Unpack $2 in directory $1; $2 goes whatever happens. */
static const char put_sh[] =
    "cd -- \"$1\" || { rm -f -- \"$2\"; exit 3; }\n"
    "tar -x -p -o -f \"$2\"\n"
    "s=$?\n"
    "rm -f -- \"$2\"\n"
    "exit $s\n";

/* A tar in $3 of the paths listed in $2 (NUL-separated, relative to
 * directory $1) that are files or symlinks: a path gone since the scan
 * is no error. $2 goes whatever happens, $3 when tar fails. */
static const char get_sh[] =
    "cd -- \"$1\" || { rm -f -- \"$2\"; exit 3; }\n"
    "xargs -0 -r sh -c 'for f; do if [ -f \"$f\" ] || [ -L \"$f\" ]; "
    "then printf \"%s\\0\" \"$f\"; fi; done' sh <\"$2\" |\n"
    "tar -c -f \"$3\" --null --no-recursion -T -\n"
    "s=$?\n"
    "rm -f -- \"$2\"\n"
    "[ $s = 0 ] || rm -f -- \"$3\"\n"
    "exit $s\n";

/* What a transfer talks to: the API, and the envd of one of ours that
 * is running (connect would resume a paused one). */
struct xfer {
	struct eb e;
	struct envd v;
	json_t *sb;
	const char *id;
	char tmp[64];  /* the temporary file in the sandbox, or "" */
};

static void
xfer_close(struct xfer *x)
{
	envd_close(&x->v);
	if (x->sb) {
		json_object_clear(x->sb);
		json_decref(x->sb);
	}
	eb_close(&x->e);
	memset(x, 0, sizeof *x);
}

static int
xfer_open(struct xfer *x, const json_t *ref, const char *suffix,
    struct sbx_err *err)
{
	unsigned char r[8];
	size_t i, n;

	memset(x, 0, sizeof *x);
	if (ref_id(ref, &x->id, err) < 0 || eb_open(&x->e, sbx_json_str(ref,
	    "endpoint"), err) < 0)
		return -1;
	if (eb_get(&x->e, x->id, &x->sb, err) < 0)
		goto fail;
	if (!strcmp(sbx_json_str(x->sb, "state") ? sbx_json_str(x->sb,
	    "state") : "", "paused")) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%s' is paused "
		    "(sbx-pause --resume)", x->id);
		goto fail;
	}
	json_decref(x->sb);
	x->sb = NULL;
	if (eb_connect(&x->e, ref, x->id, &x->sb, err) < 0 ||
	    envd_open(&x->v, ref, x->id, x->sb, err) < 0)
		goto fail;
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		sbx_err_set(err, SBX_EX_FAIL, "getrandom:");
		goto fail;
	}
	n = (size_t)snprintf(x->tmp, sizeof x->tmp, "%s", XFER_TMP);
	for (i = 0; i < sizeof r; i++, n += 2)
		snprintf(x->tmp + n, sizeof x->tmp - n, "%02x", r[i]);
	snprintf(x->tmp + n, sizeof x->tmp - n, "%s", suffix);
	return 0;
fail:
	xfer_close(x);
	return -1;
}

/* envd's answer to a request about the sandbox's files, as an error. */
static int
xfer_fail_status(const struct sbx_http_resp *rs, const char *what,
    struct sbx_err *err)
{
	if (rs->status == 401 || rs->status == 403)
		return sbx_err_set(err, SBX_EX_CRED, "envd refused the "
		    "sandbox's access token (status %ld)", rs->status);
	if (rs->status == 507)
		return sbx_err_set(err, SBX_EX_FAIL, "%s: no space left in "
		    "the sandbox (status 507)", what);
	return eb_fail(rs, what, NULL, err);
}

/* POST /files: the body from in (streamed, of unknown length), or
 * data, into x->tmp. */
static int
xfer_upload(struct xfer *x, int in, const void *data, size_t len,
    struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "POST", .in_fd = in, .out_fd = -1,
	    .in_type = "application/octet-stream", .headers = x->v.hdrs};
	struct sbx_http_resp rs;
	char *q = sbx_http_escape(x->tmp), *path;
	int rc = 0;

	if (in < 0) {
		rq.data = len ? data : "";
		rq.data_len = len;
	}
	path = sbx_xasprintf("/files?path=%s", q);
	rq.path = path;
	if (sbx_http_do(x->v.h, &rq, &rs, err) < 0)
		rc = -1;
	else if (rs.status != 200 && rs.status != 201 && rs.status != 204)
		rc = xfer_fail_status(&rs, "cannot upload to the sandbox", err);
	if (rc == 0 || rs.status)
		sbx_http_resp_release(&rs);
	free(path);
	free(q);
	return rc;
}

/* The temporary file goes, when the shell that should have removed it
 * did not run (Remove of a missing path is no error). */
static void
xfer_remove(struct xfer *x, const char *path)
{
	struct sbx_http_req rq = {.method = "POST", .in_fd = -1, .out_fd = -1,
	    .path = "/filesystem.Filesystem/Remove", .headers = x->v.hdrs,
	    .timeout_ms = 30000};
	struct sbx_http_resp rs;
	struct sbx_err err;

	rq.body = json_pack("{ss}", "path", path);
	if (sbx_http_do(x->v.h, &rq, &rs, &err) == 0)
		sbx_http_resp_release(&rs);
	json_decref(rq.body);
}

/* GET /files: path in the sandbox, streamed to out. */
static int
xfer_download(struct xfer *x, const char *path, int out, struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "GET", .in_fd = -1, .out_fd = out,
	    .headers = x->v.hdrs};
	struct sbx_http_resp rs;
	char *q = sbx_http_escape(path), *p;
	int rc = 0;

	p = sbx_xasprintf("/files?path=%s", q);
	rq.path = p;
	if (sbx_http_do(x->v.h, &rq, &rs, err) < 0)
		rc = -1;
	else if (rs.status != 200)
		rc = xfer_fail_status(&rs, "cannot download from the sandbox",
		    err);
	if (rc == 0 || rs.status)
		sbx_http_resp_release(&rs);
	free(p);
	free(q);
	return rc;
}

/* A command that could not start in dir (envd says only "no such
 * file", or that the cwd does not exist), when one can start at /: dir
 * is gone, and err says so. */
static int
dir_gone(const json_t *ref, const char *dir, struct sbx_err *err)
{
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4096,
	    .cwd = "/"};
	struct sbx_exec_result res = {0};
	struct sbx_err perr;
	char *argv[] = {"sh", "-c", "exit 0", NULL};

	if ((err->code == SBX_EX_NOTFOUND || err->code == SBX_EX_EXECFAIL) &&
	    e2b_exec(ref, argv, &o, &res, &perr) == 0 && res.exit_code == 0)
		sbx_err_set(err, SBX_EX_USAGE, "no directory '%s' in the "
		    "sandbox", dir ? dir : "(workdir)");
	sbx_buf_release(&res.out);
	sbx_buf_release(&res.err);
	return -1;
}

/* The shell of put_sh or get_sh failed: 3 is dir's absence, else
 * tar's first words say why. */
static int
tar_failed(const struct sbx_exec_result *res, const char *dir,
    struct sbx_err *err)
{
	size_t n;

	if (res->exit_code == 3)
		return sbx_err_set(err, SBX_EX_USAGE, "no directory '%s' in "
		    "the sandbox", dir ? dir : "(workdir)");
	n = res->err.len ? strcspn(res->err.data, "\n") : 0;
	if (n > 200)
		n = 200;
	return sbx_err_set(err, SBX_EX_FAIL, "tar in the sandbox failed "
	    "(status %d)%s%.*s", res->exit_code, n ? ": " : "", (int)n,
	    n ? res->err.data : "");
}

/* The tar on in goes to a temporary file in the sandbox, which tar
 * unpacks in dir. */
static int
put_child(const json_t *ref, const char *dir, int in, struct sbx_err *err)
{
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4096};
	struct sbx_exec_result res = {0};
	struct xfer x;
	char *argv[] = {"sh", "-c", (char *)put_sh, "sh", (char *)(dir ? dir :
	    "."), NULL, NULL};
	int rc = -1;

	if (xfer_open(&x, ref, ".tar", err) < 0)
		return -1;
	argv[5] = x.tmp;
	if (xfer_upload(&x, in, NULL, 0, err) < 0) {
		xfer_remove(&x, x.tmp);
		goto out;
	}
	if (e2b_exec(ref, argv, &o, &res, err) < 0) {
		xfer_remove(&x, x.tmp);
		dir_gone(ref, dir, err);
		goto out;
	}
	if (res.exit_code)
		tar_failed(&res, dir, err);
	else {
		rc = 0;
	}
out:
	sbx_buf_release(&res.out);
	sbx_buf_release(&res.err);
	xfer_close(&x);
	return rc;
}

static int
e2b_put(const json_t *ref, const char *dir, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	struct sbx_err cerr = {0};
	int in;
	pid_t pid = sbx_job_fork(1, fd, &in, job, err);

	if (pid == 0) {
		if (put_child(ref, dir, in, &cerr) < 0)
			sbx_job_fail(job->errfd, &cerr);
		_exit(0);
	}
	return pid < 0 ? -1 : 0;
}

/* A tar of paths, made by tar in the sandbox, goes to out. */
static int
get_child(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int out, struct sbx_err *err)
{
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4096};
	struct sbx_exec_result res = {0};
	struct sbx_buf list = SBX_BUF_INIT;
	struct xfer x;
	char *argv[] = {"sh", "-c", (char *)get_sh, "sh", (char *)(dir ? dir :
	    "."), NULL, NULL, NULL};
	char *tar = NULL;
	size_t i;
	int rc = -1;

	if (xfer_open(&x, ref, ".list", err) < 0)
		return -1;
	tar = sbx_xasprintf("%.*s.tar", (int)(strlen(x.tmp) - 5), x.tmp);
	argv[5] = x.tmp;
	argv[6] = tar;
	for (i = 0; i < paths->n; i++)
		sbx_buf_add(&list, paths->e[i].path, strlen(paths->e[i].path) +
		    1);
	if (xfer_upload(&x, -1, list.data, list.len, err) < 0) {
		xfer_remove(&x, x.tmp);
		goto out;
	}
	if (e2b_exec(ref, argv, &o, &res, err) < 0) {
		xfer_remove(&x, x.tmp);
		xfer_remove(&x, tar);
		dir_gone(ref, dir, err);
		goto out;
	}
	if (res.exit_code)
		tar_failed(&res, dir, err);
	else {
		rc = xfer_download(&x, tar, out, err);
		xfer_remove(&x, tar);
	}
out:
	sbx_buf_release(&res.out);
	sbx_buf_release(&res.err);
	sbx_buf_release(&list);
	free(tar);
	xfer_close(&x);
	return rc;
}

static int
e2b_get(const json_t *ref, const char *dir, const struct sbx_manifest *paths,
    int *fd, struct sbx_job *job, struct sbx_err *err)
{
	struct sbx_err cerr = {0};
	int out;
	pid_t pid = sbx_job_fork(0, fd, &out, job, err);

	if (pid == 0) {
		if (get_child(ref, dir, paths, out, &cerr) < 0)
			sbx_job_fail(job->errfd, &cerr);
		_exit(0);
	}
	return pid < 0 ? -1 : 0;
}

static int
e2b_scan(const json_t *ref, const struct sbx_scan_opts *o,
    struct sbx_manifest *out, struct sbx_err *err)
{
	if (sbx_portable_scan(ref, o, out, err) < 0)
		return dir_gone(ref, o->dir, err);
	return 0;
}

static int
e2b_remove(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, struct sbx_err *err)
{
	if (sbx_portable_remove(ref, dir, paths, err) < 0)
		return dir_gone(ref, dir, err);
	return 0;
}

static const struct sbx_files e2b_files = {
	.put_archive = e2b_put,
	.get_archive = e2b_get,
	.scan = e2b_scan,
	.hash = sbx_portable_hash,
	.remove = e2b_remove,
};

const struct sbx_backend_ops sbx_e2b_ops = {
	.create = e2b_create,
	.exec = e2b_exec,
	.kill = e2b_kill,
	.info = e2b_info,
	.pause = e2b_pause,
	.resume = e2b_resume,
	.list = e2b_list,
	.files = &e2b_files,
};
