/* fs.c - envd's filesystem service (Connect RPC) and its plain HTTP routes
 * (/files, /health). Every path is resolved inside the sandbox, by the
 * helper of files.c; sbxd only reads and writes the fds it hands over. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <zlib.h>

#include "sbxd.h"

#define MAX_WATCHERS 256
#define UPLOAD_CHUNK 65536

static enum MHD_Result
h_health(struct sbxd_req *r)
{
	return sbxd_reply_empty(r, 204);
}

/* The user of an RPC: Authorization: Basic base64("name:"); NULL for
 * the default one. */
char *
sbxd_rpc_user(struct sbxd_req *r)
{
	const char *a = sbxd_header(r, "Authorization");
	unsigned char out[256];
	size_t n;
	int len;
	char *colon;

	if (!a || strncasecmp(a, "Basic ", 6))
		return NULL;
	a += 6;
	n = strlen(a);
	if (!n || n % 4 || n / 4 * 3 >= sizeof out)
		return NULL;
	len = EVP_DecodeBlock(out, (const unsigned char *)a, (int)n);
	if (len < 0)
		return NULL;
	while (n && a[n - 1] == '=') {
		n--;
		len--;
	}
	out[len] = 0;
	if ((colon = strchr((char *)out, ':')))
		*colon = 0;
	return out[0] ? sbx_xstrdup((char *)out) : NULL;
}

/* q with the request's user, to the helper; the answer, or NULL after
 * answering with its error. */
static json_t *
rpc_call(struct sbxd_req *r, json_t *q, enum MHD_Result *ret)
{
	char *user = sbxd_rpc_user(r);
	const char *code;
	json_t *a;

	if (user)
		json_object_set_new(q, "user", json_string(user));
	free(user);
	a = sbxd_inbox_do(r->box, q, NULL);
	if ((code = sbx_json_str(a, "error"))) {
		*ret = sbxd_reply_connect(r, code, "%s",
		    sbx_json_str(a, "message"));
		json_decref(a);
		return NULL;
	}
	return a;
}

/* The map of the methods whose one field is "path". */
static const char *const path_only[] = {"path", "path", NULL};

/* A unary method: its request's string fields (in, then out, in
 * pairs) become the helper's request for op. */
static enum MHD_Result
unary(struct sbxd_req *r, const char *op, const char *const *map)
{
	enum MHD_Result ret;
	json_t *j = sbxd_unary_request(r, &ret), *q, *a;
	const char *v;

	if (!j)
		return ret;
	q = json_pack("{s:s}", "op", op);
	for (; map[0]; map += 2) {
		v = sbx_json_str(j, map[0]);
		if (!v || !*v) {
			json_decref(q);
			json_decref(j);
			return sbxd_reply_connect(r, "invalid_argument",
			    "%s is required", map[0]);
		}
		json_object_set_new(q, map[1], json_string(v));
	}
	if (!strcmp(op, "list"))
		json_object_set_new(q, "depth", json_integer(
		    sbx_json_int(j, "depth", 1)));
	json_decref(j);
	if (!(a = rpc_call(r, q, &ret)))
		return ret;
	json_object_del(a, "errno");
	return sbxd_reply_json(r, 200, a);
}

static enum MHD_Result
h_stat(struct sbxd_req *r)
{
	return unary(r, "stat", path_only);
}

static enum MHD_Result
h_list_dir(struct sbxd_req *r)
{
	return unary(r, "list", path_only);
}

static enum MHD_Result
h_make_dir(struct sbxd_req *r)
{
	return unary(r, "mkdir", path_only);
}

static enum MHD_Result
h_move(struct sbxd_req *r)
{
	static const char *const m[] = {"source", "path", "destination", "to",
	    NULL};

	return unary(r, "move", m);
}

static enum MHD_Result
h_remove(struct sbxd_req *r)
{
	return unary(r, "remove", path_only);
}

/* A helper watching a directory for r; NULL after answering. */
static int
watch_start(struct sbxd_req *r, const json_t *j, struct sbxd_inbox *ib,
    char *msg, size_t n, const char **code)
{
	struct sbx_err err;
	const char *path = sbx_json_str(j, "path");
	char *user = sbxd_rpc_user(r);
	json_t *q, *a;

	*code = "invalid_argument";
	if (!path || !*path) {
		free(user);
		snprintf(msg, n, "path is required");
		return -1;
	}
	if (sbxd_inbox_start(r->box, ib, &err) < 0) {
		free(user);
		*code = "unimplemented";
		snprintf(msg, n, "%s", err.msg);
		return -1;
	}
	q = json_pack("{s:s,s:s,s:b,s:b}", "op", "watch", "path", path,
	    "recursive", json_is_true(json_object_get(j, "recursive")),
	    "entries", json_is_true(json_object_get(j, "includeEntry")) ||
	    json_is_true(json_object_get(j, "include_entry")));
	if (user)
		json_object_set_new(q, "user", json_string(user));
	free(user);
	a = sbxd_inbox_call(ib, q, NULL);
	if ((*code = sbx_json_str(a, "error"))) {
		*code = !strcmp(*code, "not_found") ? "not_found" :
		    !strcmp(*code, "unauthenticated") ? "unauthenticated" :
		    !strcmp(*code, "invalid_argument") ? "invalid_argument" :
		    !strcmp(*code, "permission_denied") ? "permission_denied" :
		    !strcmp(*code, "resource_exhausted") ?
		    "resource_exhausted" :
		    "internal";
		snprintf(msg, n, "%s", sbx_json_str(a, "message"));
		json_decref(a);
		sbxd_inbox_end(ib, 1);
		return -1;
	}
	json_decref(a);
	return 0;
}

