/* registry.c - image references and a client of the OCI distribution
 * API: manifests and blobs of one repository, behind the registries'
 * token flow (a Bearer token from the realm the registry names,
 * anonymous or with the user's credentials) or Basic authentication. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nettle/base64.h>
#include <nettle/sha2.h>

#include "image/image.h"

#define DOCKER_HUB "docker.io"
#define DOCKER_HUB_API "registry-1.docker.io"
#define DOCKER_HUB_AUTH_KEY "https://index.docker.io/v1/"
#define MANIFEST_MAX (4u << 20)

static const char *const accept_manifests =
    "Accept: application/vnd.oci.image.index.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.v2+json";

struct sbx_registry {
	struct sbx_http *h;
	char *domain, *repo;
	char *basic;   /* base64 of "user:password", or NULL */
	char *authz;   /* "Authorization: ..." once the registry asked */
	const int *stop;   /* blobs: nonzero ends the transfer */
	void (*on_bytes)(size_t n, void *arg); /* blobs: what came */
	void *on_bytes_arg;
};

/* --- credentials -------------------------------------------------------- */

static char *
b64(const char *s)
{
	size_t n = strlen(s);
	char *out = sbx_xcalloc(1, BASE64_ENCODE_RAW_LENGTH(n) + 1);

	base64_encode_raw(out, n, (const uint8_t *)s);
	return out;
}

/* The user's credentials for domain as base64 "user:password", or NULL:
 * sbx's own file first, then Docker's config.json (its "auth" fields;
 * credential helpers are not run). */
static char *
credentials(const char *domain)
{
	char *name = sbx_xasprintf("registry-%s", domain), *v, *path, *out;
	const char *key, *dir, *home;
	json_t *cfg, *a;
	struct sbx_err e = {0};

	v = sbx_cred_get(NULL, name, NULL);
	free(name);
	if (v) {
		out = b64(v);
		explicit_bzero(v, strlen(v));
		free(v);
		return out;
	}
	if ((dir = getenv("DOCKER_CONFIG")) && *dir)
		path = sbx_xasprintf("%s/config.json", dir);
	else if ((home = getenv("HOME")) && *home)
		path = sbx_xasprintf("%s/.docker/config.json", home);
	else
		return NULL;
	cfg = access(path, F_OK) == 0 ? sbx_json_load_object(path, &e) : NULL;
	free(path);
	key = !strcmp(domain, DOCKER_HUB) ? DOCKER_HUB_AUTH_KEY : domain;
	a = json_object_get(json_object_get(json_object_get(cfg, "auths"),
	    key), "auth");
	out = json_is_string(a) && *json_string_value(a) ?
	    sbx_xstrdup(json_string_value(a)) : NULL;
	json_decref(cfg);
	return out;
}

/* The Engine API's X-Registry-Auth for domain: base64url of
 * {"username","password","serveraddress"} from the same places as pull's
 * credentials (malloc'd, to be wiped), or NULL when there are none. */
char *
sbx_registry_engine_auth(const char *domain)
{
	char *basic = credentials(domain), *plain, *colon, *js, *out;
	uint8_t *raw;
	size_t n, len;
	struct base64_decode_ctx dc;
	json_t *o;

	if (!basic)
		return NULL;
	n = strlen(basic);
	raw = sbx_xcalloc(1, BASE64_DECODE_LENGTH(n) + 1);
	base64_decode_init(&dc);
	len = BASE64_DECODE_LENGTH(n);
	if (!base64_decode_update(&dc, &len, raw, n, basic) ||
	    !base64_decode_final(&dc) || !(colon = memchr(raw, ':', len))) {
		explicit_bzero(raw, BASE64_DECODE_LENGTH(n));
		explicit_bzero(basic, n);
		free(raw);
		free(basic);
		return NULL;
	}
	plain = (char *)raw;
	plain[len] = '\0';
	*colon = '\0';
	o = json_pack("{s:s,s:s,s:s}", "username", plain, "password", colon + 1,
	    "serveraddress", domain);
	js = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	explicit_bzero(raw, BASE64_DECODE_LENGTH(n));
	explicit_bzero(basic, n);
	free(raw);
	free(basic);
	if (!js)
		return NULL;
	n = strlen(js);
	{
		struct base64_encode_ctx ec;
		size_t k;

		out = sbx_xcalloc(1, BASE64_ENCODE_LENGTH(n) +
		    BASE64_ENCODE_FINAL_LENGTH + 1);
		base64url_encode_init(&ec);
		k = base64_encode_update(&ec, out, n, (const uint8_t *)js);
		base64_encode_final(&ec, out + k);
	}
	explicit_bzero(js, n);
	free(js);
	return out;
}

