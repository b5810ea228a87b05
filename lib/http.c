/* http.c - the libcurl wrapper: JSON requests, streamed bodies, unix
 * sockets, timeouts, retries of idempotent requests; never logs headers */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include <curl/curl.h>

#include "internal.h"

#define BODY_MAX (64u << 20)     /* a response body we keep in memory */
#define HEAD_MAX (64u << 10)     /* a hijacked reply's head */
#define CONNECT_MS 10000L
#define DEFAULT_MS 120000L
#define RETRIES 3
#define STREAM_BUF (512L << 10) /* curl's buffer for a streamed body */
/* The longest a 429 may make a request wait before it goes again. */
#define RETRY_AFTER_MAX 30

struct sbx_http {
	char *endpoint;   /* as given: what messages name */
	char *base;       /* "http://localhost", "http://host:port", ... */
	char *host;       /* for the Host header of a hijack */
	char *unix_path;  /* or NULL */
	int plain;        /* no TLS: a hijack may use the socket itself */
	CURL *c;          /* requests; it keeps its connection */
	CURL *hj;         /* a connection taken over */
};

struct xfer {
	CURL *c;
	struct sbx_http_resp *rs;
	const struct sbx_http_req *rq;
	int in_fd, out_fd;
	int rerr, werr;   /* errno of a failed read or write */
	int stopped;      /* on_body ended the transfer */
};

struct sbx_http *
sbx_http_new(const char *endpoint, struct sbx_err *err)
{
	static int inited;
	struct sbx_http *h;
	const char *rest;
	size_t n;

	if (!inited) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot initialise "
			    "libcurl");
			return NULL;
		}
		inited = 1;
	}
	h = sbx_xcalloc(1, sizeof *h);
	h->endpoint = sbx_xstrdup(endpoint);
	h->plain = 1;
	if (!strncmp(endpoint, "unix://", 7) && endpoint[7] == '/') {
		h->unix_path = sbx_xstrdup(endpoint + 7);
		h->base = sbx_xstrdup("http://localhost");
		h->host = sbx_xstrdup("localhost");
	} else if (!strncmp(endpoint, "tcp://", 6) && endpoint[6]) {
		rest = endpoint + 6;
		n = strcspn(rest, "/");
		h->host = sbx_xasprintf("%.*s", (int)n, rest);
		h->base = sbx_xasprintf("http://%s", h->host);
	} else if ((!strncmp(endpoint, "http://", 7) && endpoint[7]) ||
	    (!strncmp(endpoint, "https://", 8) && endpoint[8])) {
		h->plain = endpoint[4] == ':';
		rest = strstr(endpoint, "//") + 2;
		h->host = sbx_xasprintf("%.*s", (int)strcspn(rest, "/"), rest);
		h->base = sbx_xstrdup(endpoint);
		n = strlen(h->base);
		while (n > 0 && h->base[n - 1] == '/')
			h->base[--n] = '\0';
	} else {
		sbx_err_set(err, SBX_EX_USAGE, "invalid endpoint '%s' (unix:///"
		    "path, tcp://host:port, http:// or https://)", endpoint);
		sbx_http_free(h);
		return NULL;
	}
	if (!(h->c = curl_easy_init())) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot initialise libcurl");
		sbx_http_free(h);
		return NULL;
	}
	return h;
}

void
sbx_http_free(struct sbx_http *h)
{
	if (!h)
		return;
	if (h->c)
		curl_easy_cleanup(h->c);
	if (h->hj)
		curl_easy_cleanup(h->hj);
	free(h->endpoint);
	free(h->base);
	free(h->host);
	free(h->unix_path);
	free(h);
}

const char *
sbx_http_endpoint(const struct sbx_http *h)
{
	return h->endpoint;
}

char *
sbx_http_escape(const char *s)
{
	char *out = sbx_xmalloc(strlen(s) * 3 + 1), *p = out;
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr("-._~", c)) {
			*p++ = (char)c;
		} else {
			*p++ = '%';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		}
	}
	*p = '\0';
	return out;
}

const char *
sbx_http_header(const struct sbx_http_resp *rs, const char *name, char *buf,
    size_t n)
{
	const char *p = rs->head.data, *end, *v;
	size_t len = strlen(name);

	for (; p && *p; p = end + (*end != '\0')) {
		end = p + strcspn(p, "\n");
		if ((size_t)(end - p) > len && !strncasecmp(p, name, len) &&
		    p[len] == ':') {
			v = p + len + 1;
			v += strspn(v, " \t");
			len = (size_t)(end - v);
			while (len && (v[len - 1] == '\r' || v[len - 1] == ' '))
				len--;
			if (len >= n)
				return NULL;
			memcpy(buf, v, len);
			buf[len] = '\0';
			return buf;
		}
	}
	return NULL;
}

