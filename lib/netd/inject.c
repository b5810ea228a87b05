/* inject.c - connections to a host with header injection: its TLS
 * terminated with a leaf of the sandbox's CA and made again to the host
 * (verified), each HTTP/1.x request's head given the headers, bodies and
 * responses passed on as they are */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "netd.h"
#include "../secret.h"

#define HANDSHAKE_MS 10000
#define HEAD_MAX 65536       /* a request's head */
#define LINE_MAX_ 4096       /* a chunk's size line, a trailer */
#define BUF_HIGH (256 << 10) /* read no more while this waits */
#define TMPL "${e2b.secrets."

static SSL_CTX *client;

/* The upstream side: the host's trust store and network.ca_file. */
int
netd_inject_init(struct sbx_err *err)
{
	static const unsigned char h1[] = "\x08http/1.1";
	const char *extra = sbx_config_get("network.ca_file", "");
	char buf[256];

	if (!(client = SSL_CTX_new(TLS_client_method())))
		return sbx_err_set(err, SBX_EX_FAIL, "cannot make a TLS "
		    "context");
	SSL_CTX_set_min_proto_version(client, TLS1_2_VERSION);
	SSL_CTX_set_options(client, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_verify(client, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_alpn_protos(client, h1, sizeof h1 - 1);
	if (!SSL_CTX_set_default_verify_paths(client) || (*extra &&
	    !SSL_CTX_load_verify_locations(client, extra, NULL))) {
		ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot load the CAs%s%s: "
		    "%s", *extra ? " of network.ca_file " : "", extra, buf);
	}
	return 0;
}

static int
host_match(const char *pat, const char *host)
{
	size_t lp, lh = strlen(host);

	if (pat[0] == '*' && pat[1] == '.') {
		lp = strlen(pat + 1);    /* ".domain" */
		return lh > lp && !strcasecmp(host + lh - lp, pat + 1);
	}
	return !strcasecmp(pat, host);
}

int
netd_inject_wanted(const struct netd_conf *cf, const char *host)
{
	size_t i;

	for (i = 0; i < cf->ninject; i++)
		if (host_match(cf->inject[i].host, host))
			return client != NULL;
	return 0;
}

/* --- one side of a connection: plain or TLS, non-blocking ------------- */

struct side {
	int fd;
	SSL *ssl;
	short want;             /* what the last try waits for */
};

/* >0 bytes, 0 the end, -1 broken, -2 again once s->want. */
static ssize_t
ssl_result(struct side *s, int r, int reading)
{
	switch (SSL_get_error(s->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		s->want = POLLIN;
		return -2;
	case SSL_ERROR_WANT_WRITE:
		s->want = POLLOUT;
		return -2;
	case SSL_ERROR_ZERO_RETURN:
		return reading ? 0 : -1;
	default:
		return -1;
	}
}

static ssize_t
side_read(struct side *s, char *buf, size_t n)
{
	ssize_t r;
	int k;

	if (!s->ssl) {
		if ((r = recv(s->fd, buf, n, MSG_DONTWAIT)) >= 0)
			return r;
		s->want = POLLIN;
		return errno == EAGAIN || errno == EINTR ? -2 : -1;
	}
	ERR_clear_error();
	if ((k = SSL_read(s->ssl, buf, (int)n)) > 0)
		return k;
	return ssl_result(s, k, 1);
}

static ssize_t
side_write(struct side *s, const char *buf, size_t n)
{
	ssize_t r;
	int k;

	if (!s->ssl) {
		if ((r = send(s->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL)) >= 0)
			return r;
		s->want = POLLOUT;
		return errno == EAGAIN || errno == EINTR ? -2 : -1;
	}
	ERR_clear_error();
	if ((k = SSL_write(s->ssl, buf, (int)(n > 65536 ? 65536 : n))) > 0)
		return k;
	return ssl_result(s, k, 0);
}

/* No more from us: close_notify for TLS, then FIN. */
static void
side_shut(struct side *s)
{
	if (s->ssl)
		SSL_shutdown(s->ssl);
	shutdown(s->fd, SHUT_WR);
}

static int
handshake(struct side *s, int server)
{
	long long end = sbx_mono_ms() + HANDSHAKE_MS, left;
	struct pollfd p;
	int r;

	for (;;) {
		ERR_clear_error();
		r = server ? SSL_accept(s->ssl) : SSL_connect(s->ssl);
		if (r == 1)
			return 0;
		if (ssl_result(s, r, 0) != -2)
			return -1;
		if ((left = end - sbx_mono_ms()) <= 0)
			return -1;
		p = (struct pollfd){s->fd, s->want, 0};
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			return -1;
	}
}

static void
ssl_why(char *buf, size_t n, const char *what)
{
	unsigned long e = ERR_peek_last_error();
	char s[200];

	if (e) {
		ERR_error_string_n(e, s, sizeof s);
		snprintf(buf, n, "%s: %s", what, s);
	} else {
		snprintf(buf, n, "%s: failed or timed out", what);
	}
}

/* --- the requests ------------------------------------------------------ */

enum { P_HEAD, P_BODY, P_CHUNK_SIZE, P_CHUNK_DATA, P_CHUNK_END, P_TRAILER,
    P_RAW };

struct inj {
	struct conn *c;
	struct netd_conf *cf;
	struct side sb, up;     /* the sandbox's end, the host's */
	struct sbx_buf in;      /* from the sandbox, not parsed yet */
	struct sbx_buf toup;    /* parsed, for the host */
	struct sbx_buf down;    /* from the host, for the sandbox */
	int state;
	uint64_t left;          /* of a body or a chunk */
	int status;             /* an answer of ours instead: 400, 502 */
	char error[256];
};

static void
drop(struct sbx_buf *b, size_t n)
{
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

static void
wipe(struct sbx_buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->cap);
	sbx_buf_release(b);
}

static int
refuse(struct inj *j, int status, const char *why)
{
	j->status = status;
	snprintf(j->error, sizeof j->error, "%.200s", why);
	return -1;
}

/* A header value: the value, or the template with each secret put in. */
static char *
resolve(struct inj *j, const struct netd_inject *in)
{
	struct sbx_buf b = SBX_BUF_INIT;
	const char *t = in->template, *p, *e;
	char name[65];
	size_t n;

	if (in->value)
		return sbx_xstrdup(in->value);
	while ((p = strstr(t, TMPL))) {
		sbx_buf_add(&b, t, (size_t)(p - t));
		p += strlen(TMPL);
		if (!(e = strchr(p, '}')) || (n = (size_t)(e - p)) == 0 ||
		    n >= sizeof name) {
			refuse(j, 502, "invalid secret template");
			goto fail;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		{
			struct sbx_err err = {0};
			size_t vlen;
			char *v = sbx_secret_get(name, &vlen, &err);

			if (!v) {
				/* "no secret 'NAME'", or why it was refused */
				refuse(j, 502, err.msg);
				goto fail;
			}
			sbx_buf_add(&b, v, vlen);
			explicit_bzero(v, vlen);
			free(v);
		}
		t = e + 1;
	}
	sbx_buf_add(&b, t, strlen(t) + 1);
	if (!sbx_net_header_value_ok(b.data, b.len - 1)) {
		refuse(j, 502, "a secret is not a valid header value");
		goto fail;
	}
	return b.data;
fail:
	wipe(&b);
	return NULL;
}

/* [s, s + n) without spaces and tabs either side. */
static void
trim(const char **s, size_t *n)
{
	while (*n && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*n)--;
	}
	while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' ||
	    (*s)[*n - 1] == '\r'))
		(*n)--;
}