/* --- the client --------------------------------------------------------- */

struct sbx_registry *
sbx_registry_open(const struct sbx_imgref *r,
    const struct sbx_registry_opts *o, struct sbx_err *err)
{
	struct sbx_registry *g = sbx_xcalloc(1, sizeof *g);
	const char *host = strcmp(r->domain, DOCKER_HUB) ? r->domain :
	    DOCKER_HUB_API;
	const char *const *i;
	char *ep;
	int plain = sbx_registry_loopback(r->domain);

	for (i = o ? o->insecure : NULL; i && *i; i++)
		if (!strcmp(*i, r->domain))
			plain = 1;
	ep = sbx_xasprintf("%s://%s", plain ? "http" : "https", host);
	g->h = sbx_http_new(ep, err);
	free(ep);
	if (!g->h) {
		free(g);
		return NULL;
	}
	g->domain = sbx_xstrdup(r->domain);
	g->repo = sbx_xstrdup(r->repo);
	g->basic = credentials(r->domain);
	return g;
}

struct sbx_registry *
sbx_registry_dup(const struct sbx_registry *g, const int *stop,
    void (*on_bytes)(size_t n, void *arg), void *arg, struct sbx_err *err)
{
	struct sbx_registry *d = sbx_xcalloc(1, sizeof *d);

	if (!(d->h = sbx_http_new(sbx_http_endpoint(g->h), err))) {
		free(d);
		return NULL;
	}
	d->domain = sbx_xstrdup(g->domain);
	d->repo = sbx_xstrdup(g->repo);
	d->basic = g->basic ? sbx_xstrdup(g->basic) : NULL;
	d->authz = g->authz ? sbx_xstrdup(g->authz) : NULL;
	d->stop = stop;
	d->on_bytes = on_bytes;
	d->on_bytes_arg = arg;
	return d;
}

void
sbx_registry_close(struct sbx_registry *g)
{
	if (!g)
		return;
	sbx_http_free(g->h);
	free(g->domain);
	free(g->repo);
	if (g->basic)
		explicit_bzero(g->basic, strlen(g->basic));
	free(g->basic);
	if (g->authz)
		explicit_bzero(g->authz, strlen(g->authz));
	free(g->authz);
	free(g);
}

/* g's Authorization header, the one before it wiped: a registry asks
 * again when a token expires mid-pull. */
static void
set_authz(struct sbx_registry *g, char *hdr)
{
	if (g->authz)
		explicit_bzero(g->authz, strlen(g->authz));
	free(g->authz);
	g->authz = hdr;
}

/* The value of parameter key in a WWW-Authenticate challenge (malloc'd),
 * or NULL. */
static char *
challenge_param(const char *c, const char *key)
{
	size_t k = strlen(key);
	const char *p = c, *v, *e;

	while ((p = strstr(p, key))) {
		if ((p == c || p[-1] == ' ' || p[-1] == ',') && p[k] == '=') {
			v = p + k + 1;
			if (*v == '"') {
				v++;
				e = strchr(v, '"');
			} else {
				e = v + strcspn(v, ", ");
			}
			if (!e)
				return NULL;
			return sbx_xasprintf("%.*s", (int)(e - v), v);
		}
		p += k;
	}
	return NULL;
}

/* A Bearer token from the realm the challenge names, for pulling g's
 * repository: "Authorization: Bearer ..." into g->authz. */