/* --- WatchDir: a stream of the helper's events ----------------------- */

struct wstream {
	struct sbxd_inbox ib;
	struct sbxd_stream io;
};

static void
wstream_msg(struct wstream *st, const char *kind, json_t *v)
{
	json_t *j = json_pack("{s:o}", kind, v ? v : json_object());

	sbx_e2b_frame_json(&st->io.out, 0, j);
	json_decref(j);
}

/* Never blocks: with nothing to send, the connection waits suspended
 * until the helper writes, the keepalive or the deadline (wake.c). */
static ssize_t
wstream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct wstream *st = cls;
	long long now, until;
	json_t *ev;
	size_t n;
	int pr;

	(void)pos;
	while (!(n = sbxd_stream_take(&st->io, buf, max))) {
		if (st->io.last)
			return MHD_CONTENT_READER_END_OF_STREAM;
		now = sbx_mono_ms();
		if (st->io.deadline && now >= st->io.deadline) {
			sbxd_stream_end(&st->io, "deadline_exceeded",
			    "the operation timed out");
			continue;
		}
		if (now >= st->io.next_ping) {
			wstream_msg(st, "keepalive", NULL);
			st->io.next_ping = now + st->io.keepalive_ms;
			continue;
		}
		pthread_mutex_lock(&sbxd.mu);
		pr = sbxd.stopping;
		pthread_mutex_unlock(&sbxd.mu);
		if (pr) {
			sbxd_stream_end(&st->io, "unavailable",
			    "sbxd is stopping");
			continue;
		}
		{
			struct pollfd f = {st->ib.sock, POLLIN, 0};

			pr = poll(&f, 1, 0);
		}
		if (pr < 0 && errno != EINTR) {
			sbxd_stream_end(&st->io, "internal", "poll failed");
			continue;
		}
		if (pr == 0) {
			until = st->io.next_ping;
			if (st->io.deadline && st->io.deadline < until)
				until = st->io.deadline;
			if (sbxd_wait(&st->io.w, st->io.c, st->ib.sock,
			    until) == 0)
				return 0;
			continue;
		}
		if (pr < 0)
			continue;
		if (!(ev = sbxd_msg_recv(st->ib.sock, NULL))) {
			sbxd_stream_end(&st->io, "unavailable",
			    "the watch ended: the sandbox is gone");
			continue;
		}
		wstream_msg(st, "filesystem", ev);
		st->io.next_ping = sbx_mono_ms() + st->io.keepalive_ms;
	}
	return (ssize_t)n;
}

static void
wstream_free(void *cls)
{
	struct wstream *st = cls;

	sbxd_wait_cancel(&st->io.w);
	sbxd_inbox_end(&st->ib, 1);
	sbx_buf_release(&st->io.out);
	free(st);
}

static enum MHD_Result
h_watch_dir(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = sbxd_stream_request(r, &ret);
	struct wstream *st;
	const char *code;
	char msg[512];

	if (!j)
		return ret;
	st = sbx_xcalloc(1, sizeof *st);
	st->ib.ch = (struct sbxd_child)SBXD_CHILD_NONE;
	st->ib.sock = -1;
	sbxd_stream_start(&st->io, r);
	/* Connect streams fail with 200 and an end of stream. */
	if (watch_start(r, j, &st->ib, msg, sizeof msg, &code) < 0)
		sbxd_stream_end(&st->io, code, msg);
	else
		wstream_msg(st, "start", NULL);
	json_decref(j);
	return sbxd_reply_stream(r, 16384, wstream_read, st, wstream_free);
}

/* --- watchers: a watch kept in sbxd, polled ---------------------------- */

struct watcher {
	char id[SBXD_ID_LEN + 1];
	struct sbxd_box *box;
	struct sbxd_inbox ib;
};

static struct watcher watchers[MAX_WATCHERS];
static pthread_mutex_t wmu = PTHREAD_MUTEX_INITIALIZER;

/* The watcher a unary request names, with wmu held; NULL after
 * answering. */