static int
is_name(const char *s, size_t n, const char *name)
{
	return strlen(name) == n && !strncasecmp(s, name, n);
}

/* The head d[0, n) (its blank line included) to j->toup, with the
 * injected headers in place of the sandbox's of the same names; the body
 * that follows from its framing. */
static int
rewrite(struct inj *j, const char *d, size_t n)
{
	const char *host = j->c->host, *l = d, *eol, *colon, *v;
	char *values[64] = {0};
	size_t i, k, vn, nv = 0;
	int dropped = 0, chunked = 0, te = 0, raw = 0, rc = -1;
	long long cl = -1, x;

	eol = memchr(l, '\n', n);
	if (!eol || eol - l < 14 || memcmp(eol - (eol[-1] == '\r' ? 9 : 8),
	    "HTTP/1.", 7))
		return refuse(j, 400, "not an HTTP/1 request");
	raw = !strncmp(l, "CONNECT ", 8);
	for (i = 0; i < j->cf->ninject && nv < 64; i++)
		if (host_match(j->cf->inject[i].host, host)) {
			if (!(values[nv++] = resolve(j, &j->cf->inject[i])))
				goto out;
		} else {
			values[nv++] = NULL;
		}
	sbx_buf_add(&j->toup, l, (size_t)(eol - l + 1));
	for (l = eol + 1; l < d + n; l = eol + 1) {
		eol = memchr(l, '\n', (size_t)(d + n - l));
		if (*l == '\r' || *l == '\n')
			break;          /* the blank line */
		if (*l == ' ' || *l == '\t') {
			/* obs-fold: goes with the line it continues */
			if (!dropped)
				sbx_buf_add(&j->toup, l, (size_t)(eol - l + 1));
			continue;
		}
		if (!(colon = memchr(l, ':', (size_t)(eol - l)))) {
			refuse(j, 400, "malformed header");
			goto out;
		}
		k = (size_t)(colon - l);
		for (i = 0, dropped = 0; i < nv && !dropped; i++)
			dropped = values[i] && is_name(l, k,
			    j->cf->inject[i].name);
		if (dropped)
			continue;
		v = colon + 1;
		vn = (size_t)(eol - v);
		trim(&v, &vn);
		if (is_name(l, k, "content-length")) {
			for (i = 0, x = 0; i < vn && v[i] >= '0' && v[i] <= '9' &&
			    x < (1LL << 50); i++)
				x = x * 10 + (v[i] - '0');
			if (!vn || i < vn || (cl >= 0 && cl != x)) {
				refuse(j, 400, "invalid Content-Length");
				goto out;
			}
			cl = x;
		} else if (is_name(l, k, "transfer-encoding")) {
			te = 1;
			/* Its last coding is what frames the body. */
			for (i = vn; i > 0 && v[i - 1] != ','; i--)
				;
			v += i;
			vn -= i;
			trim(&v, &vn);
			chunked = vn == 7 && !strncasecmp(v, "chunked", 7);
		} else if (is_name(l, k, "upgrade")) {
			raw = 1;
		}
		sbx_buf_add(&j->toup, l, (size_t)(eol - l + 1));
	}
	for (i = 0; i < nv; i++) {
		if (!values[i])
			continue;
		sbx_buf_add(&j->toup, j->cf->inject[i].name,
		    strlen(j->cf->inject[i].name));
		sbx_buf_add(&j->toup, ": ", 2);
		sbx_buf_add(&j->toup, values[i], strlen(values[i]));
		sbx_buf_add(&j->toup, "\r\n", 2);
	}
	sbx_buf_add(&j->toup, "\r\n", 2);
	if (te && (!chunked || cl >= 0)) {
		/* Either is how requests are smuggled past a proxy. */
		refuse(j, 400, "ambiguous request body");
		goto out;
	}
	j->state = raw ? P_RAW : te ? P_CHUNK_SIZE : cl > 0 ? P_BODY :
	    P_HEAD;
	j->left = cl > 0 ? (uint64_t)cl : 0;
	rc = 0;
out:
	for (i = 0; i < nv; i++)
		if (values[i]) {
			explicit_bzero(values[i], strlen(values[i]));
			free(values[i]);
		}
	return rc;
}