void
sbx_http_resp_release(struct sbx_http_resp *rs)
{
	sbx_buf_release(&rs->head);
	sbx_buf_release(&rs->body);
	json_decref(rs->json);
	memset(rs, 0, sizeof *rs);
}

static void
setup(struct sbx_http *h, CURL *c, const char *path, char *errbuf)
{
	char *url = sbx_xasprintf("%s%s", h->base, path);

	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	free(url);
	if (h->unix_path)
		curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, h->unix_path);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_MS);
}

/* Why a transfer failed, naming the endpoint: the system's reason for
 * a refused connection rather than curl's "localhost port 80". */
static int
transport_err(struct sbx_http *h, CURL *c, CURLcode res, const char *errbuf,
    int idempotent, struct sbx_err *err)
{
	long oserr = 0;

	curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &oserr);
	if (res == CURLE_COULDNT_CONNECT && oserr > 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot reach '%s': %s",
		    h->endpoint, strerror((int)oserr));
	if (res == CURLE_OPERATION_TIMEDOUT)
		return sbx_err_set(err, SBX_EX_FAIL, "'%s' did not answer in "
		    "time", h->endpoint);
	/* It was reached: a request that changes things may have been
	 * carried out. */
	if (res == CURLE_RECV_ERROR || res == CURLE_SEND_ERROR ||
	    res == CURLE_GOT_NOTHING || res == CURLE_PARTIAL_FILE)
		return sbx_err_set(err, SBX_EX_FAIL, "the connection to '%s' "
		    "broke%s: %s", h->endpoint, idempotent ? "" : " (the "
		    "request may have been carried out)", errbuf[0] ? errbuf :
		    curl_easy_strerror(res));
	return sbx_err_set(err, SBX_EX_FAIL, "cannot reach '%s': %s",
	    h->endpoint, errbuf[0] ? errbuf : curl_easy_strerror(res));
}

/* rq->stop: another thread ends the transfer, even a stalled one. */
static int
on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut,
    curl_off_t un)
{
	struct xfer *x = arg;

	(void)dt, (void)dn, (void)ut, (void)un;
	if (__atomic_load_n(x->rq->stop, __ATOMIC_RELAXED)) {
		x->stopped = 1;
		return 1;
	}
	return 0;
}

static size_t
on_data(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n;
	long status = 0;

	if (x->rq->on_body) {
		curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &status);
		if (status >= 200 && status < 300) {
			if (x->rq->on_body(p, len, x->rq->on_body_arg)) {
				x->stopped = 1;
				return 0;
			}
			return len;
		}
	}
	if (x->out_fd >= 0) {
		curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &status);
		if (status >= 200 && status < 300) {
			if (sbx_write_all(x->out_fd, p, len) < 0) {
				x->werr = errno;
				return 0;
			}
			return len;
		}
	}
	sbx_buf_add(&x->rs->body, p, len);
	return len;
}

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;

	/* A new response (after a 100 or a redirect) starts afresh. */
	if (n * size > 5 && !strncmp(p, "HTTP/", 5))
		x->rs->head.len = 0;
	sbx_buf_add(&x->rs->head, p, size * n);
	return size * n;
}

static size_t
on_read(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	ssize_t r;

	while ((r = read(x->in_fd, p, size * n)) < 0 && errno == EINTR)
		;
	if (r < 0) {
		x->rerr = errno;
		return CURL_READFUNC_ABORT;
	}
	return (size_t)r;
}

/* once() sets it when the connection broke under a request. */
static __thread int reset;

static int
once(struct sbx_http *h, const struct sbx_http_req *rq,
    struct sbx_http_resp *rs, struct sbx_err *err)
{
	char errbuf[CURL_ERROR_SIZE] = "", *body = NULL;
	struct curl_slist *hdrs = NULL;
	struct xfer x = {h->c, rs, rq, rq->in_fd, rq->out_fd, 0, 0, 0};
	curl_mime *mime = NULL;
	curl_mimepart *part;
	const char *const *hp;
	char *ct = NULL;
	CURLcode res;
	int rc = 0;

