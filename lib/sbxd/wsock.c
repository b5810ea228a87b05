/* wsock.c - a request upgraded to a WebSocket (libmicrohttpd's upgrade,
 * lib/ws.c's frames): the handshake, then a thread of its own that holds
 * the socket until its work is done or sbxd stops */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <openssl/evp.h>

#include "sbxd.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_MSG_MAX (1u << 20) /* bytes of a message taken */
#define WS_MAX 256            /* WebSockets open at once: a thread each */

static pthread_mutex_t wmu = PTHREAD_MUTEX_INITIALIZER;
static unsigned nws;

struct up {
	void (*fn)(struct sbxd_ws *, void *);
	void (*fr)(void *);
	void *cls;
	struct sbxd_ws w;
};

/* Whether the header's comma-separated list has token. */
int
sbxd_ws_has_token(const char *h, const char *token)
{
	size_t n = strlen(token), k;

	while (h && *h) {
		h += strspn(h, " \t,");
		k = strcspn(h, " \t,");
		if (k == n && !strncasecmp(h, token, n))
			return 1;
		h += k;
	}
	return 0;
}

int
sbxd_ws_asked(struct sbxd_req *r)
{
	return sbxd_ws_has_token(sbxd_header(r, "Upgrade"), "websocket") &&
	    sbxd_ws_has_token(sbxd_header(r, "Connection"), "upgrade") &&
	    sbxd_header(r, "Sec-WebSocket-Key");
}

/* After our close: what the client still sends, until its close (or
 * its end, or 2 s), read and dropped, so that closing the socket does
 * not reset the connection before the client has read our frames. */