/* Where the head in d[0, n) ends (after its blank line), 0: not yet. */
static size_t
head_end(const char *d, size_t n)
{
	const char *a, *b;

	if (n == 0)
		return 0;       /* nothing yet, d may be NULL */
	a = memmem(d, n, "\r\n\r\n", 4);
	b = memmem(d, n, "\n\n", 2);
	if (b && (!a || b < a))
		return (size_t)(b - d) + 2;
	return a ? (size_t)(a - d) + 4 : 0;
}

/* Move what j->in holds to j->toup as far as it is complete. */
static int
parse(struct inj *j)
{
	const char *d, *eol;
	size_t n, k;
	uint64_t size;

	for (;;) {
		d = j->in.data;
		n = j->in.len;
		if (n == 0)
			return 0;
		switch (j->state) {
		case P_HEAD:
			/* A CRLF between requests is allowed. */
			if (*d == '\r' || *d == '\n') {
				sbx_buf_add(&j->toup, d, 1);
				drop(&j->in, 1);
				continue;
			}
			if (!(k = head_end(d, n)))
				return n > HEAD_MAX ? refuse(j, 431, "request "
				    "head too large") : 0;
			if (rewrite(j, d, k) < 0)
				return -1;
			drop(&j->in, k);
			continue;
		case P_BODY:
		case P_CHUNK_DATA:
		case P_RAW:
			k = j->state == P_RAW || n < j->left ? n : (size_t)j->left;
			sbx_buf_add(&j->toup, d, k);
			drop(&j->in, k);
			if (j->state != P_RAW && (j->left -= k) == 0)
				j->state = j->state == P_BODY ? P_HEAD :
				    P_CHUNK_END;
			continue;
		default:
			break;
		}
		/* A line: a chunk's size, the end of its data, a trailer. */
		if (!(eol = memchr(d, '\n', n)))
			return n > LINE_MAX_ ? refuse(j, 400, "chunk line too "
			    "long") : 0;
		k = (size_t)(eol - d) + 1;
		if (j->state == P_CHUNK_SIZE) {
			for (size = 0, n = 0; n < k && n < 15 && strchr(
			    "0123456789abcdefABCDEF", d[n]) && d[n]; n++)
				size = size * 16 + (uint64_t)(d[n] <= '9' ?
				    d[n] - '0' : (d[n] | 0x20) - 'a' + 10);
			if (n == 0 || (d[n] != '\r' && d[n] != '\n' &&
			    d[n] != ';' && d[n] != ' ' && d[n] != '\t'))
				return refuse(j, 400, "invalid chunk size");
			j->state = size ? P_CHUNK_DATA : P_TRAILER;
			j->left = size;
		} else if (j->state == P_CHUNK_END) {
			if (k > 2 || (k == 2 && *d != '\r'))
				return refuse(j, 400, "invalid chunk end");
			j->state = P_CHUNK_SIZE;
		} else if (k == 1 || (k == 2 && *d == '\r')) {
			j->state = P_HEAD;   /* the trailers' end */
		}
		sbx_buf_add(&j->toup, d, k);
		drop(&j->in, k);
	}
}