static struct watcher *
watcher_lock(struct sbxd_req *r, enum MHD_Result *ret)
{
	json_t *j = sbxd_unary_request(r, ret);
	struct watcher *w = NULL;
	const char *id;
	size_t i;

	if (!j)
		return NULL;
	if (!(id = sbx_json_str(j, "watcherId")))
		id = sbx_json_str(j, "watcher_id");
	pthread_mutex_lock(&wmu);
	for (i = 0; id && !w && i < MAX_WATCHERS; i++)
		if (watchers[i].box == r->box && !strcmp(watchers[i].id, id))
			w = &watchers[i];
	if (!w) {
		pthread_mutex_unlock(&wmu);
		*ret = sbxd_reply_connect(r, "not_found", "watcher with id %s "
		    "not found", sbx_json_str(j, "watcherId") ?
		    sbx_json_str(j, "watcherId") : "(none)");
	}
	json_decref(j);
	return w;
}

static enum MHD_Result
h_create_watcher(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = sbxd_unary_request(r, &ret);
	struct sbxd_inbox ib;
	const char *code;
	char msg[512], id[SBXD_ID_LEN + 1];
	size_t i;

	if (!j)
		return ret;
	if (watch_start(r, j, &ib, msg, sizeof msg, &code) < 0) {
		json_decref(j);
		return sbxd_reply_connect(r, code, "%s", msg);
	}
	json_decref(j);
	sbxd_random_id(id, SBXD_ID_LEN);
	pthread_mutex_lock(&wmu);
	for (i = 0; i < MAX_WATCHERS && watchers[i].box; i++)
		;
	if (i == MAX_WATCHERS) {
		pthread_mutex_unlock(&wmu);
		sbxd_inbox_end(&ib, 1);
		return sbxd_reply_connect(r, "resource_exhausted", "too many "
		    "watchers (%d): remove some", MAX_WATCHERS);
	}
	memcpy(watchers[i].id, id, sizeof id);
	watchers[i].ib = ib;
	watchers[i].box = r->box;
	pthread_mutex_lock(&sbxd.mu);
	r->box->refs++;
	pthread_mutex_unlock(&sbxd.mu);
	pthread_mutex_unlock(&wmu);
	return sbxd_reply_json(r, 200, json_pack("{s:s}", "watcherId", id));
}

static enum MHD_Result
h_get_watcher_events(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct watcher *w = watcher_lock(r, &ret);
	json_t *evs, *ev;

	if (!w)
		return ret;
	evs = json_array();
	for (;;) {
		struct pollfd f = {w->ib.sock, POLLIN, 0};

		if (poll(&f, 1, 0) <= 0 || !(f.revents & POLLIN) ||
		    !(ev = sbxd_msg_recv(w->ib.sock, NULL)))
			break;
		json_array_append_new(evs, ev);
	}
	pthread_mutex_unlock(&wmu);
	return sbxd_reply_json(r, 200, json_pack("{s:o}", "events", evs));
}

static enum MHD_Result
h_remove_watcher(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct watcher *w = watcher_lock(r, &ret), gone;

	if (!w)
		return ret;
	gone = *w;
	memset(w, 0, sizeof *w);
	pthread_mutex_unlock(&wmu);
	sbxd_inbox_end(&gone.ib, 1);
	sbxd_box_put(gone.box);
	return sbxd_reply(r, 200, "application/json", "{}", 2);
}

void
sbxd_fs_end_all(struct sbxd_box *b)
{
	struct watcher gone;
	size_t i;

	for (i = 0; i < MAX_WATCHERS; i++) {
		pthread_mutex_lock(&wmu);
		if (watchers[i].box != b) {
			pthread_mutex_unlock(&wmu);
			continue;
		}
		gone = watchers[i];
		memset(&watchers[i], 0, sizeof watchers[i]);
		pthread_mutex_unlock(&wmu);
		sbxd_inbox_end(&gone.ib, 1);
		sbxd_box_put(gone.box);
	}
}

/* --- /files: who may, and who for ------------------------------------- */

/* envd's signature of a file URL: "v1_" and the unpadded base64 of
 * sha256("path:op:user:token[:expiration]"). */
static void
sig_want(char want[64], const char *path, const char *op, const char *user,
    const char *token, const char *exp)
{
	unsigned char d[32];
	char *s;
	size_t n;

	s = exp ? sbx_xasprintf("%s:%s:%s:%s:%s", path ? path : "", op,
	    user ? user : "", token, exp) :
	    sbx_xasprintf("%s:%s:%s:%s", path ? path : "", op,
	    user ? user : "", token);
	SHA256((unsigned char *)s, strlen(s), d);
	explicit_bzero(s, strlen(s));
	free(s);
	memcpy(want, "v1_", 3);
	EVP_EncodeBlock((unsigned char *)want + 3, d, 32);
	n = strlen(want);
	while (n && want[n - 1] == '=')
		want[--n] = 0;
}