static void
linger(struct sbxd_ws *w)
{
	long long until = sbxd_now_ms() + 2000, left;
	struct sbx_ws_msg m;
	char buf[4096];
	ssize_t n;

	if (w->broken || w->peer_closed)
		return;
	while (!w->rd.failed && sbx_ws_next(&w->rd, &m) > 0)
		if (m.op == SBX_WS_CLOSE)
			return;
	while ((left = until - sbxd_now_ms()) > 0) {
		struct pollfd f = {w->fd, POLLIN, 0};

		if (poll(&f, 1, (int)left) <= 0)
			return;
		n = recv(w->fd, buf, sizeof buf, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return;
		if (w->rd.failed)
			continue;
		sbx_buf_add(&w->rd.in, buf, (size_t)n);
		while (sbx_ws_next(&w->rd, &m) > 0)
			if (m.op == SBX_WS_CLOSE)
				return;
	}
}

static void *
run(void *arg)
{
	struct up *u = arg;

	u->fn(&u->w, u->cls);
	linger(&u->w);
	MHD_upgrade_action(u->w.urh, MHD_UPGRADE_ACTION_CLOSE);
	sbx_ws_reader_release(&u->w.rd);
	free(u);
	pthread_mutex_lock(&wmu);
	nws--;
	pthread_mutex_unlock(&wmu);
	return NULL;
}

static void
upgraded(void *cls, struct MHD_Connection *c, void *req_cls,
    const char *extra, size_t extra_n, MHD_socket sock,
    struct MHD_UpgradeResponseHandle *urh)
{
	struct up *u = cls;
	pthread_t t;

	(void)c;
	(void)req_cls;
	u->w.fd = sock;
	u->w.urh = urh;
	u->w.rd.max = WS_MSG_MAX;
	if (extra_n)
		sbx_buf_add(&u->w.rd.in, extra, extra_n);
	pthread_mutex_lock(&wmu);
	nws++;
	pthread_mutex_unlock(&wmu);
	if (pthread_create(&t, NULL, run, u)) {
		pthread_mutex_lock(&wmu);
		nws--;
		pthread_mutex_unlock(&wmu);
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		sbx_ws_reader_release(&u->w.rd);
		u->fr(u->cls);
		free(u);
		return;
	}
	pthread_detach(t);
}

enum MHD_Result
sbxd_ws_upgrade(struct sbxd_req *r, const char *want,
    void (*fn)(struct sbxd_ws *, void *), void (*fr)(void *), void *cls)
{
	const char *key = sbxd_header(r, "Sec-WebSocket-Key");
	const char *ver = sbxd_header(r, "Sec-WebSocket-Version");
	const char *proto = sbxd_header(r, "Sec-WebSocket-Protocol");
	unsigned char md[EVP_MAX_MD_SIZE], acc[64];
	unsigned mdlen = 0;
	struct MHD_Response *resp;
	struct up *u;
	enum MHD_Result ret;
	char *s, *first = NULL;
	int busy;

	if (!key || strlen(key) > 64 || !ver || strcmp(ver, "13")) {
		fr(cls);
		return sbxd_reply(r, 400, "text/plain", "a WebSocket 13 "
		    "handshake was expected\n", 38);
	}
	pthread_mutex_lock(&wmu);
	busy = nws >= WS_MAX;
	pthread_mutex_unlock(&wmu);
	if (busy) {
		fr(cls);
		return sbxd_reply(r, 503, "text/plain", "too many WebSockets "
		    "open\n", 25);
	}
	s = sbx_xasprintf("%s%s", key, WS_GUID);
	EVP_Digest(s, strlen(s), md, &mdlen, EVP_sha1(), NULL);
	free(s);
	EVP_EncodeBlock(acc, md, (int)mdlen);
	u = sbx_xcalloc(1, sizeof *u);
	u->fn = fn;
	u->fr = fr;
	u->cls = cls;
	u->w.fd = -1;
	resp = MHD_create_response_for_upgrade(upgraded, u);
	if (!resp) {
		free(u);
		fr(cls);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Upgrade", "websocket");
	MHD_add_response_header(resp, "Sec-WebSocket-Accept", (char *)acc);
	/* want when it is offered, else the first protocol offered (a
	 * client that offers some refuses an answer without one). */
	if (want && sbxd_ws_has_token(proto, want)) {
		MHD_add_response_header(resp, "Sec-WebSocket-Protocol", want);
	} else if (proto && *proto) {
		first = sbx_xstrdup(proto + strspn(proto, " \t"));
		first[strcspn(first, " \t,")] = 0;
		if (*first)
			MHD_add_response_header(resp, "Sec-WebSocket-Protocol",
			    first);
		free(first);
	}
	r->status = 101;
	ret = MHD_queue_response(r->c, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	MHD_destroy_response(resp);
	if (ret != MHD_YES) {
		free(u);
		fr(cls);
	}
	return ret;
}

/* All of it on the socket, which may be non-blocking. */
static int
send_all(struct sbxd_ws *w, const void *p, size_t n)
{
	const char *s = p;
	ssize_t k;

	while (n) {
		k = send(w->fd, s, n, MSG_NOSIGNAL);
		if (k > 0) {
			s += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd f = {w->fd, POLLOUT, 0};

			if (poll(&f, 1, 30000) > 0)
				continue;
		}
		w->broken = 1;
		return -1;
	}
	return 0;
}

int
sbxd_ws_send(struct sbxd_ws *w, int op, const void *p, size_t n)
{
	unsigned char h[10];
	size_t hl = sbx_ws_header(h, op, n);

	if (w->broken || w->closed)
		return -1;
	if (send_all(w, h, hl) < 0 || (n && send_all(w, p, n) < 0))
		return -1;
	return 0;
}

int
sbxd_ws_close(struct sbxd_ws *w, int code, const char *reason)
{
	unsigned char b[125];
	size_t n = reason ? strlen(reason) : 0;
	int rc;

	if (w->closed || w->broken)
		return -1;
	if (n > sizeof b - 2)
		n = sizeof b - 2;
	b[0] = (unsigned char)(code >> 8);
	b[1] = (unsigned char)code;
	if (n)
		memcpy(b + 2, reason, n);
	rc = sbxd_ws_send(w, SBX_WS_CLOSE, b, n + 2);
	w->closed = 1;
	return rc;
}

int
sbxd_ws_read(struct sbxd_ws *w, int timeout_ms, struct sbx_ws_msg *m)
{
	struct pollfd f = {w->fd, POLLIN, 0};
	char buf[16384];
	ssize_t n;
	int k, stop;

	for (;;) {
		pthread_mutex_lock(&sbxd.mu);
		stop = sbxd.stopping;
		pthread_mutex_unlock(&sbxd.mu);
		if (stop) {
			sbxd_ws_close(w, 1001, "sbxd is stopping");
			return -1;
		}
		if (w->broken || w->peer_closed)
			return -1;
		k = sbx_ws_next(&w->rd, m);
		if (k < 0) {
			sbxd_ws_close(w, w->rd.failed, NULL);
			return -1;
		}
		if (k > 0) {
			if (m->op == SBX_WS_PING) {
				sbxd_ws_send(w, SBX_WS_PONG, m->data, m->len);
				continue;
			}
			if (m->op == SBX_WS_PONG)
				continue;
			if (m->op == SBX_WS_CLOSE) {
				w->peer_closed = 1;
				/* Its code echoed, as RFC 6455 asks. */
				if (!w->closed)
					sbxd_ws_send(w, SBX_WS_CLOSE, m->data,
					    m->len >= 2 ? 2 : 0);
				w->closed = 1;
				return -1;
			}
			return 1;
		}
		k = poll(&f, 1, timeout_ms);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return 0;
		n = recv(w->fd, buf, sizeof buf, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN ||
		    errno == EWOULDBLOCK))
			continue;
		if (n <= 0) {
			w->broken = 1;
			return -1;
		}
		sbx_buf_add(&w->rd.in, buf, (size_t)n);
		timeout_ms = 0;
	}
}