/* Our own answer, once the sandbox has sent what it had. */
static void
answer(struct inj *j)
{
	static const char *const reason[] = {"400 Bad Request",
	    "431 Request Header Fields Too Large", "502 Bad Gateway"};
	char head[512];
	const char *r = j->status == 400 ? reason[0] : j->status == 431 ?
	    reason[1] : reason[2];
	int n, blen = (int)strlen(j->error) + 11;

	n = snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Type: "
	    "text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
	    "sbx-netd: %s\n", r, blen, j->error);
	if (n > 0 && (size_t)n < sizeof head)
		sbx_buf_add(&j->down, head, (size_t)n);
}

/* Relay until the host's end has reached the sandbox, or one side
 * breaks (-1). */
static int
pump(struct inj *j)
{
	char tmp[16384];
	struct pollfd p[2];
	int progress, up_eof = 0, sb_eof = 0, up_shut = 0;
	ssize_t n;

	for (;;) {
		progress = 0;
		p[0] = (struct pollfd){j->sb.fd, 0, 0};
		p[1] = (struct pollfd){j->up.fd, 0, 0};
		if (!sb_eof && !j->status && j->toup.len < BUF_HIGH) {
			n = side_read(&j->sb, tmp, sizeof tmp);
			if (n > 0) {
				sbx_buf_add(&j->in, tmp, (size_t)n);
				__atomic_fetch_add(&j->c->out, (uint64_t)n,
				    __ATOMIC_RELAXED);
				if (parse(j) < 0) {
					/* After what the host has sent. */
					answer(j);
					up_eof = 1;
				}
				progress = 1;
			} else if (n == 0) {
				sb_eof = progress = 1;
			} else if (n == -1) {
				return -1;
			} else {
				p[0].events |= j->sb.want;
			}
		}
		if (j->toup.len && !j->status) {
			n = side_write(&j->up, j->toup.data, j->toup.len);
			if (n > 0) {
				drop(&j->toup, (size_t)n);
				progress = 1;
			} else if (n == -1) {
				return -1;
			} else {
				p[1].events |= j->up.want;
			}
		}
		if (sb_eof && !j->toup.len && !up_shut) {
			side_shut(&j->up);
			up_shut = progress = 1;
		}
		if (!up_eof && j->down.len < BUF_HIGH) {
			n = side_read(&j->up, tmp, sizeof tmp);
			if (n > 0) {
				sbx_buf_add(&j->down, tmp, (size_t)n);
				progress = 1;
			} else if (n == 0) {
				up_eof = progress = 1;
			} else if (n == -1) {
				return -1;
			} else {
				p[1].events |= j->up.want;
			}
		}
		if (j->down.len) {
			n = side_write(&j->sb, j->down.data, j->down.len);
			if (n > 0) {
				drop(&j->down, (size_t)n);
				__atomic_fetch_add(&j->c->in, (uint64_t)n,
				    __ATOMIC_RELAXED);
				progress = 1;
			} else if (n == -1) {
				return -1;
			} else {
				p[0].events |= j->sb.want;
			}
		}
		if (up_eof && !j->down.len)
			return 0;
		if (progress)
			continue;
		/* A side nothing waits on is not watched: its hangup would
		 * wake us for nothing, again and again. */
		if (!p[0].events)
			p[0].fd = -1;
		if (!p[1].events)
			p[1].fd = -1;
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return -1;
	}
}