static int
bearer(struct sbx_registry *g, const char *chal, struct sbx_err *err)
{
	char *realm = challenge_param(chal, "realm"), *service =
	    challenge_param(chal, "service"), *scope, *esc_s = NULL,
	    *esc_c, *path, *ep = NULL, *hdr = NULL;
	const char *rest, *headers[2] = {NULL, NULL};
	struct sbx_http *th = NULL;
	struct sbx_http_resp rs = {0};
	struct sbx_http_req rq = {.method = "GET", .in_fd = -1,
	    .out_fd = -1, .idempotent = 1};
	const char *tok;
	int rc = -1;

	scope = sbx_xasprintf("repository:%s:pull", g->repo);
	if (!realm || (strncmp(realm, "https://", 8) &&
	    strncmp(realm, "http://", 7))) {
		sbx_err_set(err, SBX_EX_FAIL, "registry '%s' asks for a token "
		    "from no usable realm", g->domain);
		goto out;
	}
	/* A token over plain HTTP only from a registry reached so. */
	if (!strncmp(realm, "http://", 7) &&
	    strncmp(sbx_http_endpoint(g->h), "http://", 7)) {
		sbx_err_set(err, SBX_EX_FAIL, "registry '%s' asks for a token "
		    "over plain HTTP", g->domain);
		goto out;
	}
	rest = strstr(realm, "//") + 2;
	rest += strcspn(rest, "/");
	ep = sbx_xasprintf("%.*s", (int)(rest - realm), realm);
	if (!(th = sbx_http_new(ep, err)))
		goto out;
	esc_c = sbx_http_escape(scope);
	if (service)
		esc_s = sbx_http_escape(service);
	path = sbx_xasprintf("%s%sscope=%s%s%s", *rest ? rest : "/",
	    strchr(rest, '?') ? "&" : "?", esc_c, esc_s ? "&service=" : "",
	    esc_s ? esc_s : "");
	free(esc_c);
	free(esc_s);
	if (g->basic) {
		hdr = sbx_xasprintf("Authorization: Basic %s", g->basic);
		headers[0] = hdr;
	}
	rq.path = path;
	rq.headers = headers;
	rc = sbx_http_do(th, &rq, &rs, err);
	free(path);
	if (rc < 0)
		goto out;
	rc = -1;
	if (rs.status == 401 || rs.status == 403) {
		sbx_err_set(err, SBX_EX_CRED, "registry '%s' refused %s: HTTP "
		    "%ld", g->domain, g->basic ? "the credentials" :
		    "an anonymous token", rs.status);
		goto out;
	}
	tok = sbx_json_str(rs.json, "token");
	if (!tok || !*tok)
		tok = sbx_json_str(rs.json, "access_token");
	if (rs.status != 200 || !tok || !*tok) {
		sbx_err_set(err, SBX_EX_FAIL, "registry '%s' gave no token: "
		    "HTTP %ld", g->domain, rs.status);
		goto out;
	}
	set_authz(g, sbx_xasprintf("Authorization: Bearer %s", tok));
	rc = 0;
out:
	if (rs.body.data)
		explicit_bzero(rs.body.data, rs.body.len);
	sbx_http_resp_release(&rs);
	sbx_http_free(th);
	if (hdr)
		explicit_bzero(hdr, strlen(hdr));
	free(hdr);
	free(ep);
	free(realm);
	free(service);
	free(scope);
	return rc;
}

/* rq on g, authenticating once when the registry says 401. */
static int
request(struct sbx_registry *g, struct sbx_http_req *rq,
    struct sbx_http_resp *rs, const char *accept, struct sbx_err *err)
{
	const char *headers[3];
	char chal[1024];
	int n, tries;

	for (tries = 0;; tries++) {
		n = 0;
		if (accept)
			headers[n++] = accept;
		if (g->authz)
			headers[n++] = g->authz;
		headers[n] = NULL;
		rq->headers = headers;
		if (sbx_http_do(g->h, rq, rs, err) < 0)
			return -1;
		if (rs->status != 401 || tries)
			break;
		if (!sbx_http_header(rs, "WWW-Authenticate", chal,
		    sizeof chal))
			break;
		sbx_http_resp_release(rs);
		if (!strncasecmp(chal, "Bearer ", 7)) {
			if (bearer(g, chal + 7, err) < 0)
				return -1;
		} else if (!strncasecmp(chal, "Basic", 5) && g->basic) {
			set_authz(g, sbx_xasprintf("Authorization: Basic %s",
			    g->basic));
		} else {
			return sbx_err_set(err, SBX_EX_CRED, "registry '%s' "
			    "wants credentials (a 0600 file "
			    "credentials/registry-%s holding user:password, "
			    "or docker login)", g->domain, g->domain);
		}
	}
	if (rs->status == 401 || rs->status == 403)
		return sbx_err_set(err, SBX_EX_CRED, "registry '%s' refused "
		    "%s for '%s': HTTP %ld", g->domain, g->authz ?
		    "the credentials" : "access", g->repo, rs->status);
	return 0;
}