int
sbxd_fs_signed_box(struct sbxd_req *r, char *id, size_t n)
{
	const char *sig = sbxd_query(r, "signature");
	const char *op = !strcmp(r->method, "GET") ? "read" :
	    !strcmp(r->method, "POST") ? "write" : NULL;
	unsigned char a[32], b[32];
	struct sbxd_box *x;
	char want[64];
	int found = 0;

	if (!sig || !op || strncmp(sig, "v1_", 3))
		return -1;
	SHA256((const unsigned char *)sig, strlen(sig), b);
	pthread_mutex_lock(&sbxd.mu);
	for (x = sbxd.boxes; x && !found; x = x->next) {
		if (!x->token[0])
			continue;
		sig_want(want, sbxd_query(r, "path"), op,
		    sbxd_query(r, "username"), x->token,
		    sbxd_query(r, "signature_expiration"));
		SHA256((unsigned char *)want, strlen(want), a);
		if (!CRYPTO_memcmp(a, b, 32)) {
			snprintf(id, n, "%s", x->id);
			found = 1;
		}
	}
	pthread_mutex_unlock(&sbxd.mu);
	explicit_bzero(want, sizeof want);
	return found ? 0 : -1;
}

/* A presigned URL: "v1_" + base64(sha256("path:op:user:token[:exp]")),
 * unpadded. 0 when it holds; else answered. */
static int
signature_ok(struct sbxd_req *r, const char *op, enum MHD_Result *ret)
{
	const char *sig = sbxd_query(r, "signature");
	const char *exp = sbxd_query(r, "signature_expiration");
	const char *path = sbxd_query(r, "path");
	const char *user = sbxd_query(r, "username");
	const char *tok = sbxd_header(r, "X-Access-Token");
	unsigned char a[32], b[32];
	char want[64];
	uint64_t when;
	size_t n;

	if (!r->box->token[0])
		return 0;
	if (tok) {
		SHA256((const unsigned char *)tok, strlen(tok), a);
		SHA256((const unsigned char *)r->box->token,
		    strlen(r->box->token), b);
		if (!CRYPTO_memcmp(a, b, 32))
			return 0;
	}
	if (!sig || strncmp(sig, "v1_", 3)) {
		*ret = sbxd_reply_err(r, 401, "unauthorized access, please "
		    "provide a valid access token or method signing if "
		    "supported");
		return -1;
	}
	if (exp && (sbx_parse_u64(exp, 0, INT64_MAX, &when) < 0 ||
	    (long long)when < sbxd_now_ms() / 1000)) {
		*ret = sbxd_reply_err(r, 401, "signature is already expired");
		return -1;
	}
	sig_want(want, path, op, user, r->box->token, exp);
	n = strlen(want);
	SHA256((unsigned char *)want, n, a);
	SHA256((const unsigned char *)sig, strlen(sig), b);
	if (CRYPTO_memcmp(a, b, 32)) {
		*ret = sbxd_reply_err(r, 401, "invalid signature");
		return -1;
	}
	return 0;
}

/* The helper's error as /files answers it. */
static enum MHD_Result
files_err(struct sbxd_req *r, const json_t *a, const char *user)
{
	const char *code = sbx_json_str(a, "error");
	const char *msg = sbx_json_str(a, "message");
	int st;

	if (!strcmp(code, "unauthenticated"))
		return sbxd_reply_err(r, 401, "error looking up user '%s'",
		    user ? user : "user");
	if (!strcmp(code, "resource_exhausted"))
		return sbxd_reply_err(r, 507, "not enough disk space "
		    "available");
	st = sbx_e2b_code_status(code);
	if (st == 409)
		st = 400;
	return sbxd_reply_err(r, st ? st : 500, "%s", msg ? msg : code);
}

/* --- GET /files -------------------------------------------------------- */

static const char *
content_type(const char *name)
{
	static const char *const types[] = {
		".txt", "text/plain; charset=utf-8",
		".md", "text/markdown; charset=utf-8",
		".json", "application/json",
		".html", "text/html; charset=utf-8",
		".css", "text/css; charset=utf-8",
		".js", "text/javascript; charset=utf-8",
		".csv", "text/csv; charset=utf-8",
		".xml", "text/xml; charset=utf-8",
		".png", "image/png",
		".jpg", "image/jpeg",
		".gif", "image/gif",
		".svg", "image/svg+xml",
		".pdf", "application/pdf",
		".zip", "application/zip",
		".gz", "application/gzip",
		".tar", "application/x-tar",
		NULL,
	};
	const char *dot = strrchr(name, '.');
	size_t i;

	for (i = 0; dot && types[i]; i += 2)
		if (!strcasecmp(dot, types[i]))
			return types[i + 1];
	return "application/octet-stream";
}

/* One range of "bytes=a-b", "bytes=a-", "bytes=-n" of size: 1 and the
 * range, 0 for none (or one we do not serve: the whole file), -1 when
 * it cannot be satisfied. */
