/* ca.c - a sandbox's own CA, for the hosts whose HTTPS sbx-netd terminates
 * to inject headers: made once (DIR/ca.key, DIR/ca.crt), put into a local
 * sandbox's trust store before the sandbox starts (a container's: by the
 * docker backend, lib/docker/ca.c), and a leaf for each
 * host signed on demand and kept in memory */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "netd.h"

#define CA_DAYS 3650
#define LEAF_DAYS 30
#define LEAF_RENEW_S (7 * 86400)  /* a leaf is made again after a week */
#define BUNDLE_MAX (16 << 20)
#define LEAVES_MAX 256
#define CERTS "etc/ssl/certs"

static struct {
	pthread_mutex_t mu;
	X509 *crt;
	EVP_PKEY *key;
	struct leaf {
		char *host;
		SSL_CTX *ctx;
		long long made;
	} *leaves;
	size_t nleaves;
} ca = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, NULL, 0};

static int
ossl_err(struct sbx_err *err, const char *what)
{
	char buf[256];

	ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
	return sbx_err_set(err, SBX_EX_FAIL, "%s: %s", what, buf);
}

static int
add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *e;
	int ok;

	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	if (!(e = X509V3_EXT_conf_nid(NULL, &v3, nid, value)))
		return -1;
	ok = X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
	return ok ? 0 : -1;
}

/* A certificate for key, signed by issuer (itself when NULL). */
static X509 *
cert_new(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *ikey,
    long days)
{
	unsigned char serial[16];
	X509 *x = X509_new();
	X509_NAME *n = X509_NAME_new();
	BIGNUM *bn = NULL;

	if (!x || !n || RAND_bytes(serial, sizeof serial) != 1)
		goto fail;
	serial[0] &= 0x7f;
	if (!(bn = BN_bin2bn(serial, sizeof serial, NULL)) ||
	    !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) ||
	    !X509_set_version(x, 2) ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), days * 86400) ||
	    !X509_set_pubkey(x, key) ||
	    !X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8,
	    (const unsigned char *)cn, -1, -1, 0) ||
	    !X509_set_subject_name(x, n) ||
	    !X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) :
	    n))
		goto fail;
	if (add_ext(x, x, NID_subject_key_identifier, "hash") < 0 ||
	    add_ext(x, issuer ? issuer : x, NID_authority_key_identifier,
	    "keyid:always") < 0)
		goto fail;
	if (!issuer && (add_ext(x, x, NID_basic_constraints,
	    "critical,CA:TRUE,pathlen:0") < 0 || add_ext(x, x, NID_key_usage,
	    "critical,keyCertSign,cRLSign") < 0))
		goto fail;
	if (issuer && (add_ext(x, issuer, NID_basic_constraints,
	    "critical,CA:FALSE") < 0 || add_ext(x, issuer, NID_key_usage,
	    "critical,digitalSignature") < 0 || add_ext(x, issuer,
	    NID_ext_key_usage, "serverAuth") < 0))
		goto fail;
	if (!X509_sign(x, ikey ? ikey : key, EVP_sha256()))
		goto fail;
	BN_free(bn);
	X509_NAME_free(n);
	return x;
fail:
	BN_free(bn);
	X509_NAME_free(n);
	X509_free(x);
	return NULL;
}

/* PEM of a certificate or a key, allocated. */
static char *
pem_of(X509 *x, EVP_PKEY *k, size_t *len)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out = NULL;
	long n;

	if (!b)
		return NULL;
	if (x ? PEM_write_bio_X509(b, x) : PEM_write_bio_PrivateKey(b, k,
	    NULL, NULL, 0, NULL, NULL)) {
		n = BIO_get_mem_data(b, &data);
		out = sbx_xmalloc((size_t)n + 1);
		memcpy(out, data, (size_t)n);
		out[n] = '\0';
		*len = (size_t)n;
	}
	BIO_free(b);
	return out;
}

/* --- the trust store in DIR/upper ------------------------------------- */