	memset(rs, 0, sizeof *rs);
	rs->body.limit = BODY_MAX;
	rs->head.limit = HEAD_MAX;
	setup(h, h->c, rq->path, errbuf);
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (rq->form_field && (rq->in_fd >= 0 || rq->data)) {
		/* libcurl frames the part (chunked when its size is not
		 * known). */
		mime = curl_mime_init(h->c);
		part = curl_mime_addpart(mime);
		curl_mime_name(part, rq->form_field);
		curl_mime_filename(part, "file");
		curl_mime_type(part, rq->in_type ? rq->in_type :
		    "application/octet-stream");
		if (rq->in_fd >= 0)
			curl_mime_data_cb(part, rq->in_size > 0 ?
			    (curl_off_t)rq->in_size : -1, on_read, NULL, NULL,
			    &x);
		else
			curl_mime_data(part, rq->data, rq->data_len);
		curl_easy_setopt(h->c, CURLOPT_MIMEPOST, mime);
	} else if (rq->body) {
		if (!(body = json_dumps(rq->body, JSON_COMPACT))) {
			curl_slist_free_all(hdrs);
			return sbx_err_set(err, SBX_EX_FAIL, "cannot encode a "
			    "request");
		}
		curl_easy_setopt(h->c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h->c, CURLOPT_POSTFIELDSIZE,
		    (long)strlen(body));
		hdrs = curl_slist_append(hdrs,
		    "Content-Type: application/json");
	} else if (rq->data) {
		curl_easy_setopt(h->c, CURLOPT_POSTFIELDS, rq->data);
		curl_easy_setopt(h->c, CURLOPT_POSTFIELDSIZE,
		    (long)rq->data_len);
		ct = sbx_xasprintf("Content-Type: %s", rq->in_type ?
		    rq->in_type : "application/octet-stream");
		hdrs = curl_slist_append(hdrs, ct);
	} else if (rq->in_fd >= 0) {
		curl_easy_setopt(h->c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h->c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h->c, CURLOPT_READDATA, &x);
		if (rq->in_size > 0)
			curl_easy_setopt(h->c, CURLOPT_INFILESIZE_LARGE,
			    (curl_off_t)rq->in_size);
		ct = sbx_xasprintf("Content-Type: %s", rq->in_type ?
		    rq->in_type : "application/octet-stream");
		hdrs = curl_slist_append(hdrs, ct);
	} else if (!strcmp(rq->method, "POST")) {
		curl_easy_setopt(h->c, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h->c, CURLOPT_POSTFIELDSIZE, 0L);
	}
	if (rq->follow) {
		curl_easy_setopt(h->c, CURLOPT_FOLLOWLOCATION, 1L);
		curl_easy_setopt(h->c, CURLOPT_MAXREDIRS, 5L);
		curl_easy_setopt(h->c, CURLOPT_REDIR_PROTOCOLS_STR, h->plain ?
		    "http,https" : "https");
	}
	if (rq->stop) {
		curl_easy_setopt(h->c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h->c, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h->c, CURLOPT_XFERINFODATA, &x);
	}
	if (!strcmp(rq->method, "HEAD"))
		curl_easy_setopt(h->c, CURLOPT_NOBODY, 1L);
	else
		curl_easy_setopt(h->c, CURLOPT_CUSTOMREQUEST, rq->method);
	for (hp = rq->headers; hp && *hp; hp++)
		hdrs = curl_slist_append(hdrs, *hp);
	curl_easy_setopt(h->c, CURLOPT_HTTPHEADER, hdrs);
	/* A streamed body (a blob, a file) read in large pieces: a write and
	 * a recv per 512 KiB, not per 16 KiB (the handle is reused: each
	 * request says its own). */
	curl_easy_setopt(h->c, CURLOPT_BUFFERSIZE, rq->out_fd >= 0 ||
	    rq->on_body ? STREAM_BUF : (long)CURL_MAX_WRITE_SIZE);
	curl_easy_setopt(h->c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h->c, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(h->c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h->c, CURLOPT_HEADERDATA, &x);
	curl_easy_setopt(h->c, CURLOPT_TIMEOUT_MS, rq->timeout_ms ?
	    rq->timeout_ms : (rq->in_fd >= 0 || rq->out_fd >= 0 ||
	    rq->on_body) ? 0L : DEFAULT_MS);
	res = curl_easy_perform(h->c);
	curl_easy_getinfo(h->c, CURLINFO_RESPONSE_CODE, &rs->status);
	reset = res == CURLE_RECV_ERROR || res == CURLE_SEND_ERROR ||
	    res == CURLE_GOT_NOTHING || res == CURLE_PARTIAL_FILE;
	rs->timed_out = res == CURLE_OPERATION_TIMEDOUT;
	if (res != CURLE_OK) {
		if (x.stopped) {
			rc = sbx_err_set(err, SBX_EX_FAIL, "the transfer from "
			    "'%s' was ended", h->endpoint);
		} else if (x.werr) {
			errno = x.werr;
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot write what "
			    "'%s' sent:", h->endpoint);
		} else if (x.rerr) {
			errno = x.rerr;
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot read "
			    "what to send to '%s':", h->endpoint);
		} else {
			rc = transport_err(h, h->c, res, errbuf,
			    rq->idempotent, err);
		}
	} else if (rs->body.len && !rs->body.truncated) {
		rs->json = json_loadb(rs->body.data, rs->body.len, 0, NULL);
	}
	/* Request bodies carry environment values: no copy is left. */
	if (body) {
		explicit_bzero(body, strlen(body));
		free(body);
	}
	curl_easy_setopt(h->c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h->c, CURLOPT_MIMEPOST, NULL);
	curl_mime_free(mime);
	curl_slist_free_all(hdrs);
	free(ct);
	return rc;
}

