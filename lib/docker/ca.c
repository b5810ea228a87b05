/* ca.c - header injection on the docker backend: the sandbox's CA, which
 * sbx-netd made in DIR, put into the container's trust store through the
 * engine's archive API (a local sandbox's: lib/netd/ca.c) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include "docker.h"

#define CERTS "/etc/ssl/certs"
#define BUNDLE_MAX (16u << 20)
#define LINKS_MAX 8
#define BLOCK 512

/* --- a tar of a few members, by hand: libarchive is sbx-sync's alone,
 * and would slow every other remote tool's start -------------------------- */

static int
zero_block(const unsigned char *p)
{
	size_t i;

	for (i = 0; i < BLOCK; i++)
		if (p[i])
			return 0;
	return 1;
}

/* p[0..n) up to its first NUL, as a string. */
static char *
dupn(const char *p, size_t n)
{
	char *s;

	n = strnlen(p, n);
	s = sbx_xmalloc(n + 1);
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/* An octal field; -1 when it is not one (base-256 sizes included: no
 * member of ours is that big). */
static long long
octal(const unsigned char *p, size_t n)
{
	long long v = 0;
	size_t i = 0;

	while (i < n && p[i] == ' ')
		i++;
	if (i == n || p[i] < '0' || p[i] > '7')
		return -1;
	for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
		if (v > (1LL << 40))
			return -1;
		v = v * 8 + (p[i] - '0');
	}
	return v;
}

/* A PAX header's "linkpath" (Go's archive/tar, the engine's, writes one
 * for a target longer than the ustar field), malloc'd, or NULL. Records
 * are "LEN key=value\n", LEN counting the whole record. */
static char *
pax_linkpath(const unsigned char *p, size_t n)
{
	static const char key[] = "linkpath=";
	size_t off = 0, len, k;

	while (off < n) {
		for (len = 0, k = off; k < n && p[k] >= '0' && p[k] <= '9' &&
		    len < n; k++)
			len = len * 10 + (size_t)(p[k] - '0');
		if (k == off || k >= n || p[k] != ' ' || len > n - off ||
		    k + 1 >= off + len || p[off + len - 1] != '\n')
			return NULL;
		k++;
		if (off + len - 1 - k >= sizeof key - 1 &&
		    !memcmp(p + k, key, sizeof key - 1))
			return dupn((const char *)p + k + sizeof key - 1,
			    off + len - 1 - k - (sizeof key - 1));
		off += len;
	}
	return NULL;
}

/* The first member of the tar in p[0..n): a file's contents into data,
 * or a symlink's target into *link. -1 when it is neither, or the tar is
 * not one. */
static int
tar_first(const unsigned char *p, size_t n, struct sbx_buf *data, char **link)
{
	char *pax_link = NULL;
	long long size;
	size_t off = 0;
	int rc = -1;

	*link = NULL;
	while (off + BLOCK <= n && !zero_block(p + off)) {
		const unsigned char *h = p + off;

		if ((size = octal(h + 124, 12)) < 0 ||
		    (size_t)size > n - off - BLOCK)
			break;
		off += BLOCK;
		if (h[156] == 'x') {
			free(pax_link);
			pax_link = pax_linkpath(p + off, (size_t)size);
		} else if (h[156] == '0' || h[156] == '\0' || h[156] == '7') {
			sbx_buf_add(data, p + off, (size_t)size);
			rc = 0;
			break;
		} else if (h[156] == '2') {
			*link = pax_link ? pax_link : dupn((const char *)
			    h + 157, 100);
			pax_link = NULL;
			rc = 0;
			break;
		} else if (h[156] != 'g')
			break;
		off += ((size_t)size + BLOCK - 1) / BLOCK * BLOCK;
	}
	free(pax_link);
	return rc;
}

/* One ustar member owned by root: a directory (type '5'), a file ('0',
 * data) or a symlink ('2', to link). */