static int
parse_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
	char *end;
	unsigned long long a, b;

	if (!h || strncmp(h, "bytes=", 6) || strchr(h, ','))
		return 0;
	h += 6;
	while (*h == ' ')
		h++;
	if (*h == '-') {
		errno = 0;
		b = strtoull(h + 1, &end, 10);
		if (errno || *end || end == h + 1)
			return 0;
		if (!b || !size)
			return -1;
		if (b > size)
			b = size;
		*off = size - b;
		*len = b;
		return 1;
	}
	errno = 0;
	a = strtoull(h, &end, 10);
	if (errno || end == h || *end != '-')
		return 0;
	h = end + 1;
	if (!*h) {
		b = size ? size - 1 : 0;
	} else {
		b = strtoull(h, &end, 10);
		if (errno || *end || b < a)
			return 0;
		if (b >= size)
			b = size - 1;
	}
	if (a >= size)
		return -1;
	*off = a;
	*len = b - a + 1;
	return 1;
}

static enum MHD_Result
h_files_get(struct sbxd_req *r)
{
	enum MHD_Result ret;
	const char *path = sbxd_query(r, "path");
	const char *user = sbxd_query(r, "username");
	struct MHD_Response *rs;
	struct stat st;
	uint64_t off = 0, len;
	json_t *q, *a;
	const char *name;
	char hdr[128], *disp;
	int fd = -1, range, status = 200;
	size_t i;

	if (signature_ok(r, "read", &ret) < 0)
		return ret;
	if (!path || !*path)
		return sbxd_reply_err(r, 400, "path is required");
	q = json_pack("{s:s,s:s}", "op", "open", "path", path);
	if (!q)
		return sbxd_reply_err(r, 400, "path is not UTF-8");
	if (user && *user)
		json_object_set_new(q, "user", json_string(user));
	a = sbxd_inbox_do(r->box, q, &fd);
	if (sbx_json_str(a, "error")) {
		ret = files_err(r, a, user);
		json_decref(a);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	if (fd < 0 || fstat(fd, &st) < 0) {
		json_decref(a);
		if (fd >= 0)
			close(fd);
		return sbxd_reply_err(r, 500, "the file was not handed over");
	}
	name = sbx_json_str(json_object_get(a, "entry"), "name");
	len = (uint64_t)st.st_size;
	range = parse_range(sbxd_header(r, "Range"), len, &off, &len);
	if (range < 0) {
		json_decref(a);
		close(fd);
		snprintf(hdr, sizeof hdr, "bytes */%lld",
		    (long long)st.st_size);
		rs = MHD_create_response_from_buffer(0, (void *)"",
		    MHD_RESPMEM_PERSISTENT);
		if (!rs)
			return MHD_NO;
		MHD_add_response_header(rs, "Content-Range", hdr);
		r->status = 416;
		ret = MHD_queue_response(r->c, 416, rs);
		MHD_destroy_response(rs);
		return ret;
	}
	/* MHD closes fd with the response. */
	rs = MHD_create_response_from_fd_at_offset64(len, fd, off);
	if (!rs) {
		close(fd);
		json_decref(a);
		return MHD_NO;
	}
	if (range > 0) {
		status = 206;
		snprintf(hdr, sizeof hdr, "bytes %llu-%llu/%lld",
		    (unsigned long long)off,
		    (unsigned long long)(off + len - 1),
		    (long long)st.st_size);
		MHD_add_response_header(rs, "Content-Range", hdr);
	}
	MHD_add_response_header(rs, "Accept-Ranges", "bytes");
	MHD_add_response_header(rs, "Content-Type", content_type(name ? name :
	    ""));
	/* The name is the sandbox's: nothing in it may end the header. */
	disp = sbx_xasprintf("inline; filename=\"%s\"", name ? name : "");
	for (i = strlen("inline; filename=\""); disp[i + 1]; i++)
		if ((unsigned char)disp[i] < 0x20 || disp[i] == '"' ||
		    disp[i] == '\\' || disp[i] == 0x7f)
			disp[i] = '_';
	MHD_add_response_header(rs, "Content-Disposition", disp);
	free(disp);
	json_decref(a);
	r->status = status;
	ret = MHD_queue_response(r->c, (unsigned)status, rs);
	MHD_destroy_response(rs);
	return ret;
}

/* --- POST /files --------------------------------------------------------- */

struct upload {
	struct sbxd_inbox ib;
	int started;
	int multipart;
	struct MHD_PostProcessor *pp;
	int fd;               /* the file being written, -1 */
	char *part;           /* multipart: the current part's filename */
	uint64_t part_bytes;  /* and what it had so far */
	json_t *files;        /* [{"path","created"}]: being written;
				* "created" until the upload is done */
	uint64_t total;
	z_stream *z;          /* Content-Encoding: gzip */
	int z_end;            /* its stream ended */
	uint64_t written;
	json_t *meta;         /* X-Metadata-*: lowercase key -> value */
	int status;           /* the answer, when it failed */
	char msg[512];
	char *user;
};

static void
up_fail(struct upload *up, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
up_fail(struct upload *up, int status, const char *fmt, ...)
{
	va_list ap;

	if (up->status)
		return;
	up->status = status;
	va_start(ap, fmt);
	vsnprintf(up->msg, sizeof up->msg, fmt, ap);
	va_end(ap);
}

/* n more bytes on *count, what came or what was written (a gzip body
 * grows); -1 after failing with 413 past --max-upload. */
static int
up_count(struct upload *up, uint64_t *count, size_t n)
{
	*count += n;
	if (sbxd.o.max_upload && *count > sbxd.o.max_upload) {
		up_fail(up, 413, "the upload is over %llu bytes",
		    (unsigned long long)sbxd.o.max_upload);
		return -1;
	}
	return 0;
}

/* The helper's error as the upload's. */
static void
up_fail_with(struct upload *up, const json_t *a)
{
	const char *code = sbx_json_str(a, "error");
	int st = sbx_e2b_code_status(code);

	if (!strcmp(code, "unauthenticated"))
		up_fail(up, 401, "error looking up user '%s'", up->user ?
		    up->user : "user");
	else if (!strcmp(code, "resource_exhausted"))
		up_fail(up, 507, "not enough disk space available");
	else
		up_fail(up, st && st != 409 ? st : 400, "%s",
		    sbx_json_str(a, "message"));
}

static int
up_close_file(struct upload *up)
{
	if (up->fd < 0)
		return 0;
	if (close(up->fd) < 0 && !up->status)
		up_fail(up, errno == ENOSPC || errno == EDQUOT ? 507 : 500,
		    errno == ENOSPC || errno == EDQUOT ? "not enough disk "
		    "space available" : "error writing file: %s",
		    strerror(errno));
	up->fd = -1;
	return up->status ? -1 : 0;
}

/* X-Metadata-KEY: VALUE headers; keys are HTTP tokens, values printable
 * ASCII, as envd takes them. */
static enum MHD_Result
up_meta_one(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *value)
{
	static const char pre[] = "x-metadata-";
	struct upload *up = cls;
	char k[256];
	size_t i, n;

	(void)kind;
	if (strncasecmp(key, pre, sizeof pre - 1))
		return MHD_YES;
	key += sizeof pre - 1;
	n = strlen(key);
	if (!n || n > 246) {
		up_fail(up, 400, "bad metadata key");
		return MHD_NO;
	}
	for (i = 0; i < n; i++) {
		if (!strchr("!#$%&'*+-.^_`|~", key[i]) &&
		    !(key[i] >= '0' && key[i] <= '9') &&
		    !(key[i] >= 'a' && key[i] <= 'z') &&
		    !(key[i] >= 'A' && key[i] <= 'Z')) {
			up_fail(up, 400, "bad metadata key");
			return MHD_NO;
		}
		k[i] = (char)(key[i] >= 'A' && key[i] <= 'Z' ? key[i] + 32 :
		    key[i]);
	}
	k[n] = 0;
	for (i = 0; value && value[i]; i++)
		if ((unsigned char)value[i] < 0x20 ||
		    (unsigned char)value[i] > 0x7e) {
			up_fail(up, 400, "metadata values are printable "
			    "ASCII");
			return MHD_NO;
		}
	json_object_set_new(up->meta, k, json_string(value ? value : ""));
	return MHD_YES;
}

static int
up_meta(struct sbxd_req *r, struct upload *up)
{
	const char *k;
	json_t *v;
	size_t total = 0;

	up->meta = json_object();
	MHD_get_connection_values(r->c, MHD_HEADER_KIND, up_meta_one, up);
	if (up->status)
		return -1;
	json_object_foreach(up->meta, k, v)
		total += strlen(k) + strlen(json_string_value(v));
	if (total > 4096) {
		up_fail(up, 400, "metadata is over 4096 bytes");
		return -1;
	}
	return 0;
}

static int
up_set_meta(struct upload *up)
{
	const char *k;
	json_t *v;
	char name[300];

	json_object_foreach(up->meta, k, v) {
		snprintf(name, sizeof name, SBXD_META_XATTR "%s", k);
		if (fsetxattr(up->fd, name, json_string_value(v),
		    strlen(json_string_value(v)), 0) < 0) {
			up_fail(up, errno == ENOSPC ? 507 : 500, "cannot set "
			    "the file's metadata: %s", strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int
up_open_file(struct upload *up, const char *path)
{
	json_t *q, *a, *v;
	size_t i;

	if (up_close_file(up) < 0)
		return -1;
	json_array_foreach(up->files, i, v)
		if (!strcmp(sbx_json_str(v, "asked"), path)) {
			up_fail(up, 400, "cannot upload two files to the same "
			    "path '%s'", path);
			return -1;
		}
	q = json_pack("{s:s,s:s}", "op", "create", "path", path);
	if (!q) {
		up_fail(up, 400, "path is not UTF-8");
		return -1;
	}
	if (up->user)
		json_object_set_new(q, "user", json_string(up->user));
	a = sbxd_inbox_call(&up->ib, q, &up->fd);
	if (sbx_json_str(a, "error")) {
		up_fail_with(up, a);
		json_decref(a);
		return -1;
	}
	if (up->fd < 0) {
		json_decref(a);
		up_fail(up, 500, "the file was not handed over");
		return -1;
	}
	json_object_set_new(a, "asked", json_string(path));
	json_array_append_new(up->files, a);
	return up_set_meta(up);
}

static int up_write_raw(struct upload *up, const char *p, size_t n);

/* A gzip body, inflated on its way to the file; members may follow
 * one another, as gzip(1) allows. */
static int
up_inflate(struct upload *up, const char *p, size_t n)
{
	unsigned char out[UPLOAD_CHUNK];
	int zr;

	up->z->next_in = (unsigned char *)p;
	up->z->avail_in = (uInt)n;
	while (up->z->avail_in) {
		if (up->z_end) {
			inflateReset(up->z);
			up->z_end = 0;
		}
		up->z->next_out = out;
		up->z->avail_out = sizeof out;
		zr = inflate(up->z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
			up_fail(up, 400, "the body is not valid gzip");
			return -1;
		}
		if (up_write_raw(up, (char *)out, sizeof out -
		    up->z->avail_out) < 0)
			return -1;
		if (zr == Z_STREAM_END)
			up->z_end = 1;
		else if (zr == Z_BUF_ERROR)
			break;
	}
	return 0;
}

static int
up_write(struct upload *up, const char *p, size_t n)
{
	return up->z ? up_inflate(up, p, n) : up_write_raw(up, p, n);
}

static int
up_write_raw(struct upload *up, const char *p, size_t n)
{
	if (up->fd < 0)
		return -1;
	if (up_count(up, &up->written, n) < 0)
		return -1;
	if (sbx_write_all(up->fd, p, n) < 0) {
		if (errno == ENOSPC || errno == EDQUOT)
			up_fail(up, 507, "not enough disk space available");
		else
			up_fail(up, 500, "error writing file: %s",
			    strerror(errno));
		return -1;
	}
	return 0;
}

static enum MHD_Result
up_part(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *filename, const char *type, const char *enc,
    const char *data, uint64_t off, size_t size)
{
	struct sbxd_req *r = cls;
	struct upload *up = r->up;
	const char *path = sbxd_query(r, "path");

	(void)kind;
	(void)type;
	(void)enc;
	if (up->status)
		return MHD_NO;
	if (!key || strcmp(key, "file"))
		return MHD_YES;
	/* A part begins at off 0; MHD may call more than once there (an
	 * empty piece first). */
	if (!up->part || strcmp(up->part, filename ? filename : "") ||
	    (off == 0 && up->part_bytes)) {
		up->part_bytes = 0;
		free(up->part);
		up->part = sbx_xstrdup(filename ? filename : "");
		if (!(path && *path) && !*up->part) {
			up_fail(up, 400, "a part has no filename and there "
			    "is no path");
			return MHD_NO;
		}
		if (up_open_file(up, path && *path ? path : up->part) < 0)
			return MHD_NO;
	}
	up->part_bytes += size;
	return size && up_write(up, data, size) < 0 ? MHD_NO : MHD_YES;
}

/* On the first piece of the body, or at its end when there was none. */
static int
up_begin(struct sbxd_req *r, struct upload *up)
{
	const char *ct = sbxd_header(r, "Content-Type");
	const char *ce = sbxd_header(r, "Content-Encoding");
	const char *path = sbxd_query(r, "path");
	struct sbx_err err;

	up->started = 1;
	if (up_meta(r, up) < 0)
		return -1;
	if (ce && !strcasecmp(ce, "gzip") && ct &&
	    !strncasecmp(ct, "application/octet-stream", 24)) {
		up->z = sbx_xcalloc(1, sizeof *up->z);
		if (inflateInit2(up->z, 16 + MAX_WBITS) != Z_OK) {
			free(up->z);
			up->z = NULL;
			up_fail(up, 500, "cannot start inflating");
			return -1;
		}
	} else if (ce && strcasecmp(ce, "identity")) {
		up_fail(up, 400, "unsupported Content-Encoding '%s'", ce);
		return -1;
	}
	if (ct && !strncasecmp(ct, "multipart/form-data", 19)) {
		up->multipart = 1;
		up->pp = MHD_create_post_processor(r->c, UPLOAD_CHUNK, up_part,
		    r);
		if (!up->pp) {
			up_fail(up, 400, "bad multipart/form-data body");
			return -1;
		}
	} else if (!ct || strncasecmp(ct, "application/octet-stream", 24)) {
		up_fail(up, 400, "unsupported content type");
		return -1;
	} else if (!path || !*path) {
		up_fail(up, 400, "path is required for an octet-stream upload");
		return -1;
	}
	if (sbxd_inbox_start(r->box, &up->ib, &err) < 0) {
		up_fail(up, 501, "%s", err.msg);
		return -1;
	}
	if (!up->multipart)
		return up_open_file(up, path);
	return 0;
}

static void
up_free(struct sbxd_req *r)
{
	struct upload *up = r->up;
	json_t *v;
	size_t i;

	if (up->pp)
		MHD_destroy_post_processor(up->pp);
	if (up->z) {
		inflateEnd(up->z);
		free(up->z);
	}
	if (up->fd >= 0)
		close(up->fd);
	/* A new file of an upload that failed goes. */
	json_array_foreach(up->files, i, v)
		if (up->ib.sock >= 0 && json_is_true(json_object_get(v,
		    "created")))
			json_decref(sbxd_inbox_call(&up->ib, json_pack(
			    "{s:s,s:s,s:s?}", "op", "abort", "path",
			    sbx_json_str(v, "path"), "user", up->user), NULL));
	sbxd_inbox_end(&up->ib, 0);
	json_decref(up->files);
	json_decref(up->meta);
	free(up->part);
	free(up->user);
	free(up);
	r->up = NULL;
}

static struct upload *
up_get(struct sbxd_req *r)
{
	struct upload *up = r->up;
	const char *user = sbxd_query(r, "username");

	if (up)
		return up;
	up = sbx_xcalloc(1, sizeof *up);
	up->fd = -1;
	up->ib.ch = (struct sbxd_child)SBXD_CHILD_NONE;
	up->ib.sock = -1;
	up->files = json_array();
	up->user = user && *user ? sbx_xstrdup(user) : NULL;
	r->up = up;
	r->up_free = up_free;
	return up;
}

static int
h_files_data(struct sbxd_req *r, const char *p, size_t n)
{
	struct upload *up = up_get(r);
	enum MHD_Result ret;

	if (up->status)
		return -1;
	if (!up->started) {
		if (signature_ok(r, "write", &ret) < 0) {
			/* Answered: the rest of the body is let go. */
			up->status = -1;
			return -1;
		}
		if (up_begin(r, up) < 0)
			return -1;
	}
	if (up_count(up, &up->total, n) < 0)
		return -1;
	if (up->multipart)
		return MHD_post_process(up->pp, p, n) == MHD_YES &&
		    !up->status ? 0 : (up->status ? -1 :
		    (up_fail(up, 400, "bad multipart/form-data body"), -1));
	return up_write(up, p, n);
}

static enum MHD_Result
h_files_post(struct sbxd_req *r)
{
	struct upload *up = up_get(r);
	enum MHD_Result ret;
	json_t *out, *v, *a;
	size_t i;

	if (up->status < 0)
		return MHD_YES;
	if (!up->started) {
		if (signature_ok(r, "write", &ret) < 0)
			return ret;
		up_begin(r, up);
	}
	if (!up->status && up->multipart && !json_array_size(up->files))
		up_fail(up, 400, "no part named 'file' in the form");
	if (!up->status && up->z && !up->z_end)
		up_fail(up, 400, "the gzip body ends early");
	up_close_file(up);
	if (up->status)
		return sbxd_reply_err(r, up->status, "%s", up->msg);
	out = json_array();
	json_array_foreach(up->files, i, v) {
		a = sbxd_inbox_call(&up->ib, json_pack("{s:s,s:s,s:s?}", "op",
		    "commit", "path", sbx_json_str(v, "path"), "user",
		    up->user), NULL);
		if (sbx_json_str(a, "error")) {
			up_fail_with(up, a);
			json_decref(a);
			json_decref(out);
			return sbxd_reply_err(r, up->status, "%s", up->msg);
		}
		json_object_del(v, "created");
		if (json_object_size(up->meta))
			json_object_set(a, "metadata", up->meta);
		json_array_append_new(out, a);
	}
	return sbxd_reply_json(r, 200, out);
}

static enum MHD_Result
h_compose(struct sbxd_req *r)
{
	return sbxd_reply_err(r, 501, "sbxd does not support composing files "
	    "(see sbxd(8))");
}

const struct sbxd_route sbxd_fs_routes[] = {
	{"GET", "/health", 1, h_health, NULL},
	{"GET", "/files", 1, h_files_get, NULL},
	{"POST", "/files", 1, h_files_post, h_files_data},
	{"POST", "/files/compose", 1, h_compose, NULL},
	{"POST", "/filesystem.Filesystem/Stat", 1, h_stat, NULL},
	{"POST", "/filesystem.Filesystem/ListDir", 1, h_list_dir, NULL},
	{"POST", "/filesystem.Filesystem/MakeDir", 1, h_make_dir, NULL},
	{"POST", "/filesystem.Filesystem/Move", 1, h_move, NULL},
	{"POST", "/filesystem.Filesystem/Remove", 1, h_remove, NULL},
	{"POST", "/filesystem.Filesystem/WatchDir", 1, h_watch_dir, NULL},
	{"POST", "/filesystem.Filesystem/CreateWatcher", 1, h_create_watcher,
	    NULL},
	{"POST", "/filesystem.Filesystem/GetWatcherEvents", 1,
	    h_get_watcher_events, NULL},
	{"POST", "/filesystem.Filesystem/RemoveWatcher", 1, h_remove_watcher,
	    NULL},
	{NULL, NULL, 0, NULL, NULL},
};