/* The host could not be reached as it should: the sandbox's request (its
 * head, within a few seconds) gets a 502 of ours. */
static void
bad_gateway(struct inj *j, const char *why)
{
	long long end = sbx_mono_ms() + 5000, left;
	struct pollfd p;
	char tmp[4096];
	ssize_t n;

	refuse(j, 502, why);
	while (!head_end(j->in.data, j->in.len) && j->in.len < HEAD_MAX &&
	    (left = end - sbx_mono_ms()) > 0) {
		n = side_read(&j->sb, tmp, sizeof tmp);
		if (n > 0)
			sbx_buf_add(&j->in, tmp, (size_t)n);
		else if (n != -2)
			break;
		p = (struct pollfd){j->sb.fd, j->sb.want, 0};
		if (n == -2)
			poll(&p, 1, (int)left);
	}
	answer(j);
	while (j->down.len && (left = end + 5000 - sbx_mono_ms()) > 0) {
		n = side_write(&j->sb, j->down.data, j->down.len);
		if (n > 0) {
			drop(&j->down, (size_t)n);
		} else if (n == -2) {
			p = (struct pollfd){j->sb.fd, j->sb.want, 0};
			poll(&p, 1, (int)left);
		} else {
			break;
		}
	}
	side_shut(&j->sb);
}