static void
tar_add(struct sbx_buf *b, const char *name, char type, unsigned mode,
    const char *data, size_t len, const char *link)
{
	unsigned char h[BLOCK] = {0};
	unsigned sum = 0;
	size_t i;

	snprintf((char *)h, 100, "%s", name);
	snprintf((char *)h + 100, 8, "%07o", mode);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011zo", type == '0' ? len : 0);
	snprintf((char *)h + 136, 12, "%011llo", (unsigned long long)
	    time(NULL));
	memset(h + 148, ' ', 8);
	h[156] = (unsigned char)type;
	if (link)
		snprintf((char *)h + 157, 100, "%s", link);
	memcpy(h + 257, "ustar\0" "00", 8);
	memcpy(h + 265, "root", 4);
	memcpy(h + 297, "root", 4);
	for (i = 0; i < BLOCK; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	sbx_buf_add(b, h, BLOCK);
	if (type != '0')
		return;
	sbx_buf_add(b, data, len);
	memset(h, 0, sizeof h);
	sbx_buf_add(b, h, (BLOCK - len % BLOCK) % BLOCK);
}

/* --- the container's files ------------------------------------------------ */

/* Whether path is in the container: 1, 0 (no), -1 (an error). */
static int
exists(struct dk *d, const char *id, const char *path, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	char *q = sbx_http_escape(path);
	int rc;

	rc = sbx_docker_req(d, "HEAD", NULL, &rs, err,
	    "/containers/%s/archive?path=%s", id, q);
	free(q);
	if (rc < 0)
		return -1;
	if (rs.status == 200)
		rc = 1;
	else if (rs.status == 404)
		rc = 0;
	else
		rc = sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot look into the "
		    "container", err);
	sbx_http_resp_release(&rs);
	return rc;
}

/* The container's bundle, through its symlinks, into out; empty when it
 * has none. */
static int
get_bundle(struct dk *d, const char *id, struct sbx_buf *out,
    struct sbx_err *err)
{
	struct sbx_http_resp rs;
	char *path = sbx_xstrdup(CA_BUNDLE), *q, *link, *s;
	int hops, rc = -1;

	for (hops = 0; hops <= LINKS_MAX; hops++) {
		q = sbx_http_escape(path);
		rc = sbx_docker_req(d, "GET", NULL, &rs, err,
		    "/containers/%s/archive?path=%s", id, q);
		free(q);
		if (rc < 0)
			break;
		rc = -1;
		if (rs.status == 404) {
			rc = 0;
		} else if (rs.status != 200) {
			sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot read the "
			    "container's trust store", err);
		} else if (rs.body.truncated || tar_first((const unsigned char *)
		    rs.body.data, rs.body.len, out, &link) < 0 ||
		    out->len > BUNDLE_MAX) {
			sbx_err_set(err, SBX_EX_FAIL, "'%s' in the container "
			    "is not a file of a trust store", path);
		} else if (link) {
			/* Relative to the link's directory. */
			s = strrchr(path, '/');
			q = *link == '/' ? sbx_xstrdup(link) : sbx_xasprintf(
			    "%.*s/%s", (int)(s - path), path, link);
			free(link);
			free(path);
			path = q;
			sbx_http_resp_release(&rs);
			continue;
		} else
			rc = 0;
		sbx_http_resp_release(&rs);
		break;
	}
	if (hops > LINKS_MAX)
		sbx_err_set(err, SBX_EX_FAIL, "too many symlinks at '%s' in "
		    "the container", CA_BUNDLE);
	free(path);
	return rc;
}

/* The CA's PEM and its subject-hash name, "<hash>.0" (OpenSSL's capath
 * lookup). */