static int
retryable(long status)
{
	return status == 429 || status == 502 || status == 503 ||
	    status == 504;
}

/* The seconds a 429 asks to wait: the largest of its Retry-After and
 * Retry-After-NAME headers (Daytona names one per throttler), as whole
 * seconds; 0 when none says. */
static unsigned
retry_after(const struct sbx_http_resp *rs)
{
	const char *p = rs->head.data, *end, *v;
	unsigned long best = 0, n;
	char *e;

	for (; p && *p; p = end + (*end != '\0')) {
		end = p + strcspn(p, "\n");
		if (strncasecmp(p, "Retry-After", 11) || (p[11] != ':' &&
		    p[11] != '-'))
			continue;
		if (!(v = memchr(p, ':', (size_t)(end - p))))
			continue;
		v += 1 + strspn(v + 1, " \t");
		n = strtoul(v, &e, 10);
		if (e != v && n > best)
			best = n;
	}
	return best > RETRY_AFTER_MAX ? RETRY_AFTER_MAX : (unsigned)best;
}

int
sbx_http_do(struct sbx_http *h, const struct sbx_http_req *rq,
    struct sbx_http_resp *rs, struct sbx_err *err)
{
	unsigned jitter, wait_s;
	int attempt, rc, limited;

	for (attempt = 0;; attempt++) {
		rc = once(h, rq, rs, err);
		/* A streamed body cannot be sent twice, nor a stream's
		 * output taken twice. A 429 refused the request: any may go
		 * again, after what it asks. */
		limited = rc == 0 && rs->status == 429;
		if ((!rq->idempotent && !limited) || rq->in_fd >= 0 ||
		    rq->on_body || attempt >= RETRIES || (rc < 0 && !reset) ||
		    (rc == 0 && !retryable(rs->status)))
			return rc;
		wait_s = limited ? retry_after(rs) : 0;
		sbx_http_resp_release(rs);
		/* Jitter, so that many clients do not come back at once. */
		if (getrandom(&jitter, sizeof jitter, 0) != sizeof jitter)
			jitter = 0;
		if (wait_s)
			sleep(wait_s);
		usleep((250000u << attempt) + jitter % (125000u << attempt));
	}
}

/* A request's head: its first lines, then headers, then the blank line. */
static void
request_head(struct sbx_buf *req, const char *first,
    const char *const *headers)
{
	const char *const *hp;

	sbx_buf_add(req, first, strlen(first));
	for (hp = headers; hp && *hp; hp++) {
		sbx_buf_add(req, *hp, strlen(*hp));
		sbx_buf_add(req, "\r\n", 2);
	}
	sbx_buf_add(req, "\r\n", 2);
}