void
netd_inject_serve(struct conn *c, struct netd_conf *cf)
{
	struct netd_logrec *r = &c->r;
	struct inj j = {.c = c, .cf = cf, .sb = {c->fd, NULL, 0},
	    .up = {-1, NULL, 0}};
	SSL_CTX *leaf = NULL;
	unsigned char first = 0;
	const char *e = NULL;
	int tls, ok = 0;

	r->inject = 1;
	tls = recv(c->fd, &first, 1, MSG_PEEK | MSG_DONTWAIT) == 1 &&
	    first == 0x16;
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	/* The host's name is the sandbox's word (its Host header, its SNI),
	 * the address any it chose: the value goes to one of the host's own
	 * addresses, or nowhere. Over HTTPS the certificate proves it as
	 * well; over HTTP nothing else does. */
	switch (netd_resolve_has(cf, c->host, (struct sockaddr *)&c->dest,
	    j.error, sizeof j.error)) {
	case 1:
		break;
	case 0:
		snprintf(j.error, sizeof j.error, "destination is not %.200s's",
		    c->host);
		r->allow = 0;
		/* fall through */
	default:
		e = j.error;
		break;
	}
	if (!e && (e = netd_connect_up(c, cf))) {
		r->error = e;
		netd_reset(c->fd);
		goto log;
	}
	j.up.fd = c->up;
	if (tls) {
		/* The host first: a failure there is the sandbox's 502. */
		if (!e && (!(j.up.ssl = SSL_new(client)) ||
		    !SSL_set_fd(j.up.ssl, c->up) ||
		    !SSL_set_tlsext_host_name(j.up.ssl, c->host) ||
		    !SSL_set1_host(j.up.ssl, c->host))) {
			r->error = "cannot set TLS up";
			netd_reset(c->fd);
			goto log;
		}
		if (j.up.ssl)
			SSL_set_mode(j.up.ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
			    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
		if (j.up.ssl && handshake(&j.up, 0) < 0) {
			long v = SSL_get_verify_result(j.up.ssl);

			if (v != X509_V_OK) {
				snprintf(j.error, sizeof j.error, "upstream "
				    "certificate: %s",
				    X509_verify_cert_error_string(v));
				r->allow = 0;
			} else {
				ssl_why(j.error, sizeof j.error, "upstream TLS");
			}
			e = j.error;
		}
		if (!(leaf = netd_ca_server(c->host)) ||
		    !(j.sb.ssl = SSL_new(leaf)) ||
		    !SSL_set_fd(j.sb.ssl, c->fd)) {
			r->error = "cannot make a certificate";
			netd_reset(c->fd);
			goto log;
		}
		SSL_set_mode(j.sb.ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
		    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
		if (handshake(&j.sb, 1) < 0) {
			char why[256];

			/* e.g. a client that does not trust the CA */
			ssl_why(why, sizeof why, "sandbox TLS");
			if (!e)         /* else j.error says it already */
				snprintf(j.error, sizeof j.error, "%s", why);
			r->error = j.error;
			netd_reset(c->fd);
			goto log;
		}
	}
	if (e) {
		char why[256];

		snprintf(why, sizeof why, "%s", e);
		bad_gateway(&j, why);
		r->error = j.error;
		close(c->fd);
		goto log;
	}
	ok = pump(&j) == 0;
	if (j.status)
		r->error = j.error;
	if (ok && j.sb.ssl)
		SSL_shutdown(j.sb.ssl);
	if (ok)
		close(c->fd);
	else
		netd_reset(c->fd);
log:
	/* The caller logs it: j's words must outlive j. */
	if (r->error == j.error) {
		snprintf(c->why, sizeof c->why, "%s", j.error);
		r->error = c->why;
	}
	if (j.sb.ssl)
		SSL_free(j.sb.ssl);
	if (j.up.ssl)
		SSL_free(j.up.ssl);
	if (leaf)
		SSL_CTX_free(leaf);
	if (c->up >= 0) {
		if (ok)
			close(c->up);
		else
			netd_reset(c->up);
	}
	wipe(&j.in);
	wipe(&j.toup);
	wipe(&j.down);
}