static int
ca_read(const char *dir, struct sbx_buf *pem, char *hash, size_t hlen,
    struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/ca.crt", dir), *data;
	BIO *in = BIO_new_file(p, "r"), *out = BIO_new(BIO_s_mem());
	X509 *x = in ? PEM_read_bio_X509(in, NULL, NULL, NULL) : NULL;
	unsigned long h;
	long n;
	int ok = 0, rc = -1;

	if (!x || !out || !PEM_write_bio_X509(out, x)) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot read the sandbox's CA "
		    "'%s'", p);
		goto out;
	}
	h = X509_NAME_hash_ex(X509_get_subject_name(x), NULL, NULL, &ok);
	if (!ok) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot hash the sandbox's CA");
		goto out;
	}
	snprintf(hash, hlen, "%08lx.0", h);
	n = BIO_get_mem_data(out, &data);
	sbx_buf_add(pem, data, (size_t)n);
	rc = 0;
out:
	X509_free(x);
	BIO_free(in);
	BIO_free(out);
	free(p);
	return rc;
}

int
sbx_docker_ca_install(struct dk *d, const char *id, const char *dir,
    struct sbx_err *err)
{
	/* From the deepest: the first that exists is where the tar goes;
	 * the ones below it are made by it, 0755. An existing directory
	 * is never in the tar: the engine would give it the tar's mode. */
	static const char *const dirs[] = {CERTS, "/etc/ssl", "/etc", "/"};
	static const char end[2 * BLOCK];
	struct sbx_http_req rq = {.method = "PUT", .in_fd = -1, .out_fd = -1,
	    .in_type = "application/x-tar"};
	struct sbx_buf pem = SBX_BUF_INIT, bundle = SBX_BUF_INIT;
	struct sbx_buf tar = SBX_BUF_INIT;
	struct sbx_http_resp rs;
	char hash[32], *name, *q = NULL, *url = NULL;
	const char *rel;
	size_t base, j;
	int r, rc = -1;

	if (ca_read(dir, &pem, hash, sizeof hash, err) < 0 ||
	    get_bundle(d, id, &bundle, err) < 0)
		goto out;
	for (base = 0; base < 3; base++) {
		if ((r = exists(d, id, dirs[base], err)) < 0)
			goto out;
		if (r)
			break;
	}
	/* CERTS relative to dirs[base], and its missing parents. */
	rel = base == 3 ? CERTS + 1 : CERTS + strlen(dirs[base]);
	rel += *rel == '/';
	for (j = base; j-- > 0;) {
		name = sbx_xasprintf("%s/", dirs[j] + (base == 3 ? 1 :
		    strlen(dirs[base]) + 1));
		tar_add(&tar, name, '5', 0755, NULL, 0, NULL);
		free(name);
	}
	if (bundle.len && bundle.data[bundle.len - 1] != '\n')
		sbx_buf_add(&bundle, "\n", 1);
	sbx_buf_add(&bundle, pem.data, pem.len);
	name = sbx_xasprintf("%s%sca-certificates.crt", rel, *rel ? "/" : "");
	tar_add(&tar, name, '0', 0644, bundle.data, bundle.len, NULL);
	free(name);
	name = sbx_xasprintf("%s%ssbx-ca.pem", rel, *rel ? "/" : "");
	tar_add(&tar, name, '0', 0644, pem.data, pem.len, NULL);
	free(name);
	name = sbx_xasprintf("%s%s%s", rel, *rel ? "/" : "", hash);
	tar_add(&tar, name, '2', 0777, NULL, 0, "sbx-ca.pem");
	free(name);
	sbx_buf_add(&tar, end, sizeof end);
	q = sbx_http_escape(dirs[base]);
	url = sbx_xasprintf("/v%d.%d/containers/%s/archive?path=%s",
	    API_MAJOR, d->minor, id, q);
	rq.path = url;
	rq.data = tar.data;
	rq.data_len = tar.len;
	if (sbx_http_do(d->h, &rq, &rs, err) < 0)
		goto out;
	if (rs.status != 200)
		sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot put the sandbox's CA "
		    "into the container", err);
	else
		rc = 0;
	sbx_http_resp_release(&rs);
out:
	sbx_buf_release(&tar);
	sbx_buf_release(&bundle);
	sbx_buf_release(&pem);
	free(url);
	free(q);
	return rc;
}
