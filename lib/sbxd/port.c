/* port.c - requests for a sandbox's own ports (E2B's <port>-<id>.<domain>
 * host, or E2b-Sandbox-Port), other than envd's: sent on over a
 * connection the backend makes inside the sandbox (the local one through
 * its sbx-netd, so nothing is published on the host for them), as
 * HTTP/1.0 so that the answer ends with the connection and is never
 * chunked; the answer streams back */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sbxd.h"

#define HEAD_MAX 65536
#define HDR_MAX 128
#define UP_MS 60000          /* the longest silence of the sandbox's server */

struct up {
	int fd;
	char *rest;          /* body bytes read with the head */
	size_t nrest, off;
	struct MHD_Connection *c;
	struct sbxd_wait w;
	long long idle_until; /* the sandbox's server has been silent */
};

/* Hop-by-hop and ours: never passed on either way. */
static int
hop(const char *k)
{
	static const char *const h[] = {"Connection", "Keep-Alive",
	    "Transfer-Encoding", "Content-Length", "Upgrade", "TE",
	    "Trailer", "Proxy-Connection", "Proxy-Authorization",
	    "E2b-Sandbox-Id", "E2b-Sandbox-Port",
	    "X-Daytona-Preview-Token", NULL};
	int i;

	for (i = 0; h[i]; i++)
		if (!strcasecmp(k, h[i]))
			return 1;
	return 0;
}

struct hdrs {
	struct sbx_buf *b;
	const char *mask;    /* network.maskRequestHost, or NULL */
	long port;
};

/* The mask with each ${PORT} the port. */
static void
add_mask(struct sbx_buf *b, const char *mask, long port)
{
	char num[24];
	const char *p;

	snprintf(num, sizeof num, "%ld", port);
	for (; (p = strstr(mask, "${PORT}")); mask = p + 7) {
		sbx_buf_add(b, mask, (size_t)(p - mask));
		sbx_buf_add(b, num, strlen(num));
	}
	sbx_buf_add(b, mask, strlen(mask));
}

static enum MHD_Result
add_header(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
	struct hdrs *h = cls;
	struct sbx_buf *b = h->b;

	(void)kind;
	if (hop(k) || strpbrk(k, "\r\n") || (v && strpbrk(v, "\r\n")))
		return MHD_YES;
	if (h->mask && !strcasecmp(k, "Host")) {
		sbx_buf_add(b, "Host: ", 6);
		add_mask(b, h->mask, h->port);
		sbx_buf_add(b, "\r\n", 2);
		return MHD_YES;
	}
	sbx_buf_add(b, k, strlen(k));
	sbx_buf_add(b, ": ", 2);
	if (v)
		sbx_buf_add(b, v, strlen(v));
	sbx_buf_add(b, "\r\n", 2);
	return MHD_YES;
}

static void
pct(struct sbx_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char e[3] = {'%', 0, 0};

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr("-._~/:@!$'()*,;", c)) {
			sbx_buf_add(b, s, 1);
			continue;
		}
		e[1] = hex[c >> 4];
		e[2] = hex[c & 15];
		sbx_buf_add(b, e, 3);
	}
}

struct qs {
	struct sbx_buf *b;
	int n;
};

/* MHD gives the query decoded: encoded again, in its order. */
static enum MHD_Result
add_arg(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
	struct qs *q = cls;

	(void)kind;
	sbx_buf_add(q->b, q->n++ ? "&" : "?", 1);
	pct(q->b, k);
	if (v) {
		sbx_buf_add(q->b, "=", 1);
		pct(q->b, v);
	}
	return MHD_YES;
}

/* Never blocks: with nothing from the sandbox's server yet, the
 * connection waits suspended for it (wake.c). */