static void
hex_digest(struct sha256_ctx *c, char *out)
{
	uint8_t d[SHA256_DIGEST_SIZE];
	int i;

	sha256_digest(c, sizeof d, d);
	memcpy(out, "sha256:", 7);
	for (i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
}

int
sbx_registry_manifest(struct sbx_registry *g, const char *ref,
    struct sbx_buf *body, char **type, char **digest, struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "GET", .in_fd = -1,
	    .out_fd = -1, .idempotent = 1};
	struct sbx_http_resp rs = {0};
	struct sha256_ctx c;
	char *path, ct[256], got[7 + 2 * SHA256_DIGEST_SIZE + 1], hd[128];
	int rc = -1;

	*type = *digest = NULL;
	path = sbx_xasprintf("/v2/%s/manifests/%s", g->repo, ref);
	rq.path = path;
	if (request(g, &rq, &rs, accept_manifests, err) < 0)
		goto out;
	if (rs.status == 404) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no image '%s/%s' %s '%s' "
		    "in the registry", g->domain, g->repo,
		    sbx_image_valid_digest(ref) ? "of digest" : "tagged", ref);
		goto out;
	}
	if (rs.status != 200) {
		sbx_err_set(err, SBX_EX_FAIL, "registry '%s' answered HTTP %ld "
		    "for the manifest of '%s:%s'", g->domain, rs.status,
		    g->repo, ref);
		goto out;
	}
	if (rs.body.truncated || rs.body.len > MANIFEST_MAX) {
		sbx_err_set(err, SBX_EX_DATA, "the manifest of '%s:%s' is too "
		    "large", g->repo, ref);
		goto out;
	}
	sha256_init(&c);
	sha256_update(&c, rs.body.len, (const uint8_t *)rs.body.data);
	hex_digest(&c, got);
	if ((sbx_image_valid_digest(ref) && strcmp(ref, got)) ||
	    (sbx_http_header(&rs, "Docker-Content-Digest", hd, sizeof hd) &&
	    sbx_image_valid_digest(hd) && strcmp(hd, got))) {
		sbx_err_set(err, SBX_EX_DATA, "the manifest of '%s:%s' is not "
		    "what its digest says (%s)", g->repo, ref, got);
		goto out;
	}
	if (!sbx_http_header(&rs, "Content-Type", ct, sizeof ct))
		ct[0] = '\0';
	ct[strcspn(ct, "; ")] = '\0';
	body->len = 0;
	sbx_buf_add(body, rs.body.data, rs.body.len);
	*type = sbx_xstrdup(ct);
	*digest = sbx_xstrdup(got);
	rc = 0;
out:
	sbx_http_resp_release(&rs);
	free(path);
	return rc;
}

struct blob_sink {
	int fd;
	struct sha256_ctx c;
	int werr;
	struct sbx_registry *g;
};

static int
blob_data(const char *p, size_t n, void *arg)
{
	struct blob_sink *s = arg;

	if (s->g->stop && __atomic_load_n(s->g->stop, __ATOMIC_RELAXED))
		return 1;
	sha256_update(&s->c, n, (const uint8_t *)p);
	if (sbx_write_all(s->fd, p, n) < 0) {
		s->werr = errno;
		return 1;
	}
	if (s->g->on_bytes)
		s->g->on_bytes(n, s->g->on_bytes_arg);
	return 0;
}

int
sbx_registry_blob(struct sbx_registry *g, const char *digest, int fd,
    struct sbx_err *err)
{
	struct blob_sink s = {.fd = fd, .g = g};
	struct sbx_http_req rq = {.method = "GET", .in_fd = -1,
	    .out_fd = -1, .follow = 1, .on_body = blob_data,
	    .on_body_arg = &s, .stop = g->stop};
	struct sbx_http_resp rs = {0};
	char *path, got[7 + 2 * SHA256_DIGEST_SIZE + 1];
	int rc = -1;

	if (!sbx_image_valid_digest(digest))
		return sbx_err_set(err, SBX_EX_DATA, "invalid blob digest "
		    "'%s'", digest);
	sha256_init(&s.c);
	path = sbx_xasprintf("/v2/%s/blobs/%s", g->repo, digest);
	rq.path = path;
	if (request(g, &rq, &rs, NULL, err) < 0) {
		if (s.werr) {
			errno = s.werr;
			sbx_err_set(err, SBX_EX_FAIL, "cannot store blob %s:",
			    digest);
		}
		goto out;
	}
	if (rs.status == 404) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "registry '%s' has no blob "
		    "%s of '%s'", g->domain, digest, g->repo);
		goto out;
	}
	if (rs.status != 200) {
		sbx_err_set(err, SBX_EX_FAIL, "registry '%s' answered HTTP %ld "
		    "for blob %s", g->domain, rs.status, digest);
		goto out;
	}
	hex_digest(&s.c, got);
	if (strcmp(got, digest)) {
		sbx_err_set(err, SBX_EX_DATA, "blob %s of '%s' is corrupt: "
		    "what came has digest %s", digest, g->repo, got);
		goto out;
	}
	rc = 0;
out:
	sbx_http_resp_release(&rs);
	free(path);
	return rc;
}