/* A blocking fd's read, bounded by DEFAULT_MS. */
static ssize_t
fd_read(void *arg, void *p, size_t n)
{
	int fd = *(int *)arg;
	struct pollfd f = {fd, POLLIN, 0};

	if (poll(&f, 1, (int)DEFAULT_MS) <= 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	return read(fd, p, n);
}

/* Read up to the end of a reply's head with rd; what follows goes to
 * rest. */
static int
read_head(ssize_t (*rd)(void *, void *, size_t), void *arg,
    struct sbx_buf *head, struct sbx_buf *rest)
{
	char buf[4096], *end;
	ssize_t n;

	for (;;) {
		if ((n = rd(arg, buf, sizeof buf)) < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		sbx_buf_add(head, buf, (size_t)n);
		if (head->truncated)
			return -1;
		if ((end = strstr(head->data, "\r\n\r\n"))) {
			end += 4;
			sbx_buf_add(rest, end, head->len - (size_t)(end -
			    head->data));
			head->len = (size_t)(end - head->data);
			head->data[head->len] = '\0';
			return 0;
		}
	}
}

int
sbx_http_hijack(struct sbx_http *h, const struct sbx_http_req *rq, int *fd,
    long *status, struct sbx_buf *rest, struct sbx_err *err)
{
	char errbuf[CURL_ERROR_SIZE] = "", *body = NULL, *cl;
	struct sbx_buf req = SBX_BUF_INIT, head = SBX_BUF_INIT;
	curl_socket_t s = CURL_SOCKET_BAD;
	CURLcode res;
	int rc = -1, fl;
	size_t want;
	char *line;

	*fd = -1;
	*status = 0;
	if (!h->plain || h->hj)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot take over a "
		    "connection to '%s'", h->endpoint);
	if (!(h->hj = curl_easy_init()))
		return sbx_err_set(err, SBX_EX_FAIL, "cannot initialise "
		    "libcurl");
	setup(h, h->hj, rq->path, errbuf);
	curl_easy_setopt(h->hj, CURLOPT_CONNECT_ONLY, 1L);
	if ((res = curl_easy_perform(h->hj)) != CURLE_OK)
		return transport_err(h, h->hj, res, errbuf,
		    rq->idempotent, err);
	if (curl_easy_getinfo(h->hj, CURLINFO_ACTIVESOCKET, &s) != CURLE_OK ||
	    s == CURL_SOCKET_BAD)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot reach '%s'",
		    h->endpoint);
	/* Ours from now on, until sbx_http_free: blocking, as we poll. */
	if ((fl = fcntl(s, F_GETFL)) >= 0)
		fcntl(s, F_SETFL, fl & ~O_NONBLOCK);
	if (rq->body && !(body = json_dumps(rq->body, JSON_COMPACT)))
		return sbx_err_set(err, SBX_EX_FAIL, "cannot encode a request");
	line = sbx_xasprintf("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: "
	    "Upgrade\r\nUpgrade: tcp\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\n", rq->method, rq->path, h->host,
	    body ? strlen(body) : 0);
	request_head(&req, line, rq->headers);
	free(line);
	if (body)
		sbx_buf_add(&req, body, strlen(body));
	if (sbx_write_all(s, req.data, req.len) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot send to '%s':",
		    h->endpoint);
		goto out;
	}
	head.limit = HEAD_MAX;
	if (read_head(fd_read, &s, &head, rest) < 0 || sscanf(head.data,
	    "HTTP/1.%*d %ld", status) != 1) {
		sbx_err_set(err, SBX_EX_FAIL, "no answer from '%s'",
		    h->endpoint);
		goto out;
	}
	/* An error's body is short and has a length: read all of it. */
	if (*status >= 300 && (cl = strcasestr(head.data,
	    "\r\ncontent-length:"))) {
		want = strtoul(cl + 17, NULL, 10);
		rest->limit = HEAD_MAX;
		while (rest->len < want && !rest->truncated) {
			char buf[4096];
			ssize_t n = read(s, buf, sizeof buf);

			if (n <= 0)
				break;
			sbx_buf_add(rest, buf, (size_t)n);
		}
	}
	*fd = s;
	rc = 0;
out:
	if (body) {
		explicit_bzero(body, strlen(body));
		free(body);
	}
	if (req.data)
		explicit_bzero(req.data, req.len);
	sbx_buf_release(&req);
	sbx_buf_release(&head);
	return rc;
}

/* A server that echoes the key back must not put it in our message. */
static void
redact(char *msg, const char *secret)
{
	size_t n = secret ? strlen(secret) : 0;
	char *p;

	while (n >= 4 && (p = strstr(msg, secret)))
		memset(p, '*', n);
}

void
sbx_http_reason(const struct sbx_http_resp *rs, const char *secret, char *buf,
    size_t n)
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
	redact(copy, secret);
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