/* The image's bundle, resolved inside the image as the sandbox sees it;
 * empty when it has none. */
static char *
image_bundle(const char *image, size_t *len)
{
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT};
	char *buf = NULL;
	struct stat st;
	ssize_t n;
	int dfd, fd;

	*len = 0;
	if ((dfd = open(image, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return sbx_xstrdup("");
	fd = (int)syscall(SYS_openat2, dfd, CERTS "/ca-certificates.crt",
	    &how, sizeof how);
	close(dfd);
	if (fd < 0)
		return sbx_xstrdup("");
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size >
	    BUNDLE_MAX) {
		close(fd);
		return sbx_xstrdup("");
	}
	buf = sbx_xmalloc((size_t)st.st_size + 1);
	while (*len < (size_t)st.st_size && (n = read(fd, buf + *len,
	    (size_t)st.st_size - *len)) > 0)
		*len += (size_t)n;
	buf[*len] = '\0';
	close(fd);
	return buf;
}

/* name in dirfd, a directory owned by uid:gid (made, or there already). */
static int
subdir(int dirfd, const char *name, uid_t uid, gid_t gid)
{
	int fd;

	if (mkdirat(dirfd, name, 0755) == 0 && fchownat(dirfd, name, uid,
	    gid, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	if ((fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return -1;
	return fd;
}

static int
put_file(int dirfd, const char *name, const char *a, size_t alen,
    const char *b, size_t blen, uid_t uid, gid_t gid)
{
	int fd, rc = -1;

	unlinkat(dirfd, name, 0);
	if ((fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL |
	    O_NOFOLLOW | O_CLOEXEC, 0644)) < 0)
		return -1;
	if (sbx_write_all(fd, a, alen) == 0 && sbx_write_all(fd, b,
	    blen) == 0 && fchown(fd, uid, gid) == 0 && fchmod(fd, 0644) == 0)
		rc = 0;
	close(fd);
	return rc;
}

/* The CA into the sandbox's trust store, owned as DIR/upper is (by the
 * sandbox's root): ca-certificates.crt (the image's bundle and the CA),
 * sbx-ca.pem and its subject-hash link, for OpenSSL's capath users. An
 * image gets them in DIR/upper/etc/ssl/certs; the host image, whose /etc
 * is the host's bound read-only, in DIR/certs, which the sandbox lays
 * over its /etc/ssl/certs (lib/local/mounts.c); a sandbox without
 * DIR/upper (a qemu VM's) in DIR/certs, which its backend copies in
 * (lib/qemu/ca.c). The sandbox has not
 * started: nothing of its own is in upper yet. staged: it has, it runs;
 * the files go to DIR/certs whatever the image, and sbx-net copies them
 * in through its namespaces (lib/local/net.c). */
static int
install(const char *dir, const char *image, int staged, struct sbx_err *err)
{
	int host = staged || !strcmp(image, "/");
	char *up = sbx_xasprintf("%s/upper", dir), *bundle = NULL, *pem;
	char link[32];
	size_t blen, plen = 0;
	struct stat st;
	int fds[5] = {-1, -1, -1, -1, -1}, i, rc = -1, d;

	pem = pem_of(ca.crt, NULL, &plen);
	if ((fds[1] = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", dir);
		goto out;
	}
	/* No overlay (a qemu VM's disk is its own): DIR/certs, which the
	 * backend copies into the VM once sbx-netd is ready. */
	if ((fds[0] = open(up, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0 && errno == ENOENT) {
		host = 1;
		fds[0] = dup(fds[1]);
	}
	if (fds[0] < 0 || fstat(fds[0], &st) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", up);
		goto out;
	}
	if (host)
		d = fds[4] = subdir(fds[1], "certs", st.st_uid, st.st_gid);
	else if ((fds[2] = subdir(fds[0], "etc", st.st_uid, st.st_gid)) < 0 ||
	    (fds[3] = subdir(fds[2], "ssl", st.st_uid, st.st_gid)) < 0)
		d = -1;
	else
		d = fds[4] = subdir(fds[3], "certs", st.st_uid, st.st_gid);
	if (d < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create a directory for "
		    "the CA in '%s':", dir);
		goto out;
	}
	bundle = image_bundle(image, &blen);
	if (blen && bundle[blen - 1] != '\n')
		bundle[blen++] = '\n';   /* room: the NUL's */
	snprintf(link, sizeof link, "%08lx.0",
	    X509_NAME_hash_ex(X509_get_subject_name(ca.crt), NULL, NULL,
	    NULL));
	unlinkat(d, link, 0);
	if (!pem || put_file(d, "ca-certificates.crt", bundle, blen, pem,
	    plen, st.st_uid, st.st_gid) < 0 || put_file(d, "sbx-ca.pem",
	    pem, plen, "", 0, st.st_uid, st.st_gid) < 0 ||
	    symlinkat("sbx-ca.pem", d, link) < 0 ||
	    fchownat(d, link, st.st_uid, st.st_gid,
	    AT_SYMLINK_NOFOLLOW) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot write the CA into '%s':",
		    dir);
		goto out;
	}
	rc = 0;
out:
	for (i = 0; i < 5; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(bundle);
	free(pem);
	free(up);
	return rc;
}

/* --- the CA ----------------------------------------------------------- */

static int
ca_load(const char *kp, const char *cp)
{
	FILE *f;

	if ((f = fopen(kp, "re"))) {
		ca.key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
		fclose(f);
	}
	if ((f = fopen(cp, "re"))) {
		ca.crt = PEM_read_X509(f, NULL, NULL, NULL);
		fclose(f);
	}
	return ca.key && ca.crt && X509_check_private_key(ca.crt, ca.key) ?
	    0 : -1;
}

static int
ca_init(const char *dir, int staged, struct sbx_err *err)
{
	char *kp = sbx_xasprintf("%s/ca.key", dir);
	char *cp = sbx_xasprintf("%s/ca.crt", dir), *np = NULL, *cn, *s;
	const char *image;
	json_t *net = NULL;
	size_t n;
	int rc = -1;

	if (access(kp, F_OK) == 0) {
		/* A stopped sandbox started again: its CA, trusted already. */
		if (ca_load(kp, cp) < 0)
			sbx_err_set(err, SBX_EX_FAIL, "cannot read the CA in "
			    "'%s'", dir);
		else
			rc = 0;
		goto out;
	}
	np = sbx_xasprintf("%s/net.json", dir);
	if (!(net = sbx_json_load_object(np, err)))
		goto out;
	/* No "image" (docker): no DIR/upper either; the backend puts the
	 * CA into the container once sbx-netd is ready. */
	if ((image = sbx_json_str(net, "image")) && *image != '/') {
		sbx_err_set(err, SBX_EX_DATA, "'%s': \"image\" is not a path",
		    np);
		goto out;
	}
	/* A CN holds 64 characters: a container's id (64 hex digits) is
	 * cut to its short form, as `docker ps` shows it; a local id has
	 * 12 already. */
	cn = sbx_xasprintf("sbx sandbox %.12s CA", sbx_json_str(net, "id") ?
	    sbx_json_str(net, "id") : "?");
	ca.key = EVP_EC_gen("P-256");
	ca.crt = ca.key ? cert_new(ca.key, cn, NULL, NULL, CA_DAYS) : NULL;
	free(cn);
	if (!ca.crt) {
		ossl_err(err, "cannot make the CA");
		goto out;
	}
	/* The trust store first: a CA on disk means it is installed. */
	if (image && install(dir, image, staged, err) < 0)
		goto out;
	if (!(s = pem_of(NULL, ca.key, &n)) ||
	    sbx_file_write_atomic(kp, s, n, 0600, 0, err) < 0) {
		if (s)
			explicit_bzero(s, n);
		free(s);
		goto out;
	}
	explicit_bzero(s, n);
	free(s);
	s = pem_of(ca.crt, NULL, &n);
	rc = s ? sbx_file_write_atomic(cp, s, n, 0644, 0, err) : -1;
	free(s);
out:
	json_decref(net);
	free(np);
	free(kp);
	free(cp);
	return rc;
}

int
netd_ca_init(const char *dir, struct sbx_err *err)
{
	return ca_init(dir, 0, err);
}

/* A sandbox that runs already (injection added live): its trust store's
 * files in DIR/certs whatever the image, for sbx-net to copy in. */
int
sbx_netd_ca(const char *dir, struct sbx_err *err)
{
	return ca_init(dir, 1, err);
}

static int
alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char h1[] = "\x08http/1.1";

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto((unsigned char **)out, outlen, h1,
	    sizeof h1 - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *
leaf_ctx(const char *host)
{
	GENERAL_NAMES *gens = NULL;
	GENERAL_NAME *g;
	ASN1_IA5STRING *ia5;
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = NULL;
	SSL_CTX *ctx = NULL;

	if (!k || !(x = cert_new(k, host, ca.crt, ca.key, LEAF_DAYS)))
		goto out;
	/* Built, not parsed from "DNS:host": a host is the sandbox's text. */
	gens = sk_GENERAL_NAME_new_null();
	g = GENERAL_NAME_new();
	ia5 = ASN1_IA5STRING_new();
	if (!gens || !g || !ia5 || !ASN1_STRING_set(ia5, host, -1)) {
		GENERAL_NAME_free(g);
		ASN1_IA5STRING_free(ia5);
		goto out;
	}
	GENERAL_NAME_set0_value(g, GEN_DNS, ia5);
	sk_GENERAL_NAME_push(gens, g);
	if (!X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, 0) ||
	    !X509_sign(x, ca.key, EVP_sha256()))
		goto out;
	if (!(ctx = SSL_CTX_new(TLS_server_method())))
		goto out;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF |
	    SSL_OP_NO_TICKET);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	if (!SSL_CTX_use_certificate(ctx, x) ||
	    !SSL_CTX_use_PrivateKey(ctx, k)) {
		SSL_CTX_free(ctx);
		ctx = NULL;
	}
out:
	GENERAL_NAMES_free(gens);
	X509_free(x);
	EVP_PKEY_free(k);
	return ctx;
}

SSL_CTX *
netd_ca_server(const char *host)
{
	long long now = sbx_mono_ms() / 1000;
	SSL_CTX *ctx = NULL;
	size_t i, n;

	pthread_mutex_lock(&ca.mu);
	if (!ca.crt)
		goto out;
	for (i = 0; i < ca.nleaves; i++)
		if (!strcmp(ca.leaves[i].host, host))
			break;
	if (i < ca.nleaves && now - ca.leaves[i].made < LEAF_RENEW_S) {
		ctx = ca.leaves[i].ctx;
		goto out;
	}
	if (!(ctx = leaf_ctx(host)))
		goto out;
	if (i == ca.nleaves && ca.nleaves == LEAVES_MAX) {
		/* Many names under a *.domain: the oldest leaf goes. */
		for (i = 0, n = 1; n < ca.nleaves; n++)
			if (ca.leaves[n].made < ca.leaves[i].made)
				i = n;
		free(ca.leaves[i].host);
		ca.leaves[i].host = sbx_xstrdup(host);
	} else if (i == ca.nleaves) {
		ca.leaves = sbx_xrealloc(ca.leaves, (ca.nleaves + 1) *
		    sizeof *ca.leaves);
		ca.leaves[ca.nleaves].ctx = NULL;
		ca.leaves[ca.nleaves++].host = sbx_xstrdup(host);
	}
	/* An old one may still be in use: the refs of its users keep it. */
	if (ca.leaves[i].ctx)
		SSL_CTX_free(ca.leaves[i].ctx);
	ca.leaves[i].ctx = ctx;
	ca.leaves[i].made = now;
out:
	if (ctx)
		SSL_CTX_up_ref(ctx);
	pthread_mutex_unlock(&ca.mu);
	return ctx;
}