static ssize_t
up_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct up *u = cls;
	struct pollfd p = {u->fd, POLLIN, 0};
	ssize_t n;
	int r;

	(void)pos;
	if (u->off < u->nrest) {
		n = (ssize_t)(u->nrest - u->off < max ? u->nrest - u->off : max);
		memcpy(buf, u->rest + u->off, (size_t)n);
		u->off += (size_t)n;
		return n;
	}
	for (;;) {
		while ((r = poll(&p, 1, 0)) < 0 && errno == EINTR)
			;
		if (r < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (r > 0)
			break;
		if (sbx_mono_ms() >= u->idle_until)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (sbxd_wait(&u->w, u->c, u->fd, u->idle_until) == 0)
			return 0;
		pthread_mutex_lock(&sbxd.mu);
		r = sbxd.stopping;
		pthread_mutex_unlock(&sbxd.mu);
		if (r)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	while ((n = read(u->fd, buf, max)) < 0 && errno == EINTR)
		;
	u->idle_until = sbx_mono_ms() + UP_MS;
	if (n == 0)
		return MHD_CONTENT_READER_END_OF_STREAM;
	return n < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : n;
}

static void
up_free(void *cls)
{
	struct up *u = cls;

	sbxd_wait_cancel(&u->w);
	close(u->fd);
	free(u->rest);
	free(u);
}

static enum MHD_Result
bad_gateway(struct sbxd_req *r, const char *msg)
{
	return sbxd_reply_json(r, 502, json_pack("{s:s,s:s,s:i}",
	    "sandboxId", r->box->id, "message", msg, "code", 502));
}

/* Any method, any path: the sandbox's server decides. */
const struct sbxd_route sbxd_port_route = {"*", "*", 1, sbxd_port_proxy,
    NULL};

enum MHD_Result
sbxd_port_proxy(struct sbxd_req *r)
{
	const struct sbx_files *files = sbx_files_of(r->box->ref, NULL);
	struct sbx_buf b = SBX_BUF_INIT;
	struct qs q = {&b, 0};
	struct hdrs hd = {&b, NULL, r->port};
	struct sbx_err err;
	char *mask = NULL;
	struct MHD_Response *rs;
	struct up *u = NULL;
	char head[HEAD_MAX + 1], cl[32], *eoh, *line, *next, *colon;
	char *hk[HDR_MAX], *hv[HDR_MAX];
	long long len = -1;
	size_t n = 0;
	ssize_t k;
	int fd, status, nh = 0, i, chunked = 0;
	enum MHD_Result ret;

	if (!files || !files->connect)
		return bad_gateway(r, "The sandbox is running but port is not "
		    "open");
	if ((fd = files->connect(r->box->ref, (unsigned)r->port, &err)) < 0) {
		sbxd_log("%s port %ld: %s", r->box->id, r->port, err.msg);
		return bad_gateway(r, "The sandbox is running but port is not "
		    "open");
	}
	sbx_buf_add(&b, r->method, strlen(r->method));
	sbx_buf_add(&b, " ", 1);
	pct(&b, r->path);
	MHD_get_connection_values(r->c, MHD_GET_ARGUMENT_KIND, add_arg, &q);
	sbx_buf_add(&b, " HTTP/1.0\r\n", 11);
	pthread_mutex_lock(&sbxd.mu);
	if (sbx_json_str(r->box->network, "maskRequestHost"))
		mask = sbx_xstrdup(sbx_json_str(r->box->network,
		    "maskRequestHost"));
	pthread_mutex_unlock(&sbxd.mu);
	hd.mask = mask;
	MHD_get_connection_values(r->c, MHD_HEADER_KIND, add_header, &hd);
	/* HTTP/1.0 may come without a Host: the mask is still the one. */
	if (mask && !MHD_lookup_connection_value(r->c, MHD_HEADER_KIND,
	    "Host")) {
		sbx_buf_add(&b, "Host: ", 6);
		add_mask(&b, mask, r->port);
		sbx_buf_add(&b, "\r\n", 2);
	}
	free(mask);
	snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", r->body.len);
	if (r->body.len || strcmp(r->method, "GET"))
		sbx_buf_add(&b, cl, strlen(cl));
	sbx_buf_add(&b, "Connection: close\r\n\r\n", 21);
	sbx_buf_add(&b, r->body.data, r->body.len);
	k = sbx_write_all(fd, b.data, b.len);
	sbx_buf_release(&b);
	if (k < 0)
		goto broken;
	/* The head: up to its blank line. */
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};

		if (poll(&p, 1, UP_MS) <= 0 || (k = read(fd, head + n,
		    HEAD_MAX - n)) <= 0)
			goto broken;
		n += (size_t)k;
		head[n] = '\0';
		if ((eoh = strstr(head, "\r\n\r\n")))
			break;
		if (n == HEAD_MAX)
			goto broken;
	}
	if (sscanf(head, "HTTP/%*d.%*d %d", &status) != 1 || status < 100 ||
	    status > 999)
		goto broken;
	u = sbx_xcalloc(1, sizeof *u);
	u->fd = fd;
	u->c = r->c;
	u->idle_until = sbx_mono_ms() + UP_MS;
	u->nrest = n - (size_t)(eoh + 4 - head);
	u->rest = sbx_xmalloc(u->nrest + 1);
	memcpy(u->rest, eoh + 4, u->nrest);
	*eoh = '\0';
	/* The headers, cut in place: names in hk, values in hv. */
	for (line = strstr(head, "\r\n"); line && nh < HDR_MAX; line = next) {
		line += 2;
		if ((next = strstr(line, "\r\n")))
			*next = '\0';
		if (!(colon = strchr(line, ':')))
			continue;
		*colon++ = '\0';
		colon += strspn(colon, " \t");
		if (!strcasecmp(line, "Content-Length"))
			len = strtoll(colon, NULL, 10);
		else if (!strcasecmp(line, "Transfer-Encoding"))
			chunked = 1;
		else if (!hop(line)) {
			hk[nh] = line;
			hv[nh++] = colon;
		}
	}
	if (chunked) {
		/* Chunked to an HTTP/1.0 request: not ours to undo. */
		up_free(u);
		return bad_gateway(r, "The sandbox's server answered HTTP/1.0 "
		    "with a chunked body");
	}
	rs = MHD_create_response_from_callback(len >= 0 ? (uint64_t)len :
	    MHD_SIZE_UNKNOWN, 64 << 10, up_read, u, up_free);
	if (!rs) {
		up_free(u);
		return MHD_NO;
	}
	/* One MHD refuses (Date, say) is MHD's own to set. */
	for (i = 0; i < nh; i++)
		(void)MHD_add_response_header(rs, hk[i], hv[i]);
	r->status = status;
	ret = MHD_queue_response(r->c, (unsigned)status, rs);
	MHD_destroy_response(rs);
	return ret;
broken:
	close(fd);
	return bad_gateway(r, "The sandbox's server did not answer");
}