/* --- a connection taken over, plain or TLS ------------------------------ */

struct sbx_http_conn {
	CURL *c;
	curl_socket_t s;
};

int
sbx_http_conn_fd(const struct sbx_http_conn *c)
{
	return (int)c->s;
}

ssize_t
sbx_http_conn_read(struct sbx_http_conn *c, void *p, size_t n)
{
	size_t got = 0;
	CURLcode res = curl_easy_recv(c->c, p, n, &got);

	if (res == CURLE_OK)
		return (ssize_t)got;
	errno = res == CURLE_AGAIN ? EAGAIN : EIO;
	return -1;
}

int
sbx_http_conn_write(struct sbx_http_conn *c, const void *p, size_t n)
{
	const char *q = p;
	struct pollfd f = {c->s, POLLOUT, 0};
	size_t sent;
	CURLcode res;

	while (n) {
		sent = 0;
		res = curl_easy_send(c->c, q, n, &sent);
		if (res == CURLE_AGAIN) {
			if (poll(&f, 1, (int)DEFAULT_MS) <= 0) {
				errno = ETIMEDOUT;
				return -1;
			}
			continue;
		}
		if (res != CURLE_OK) {
			errno = EPIPE;
			return -1;
		}
		q += sent;
		n -= sent;
	}
	return 0;
}

void
sbx_http_conn_free(struct sbx_http_conn *c)
{
	if (!c)
		return;
	curl_easy_cleanup(c->c);
	free(c);
}

/* c's read, waiting (DEFAULT_MS at most) while there is nothing. */
static ssize_t
conn_read_wait(void *arg, void *p, size_t n)
{
	struct sbx_http_conn *c = arg;
	struct pollfd f = {c->s, POLLIN, 0};
	ssize_t k;

	while ((k = sbx_http_conn_read(c, p, n)) < 0 && errno == EAGAIN)
		if (poll(&f, 1, (int)DEFAULT_MS) <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
	return k;
}

int
sbx_http_upgrade(struct sbx_http *h, const struct sbx_http_req *rq,
    const char *proto, struct sbx_http_conn **out, long *status,
    struct sbx_buf *head, struct sbx_buf *rest, struct sbx_err *err)
{
	char errbuf[CURL_ERROR_SIZE] = "", *line;
	struct sbx_buf req = SBX_BUF_INIT;
	const char *path;
	struct sbx_http_conn *c;
	CURLcode res;
	int rc = -1;

	*out = NULL;
	*status = 0;
	c = sbx_xcalloc(1, sizeof *c);
	c->s = CURL_SOCKET_BAD;
	if (!(c->c = curl_easy_init())) {
		free(c);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot initialise "
		    "libcurl");
	}
	setup(h, c->c, rq->path, errbuf);
	curl_easy_setopt(c->c, CURLOPT_CONNECT_ONLY, 1L);
	if ((res = curl_easy_perform(c->c)) != CURLE_OK) {
		transport_err(h, c->c, res, errbuf, 1, err);
		goto out;
	}
	if (curl_easy_getinfo(c->c, CURLINFO_ACTIVESOCKET, &c->s) !=
	    CURLE_OK || c->s == CURL_SOCKET_BAD) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot reach '%s'",
		    h->endpoint);
		goto out;
	}
	/* The base's own path goes before the request's. */
	path = strstr(h->base, "//");
	path = path ? path + 2 + strcspn(path + 2, "/") : "";
	line = sbx_xasprintf("GET %s%s HTTP/1.1\r\nHost: %s\r\nConnection: "
	    "Upgrade\r\nUpgrade: %s\r\n", path, rq->path, h->host, proto);
	request_head(&req, line, rq->headers);
	free(line);
	if (sbx_http_conn_write(c, req.data, req.len) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot send to '%s':",
		    h->endpoint);
		goto out;
	}
	head->limit = HEAD_MAX;
	if (read_head(conn_read_wait, c, head, rest) < 0 ||
	    sscanf(head->data, "HTTP/1.%*d %ld", status) != 1) {
		sbx_err_set(err, SBX_EX_FAIL, "no answer from '%s'",
		    h->endpoint);
		goto out;
	}
	*out = c;
	c = NULL;
	rc = 0;
out:
	if (req.data)
		explicit_bzero(req.data, req.len);
	sbx_buf_release(&req);
	sbx_http_conn_free(c);
	return rc;
}
