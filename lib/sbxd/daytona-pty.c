/* daytona-pty.c - Daytona's toolbox PTYs (/process/pty): a shell on a
 * pty of sbxd's, run by the backend's exec with a tty (as E2B's pty
 * processes are, proc.c), and a WebSocket per connection that carries
 * its output out and its input in, and says how it ended. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "sbxd.h"

#define PTY_MAX 64 /* a box's */
#define EXIT_CONTROL "X-Daytona-Pty-Exit-Control"

/* The user's bash, else sh. */
static const char shell[] =
	"if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh";

struct pty {
	struct pty *next;
	struct sbxd_box *box;  /* a ref */
	char *id, *cwd;
	json_t *envs;
	int cols, rows, lazy;
	long long created_ms;
	struct sbxd_child ch;
	int master, res_fd;
	int connected;         /* a WebSocket has it */
	int done, exit_code;   /* it ended, and how */
	int refs;
};

static pthread_mutex_t pmu = PTHREAD_MUTEX_INITIALIZER;
static struct pty *ptys;

static void
pty_put(struct pty *p)
{
	int last;

	pthread_mutex_lock(&pmu);
	last = !--p->refs;
	pthread_mutex_unlock(&pmu);
	if (!last)
		return;
	sbxd_child_kill(&p->ch, SIGKILL);
	sbxd_child_release(&p->ch);
	if (p->master >= 0)
		close(p->master);
	if (p->res_fd >= 0)
		close(p->res_fd);
	json_decref(p->envs);
	sbxd_box_put(p->box);
	free(p->id);
	free(p->cwd);
	free(p);
}

/* Whether it ended (pmu held): its result read once it is there. */
static int
pty_done(struct pty *p)
{
	struct sbxd_proc_result res;
	ssize_t n;

	if (p->done)
		return 1;
	n = read(p->res_fd, &res, sizeof res);
	if (n < 0 && errno == EAGAIN)
		return 0;
	p->done = 1;
	if (n == (ssize_t)sizeof res && res.rc == 0)
		p->exit_code = res.signal ? 128 + res.signal : res.exit_code;
	else if (sbxd_child_wait(&p->ch, 1000) == 1 &&
	    WIFSIGNALED(p->ch.status))
		p->exit_code = 128 + WTERMSIG(p->ch.status);
	else
		p->exit_code = -1;
	return 1;
}

static json_t *
pty_json(struct pty *p)
{
	char ts[40];
	time_t t = (time_t)(p->created_ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_pack("{s:s,s:s,s:O,s:i,s:i,s:s,s:b,s:b}", "id", p->id,
	    "cwd", p->cwd, "envs", p->envs, "cols", p->cols, "rows", p->rows,
	    "createdAt", ts, "active", !pty_done(p), "lazyStart", p->lazy);
}

static struct pty *
pty_get(struct sbxd_box *b, const char *id)
{
	struct pty *p;

	pthread_mutex_lock(&pmu);
	for (p = ptys; p; p = p->next)
		if (p->box == b && !strcmp(p->id, id)) {
			p->refs++;
			break;
		}
	pthread_mutex_unlock(&pmu);
	return p;
}

/* The PTY of the path's segment 4, with a ref; NULL after 404. */
static struct pty *
pty_of(struct sbxd_req *r, enum MHD_Result *ret)
{
	char *id = sbxd_path_seg(r, 4);
	struct pty *p = id ? pty_get(r->box, id) : NULL;

	if (!p)
		*ret = sbxd_dt_tb_err(r, 404, "NOT_FOUND", "PTY session %s "
		    "not found", id ? id : "");
	free(id);
	return p;
}

static int
size_ok(json_int_t v)
{
	return v >= 1 && v <= 1000;
}

/* Make and start one: 0, or -1 after answering. */
static int
pty_new(struct sbxd_req *r, const char *id, const char *cwd,
    const json_t *envs, json_int_t cols, json_int_t rows, int lazy,
    struct pty **out, enum MHD_Result *ret)
{
	static const char *const argv[] = {"/bin/sh", "-c", shell, NULL};
	struct winsize ws = {(unsigned short)rows, (unsigned short)cols, 0,
	    0};
	int slave = -1, res[2] = {-1, -1}, go[2] = {-1, -1}, n = 0, rc = -1;
	struct pty *p = NULL, *o;
	json_t *env = NULL, *v;
	const char *k, *name;
	struct termios tio;
	struct sbx_err e;

	if (!id || !*id || strlen(id) > 256 || strchr(id, '/')) {
		*ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "id is required");
		return -1;
	}
	if (!size_ok(cols) || !size_ok(rows)) {
		*ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "cols and rows "
		    "are 1 to 1000");
		return -1;
	}
	if (envs && !json_is_null(envs)) {
		if (!json_is_object(envs)) {
			*ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "envs maps "
			    "names to values");
			return -1;
		}
		json_object_foreach((json_t *)envs, k, v)
			if (!json_is_string(v) || !*k || strchr(k, '=')) {
				*ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST",
				    "invalid environment variable '%s'", k);
				return -1;
			}
	}
	pthread_mutex_lock(&pmu);
	for (o = ptys; o; o = o->next)
		if (o->box == r->box && (++n, !strcmp(o->id, id)))
			break;
	pthread_mutex_unlock(&pmu);
	if (o || n >= PTY_MAX) {
		*ret = o ? sbxd_dt_tb_err(r, 409, "CONFLICT", "PTY session %s "
		    "already exists", id) : sbxd_dt_tb_err(r, 400,
		    "BAD_REQUEST", "too many PTY sessions (%d)", PTY_MAX);
		return -1;
	}
	p = sbx_xcalloc(1, sizeof *p);
	p->ch = (struct sbxd_child)SBXD_CHILD_NONE;
	p->master = p->res_fd = -1;
	p->refs = 1;
	p->id = sbx_xstrdup(id);
	p->cwd = cwd && *cwd ? sbx_xstrdup(cwd) : sbxd_dt_work_dir(r->box);
	p->envs = envs && json_is_object(envs) ? json_deep_copy(envs) :
	    json_object();
	p->cols = (int)cols;
	p->rows = (int)rows;
	p->lazy = lazy;
	p->created_ms = sbxd_now_ms();
	if (!(p->box = sbxd_box_get(r->box->id))) {
		*ret = sbxd_dt_tb_err(r, 404, "NOT_FOUND", "sandbox %s not "
		    "found", r->box->id);
		goto out;
	}
	if ((p->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
	    grantpt(p->master) < 0 || unlockpt(p->master) < 0 ||
	    !(name = ptsname(p->master)) ||
	    (slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
	    pipe2(res, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0) {
		*ret = sbxd_dt_tb_err(r, 500, "INTERNAL_SERVER_ERROR", "cannot "
		    "open a pty");
		goto out;
	}
	ioctl(p->master, TIOCSWINSZ, &ws);
	/* Raw: the backend's exec makes the shell's own pty (proc.c). */
	if (tcgetattr(slave, &tio) == 0) {
		cfmakeraw(&tio);
		tcsetattr(slave, TCSANOW, &tio);
	}
	env = json_pack("{s:s}", "TERM", "xterm-256color");
	json_object_update(env, p->envs);
	{
		int fds[5] = {slave, slave, slave, res[1], go[1]};

		if (sbxd_dt_spawn(r->box, argv, p->cwd, env, 0, 1, fds, &p->ch,
		    &e) < 0) {
			*ret = sbxd_dt_tb_err(r, 500, "INTERNAL_SERVER_ERROR",
			    "%s", e.msg);
			goto out;
		}
	}
	p->res_fd = res[0];
	res[0] = -1;
	fcntl(p->res_fd, F_SETFL, O_NONBLOCK);
	fcntl(p->master, F_SETFL, O_NONBLOCK);
	pthread_mutex_lock(&pmu);
	p->refs++;
	p->next = ptys;
	ptys = p;
	pthread_mutex_unlock(&pmu);
	*out = p;
	p = NULL;
	rc = 0;
out:
	if (p)
		pty_put(p);
	if (slave >= 0)
		close(slave);
	if (res[0] >= 0)
		close(res[0]);
	if (res[1] >= 0)
		close(res[1]);
	if (go[0] >= 0)
		close(go[0]);
	if (go[1] >= 0)
		close(go[1]);
	json_decref(env);
	return rc;
}

static enum MHD_Result
h_create(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = sbxd_dt_tb_body(r, &ret);
	struct pty *p;
	char gen[21];

	if (!j)
		return ret;
	sbxd_random_id(gen, 20);
	gen[20] = 0;
	if (pty_new(r, sbx_json_str(j, "id") ? sbx_json_str(j, "id") : gen,
	    sbx_json_str(j, "cwd"), json_object_get(j, "envs"),
	    sbx_json_int(j, "cols", 80), sbx_json_int(j, "rows", 24),
	    json_is_true(json_object_get(j, "lazyStart")), &p, &ret) == 0) {
		ret = sbxd_reply_json(r, 201, json_pack("{s:s}", "sessionId",
		    p->id));
		pty_put(p);
	}
	json_decref(j);
	return ret;
}

static enum MHD_Result
h_list(struct sbxd_req *r)
{
	json_t *a = json_array();
	struct pty *p;

	pthread_mutex_lock(&pmu);
	for (p = ptys; p; p = p->next)
		if (p->box == r->box)
			json_array_append_new(a, pty_json(p));
	pthread_mutex_unlock(&pmu);
	return sbxd_reply_json(r, 200, json_pack("{s:o}", "sessions", a));
}

static enum MHD_Result
h_get(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct pty *p = pty_of(r, &ret);
	json_t *j;

	if (!p)
		return ret;
	pthread_mutex_lock(&pmu);
	j = pty_json(p);
	pthread_mutex_unlock(&pmu);
	pty_put(p);
	return sbxd_reply_json(r, 200, j);
}

/* Out of the list, its shell killed (pmu held): 1, 0 when not in it. */
static int
pty_unlink(struct pty *p)
{
	struct pty **pp;

	for (pp = &ptys; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			sbxd_child_kill(&p->ch, SIGKILL);
			return 1;
		}
	return 0;
}

static enum MHD_Result
h_delete(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct pty *p = pty_of(r, &ret);
	int was;

	if (!p)
		return ret;
	pthread_mutex_lock(&pmu);
	was = pty_unlink(p);
	pthread_mutex_unlock(&pmu);
	if (was)
		pty_put(p);
	pty_put(p);
	return sbxd_reply_json(r, 200, json_pack("{s:s}", "message",
	    "PTY session deleted"));
}

void
sbxd_dt_pty_end_all(struct sbxd_box *b)
{
	struct pty *p, *gone[PTY_MAX * 2];
	size_t n = 0, i;

	pthread_mutex_lock(&pmu);
	for (p = ptys; p && n < sizeof gone / sizeof *gone; p = p->next)
		if (p->box == b)
			gone[n++] = p;
	for (i = 0; i < n; i++)
		pty_unlink(gone[i]);
	pthread_mutex_unlock(&pmu);
	for (i = 0; i < n; i++)
		pty_put(gone[i]);
}

static enum MHD_Result
h_resize(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct pty *p = pty_of(r, &ret);
	json_t *j, *info;
	json_int_t cols, rows;
	struct winsize ws = {0};

	if (!p)
		return ret;
	if (!(j = sbxd_dt_tb_body(r, &ret)))
		goto out;
	cols = sbx_json_int(j, "cols", 0);
	rows = sbx_json_int(j, "rows", 0);
	json_decref(j);
	if (!size_ok(cols) || !size_ok(rows)) {
		ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "cols and rows "
		    "are 1 to 1000");
		goto out;
	}
	ws.ws_col = (unsigned short)cols;
	ws.ws_row = (unsigned short)rows;
	pthread_mutex_lock(&pmu);
	p->cols = (int)cols;
	p->rows = (int)rows;
	ioctl(p->master, TIOCSWINSZ, &ws);
	/* The backend's exec passes the new size on (proc.c). */
	sbxd_child_kill(&p->ch, SIGWINCH);
	info = pty_json(p);
	pthread_mutex_unlock(&pmu);
	ret = sbxd_reply_json(r, 200, info);
out:
	pty_put(p);
	return ret;
}

struct conn {
	struct pty *p;
	int exit_control;      /* the client asked for the exited message */
};

static void
conn_free(void *cls)
{
	struct conn *c = cls;

	pthread_mutex_lock(&pmu);
	c->p->connected = 0;
	pthread_mutex_unlock(&pmu);
	pty_put(c->p);
	free(c);
}

/* The connection: {"type":"control","status":"connected"}, then the
 * pty's output in binary frames and what the client sends as its input,
 * until the shell ends: 1000 (exit 0) or 1011, with the exit as the
 * close's reason (and before it as a control message, when asked). */
static void
conn_run(struct sbxd_ws *w, void *cls)
{
	static const char hello[] = "{\"type\":\"control\",\"status\":"
	    "\"connected\"}";
	struct conn *c = cls;
	struct pty *p = c->p;
	struct sbx_ws_msg m;
	char buf[16384], reason[120];
	ssize_t n;
	int k, done = 0, code, eof = 0;

	if (sbxd_ws_send(w, SBX_WS_TEXT, hello, sizeof hello - 1) < 0)
		goto out;
	for (;;) {
		struct pollfd f[3] = {{eof ? -1 : p->master, POLLIN, 0},
		    {w->fd, POLLIN, 0}, {p->res_fd, POLLIN, 0}};

		k = poll(f, 3, done ? 0 : 1000);
		if (k < 0 && errno != EINTR)
			break;
		if (!eof && (f[0].revents || done)) {
			n = read(p->master, buf, sizeof buf);
			if (n > 0) {
				if (sbxd_ws_send(w, SBX_WS_BINARY, buf,
				    (size_t)n) < 0)
					goto out;
				continue;
			}
			if (n == 0 || (errno != EAGAIN && errno != EINTR))
				eof = 1;
		}
		if (done && (eof || k == 0))
			break;
		while ((k = sbxd_ws_read(w, 0, &m)) > 0)
			if (m.len && sbx_write_all(p->master, m.data,
			    m.len) < 0)
				break;
		if (k < 0)
			goto out;
		if (!done) {
			pthread_mutex_lock(&pmu);
			done = pty_done(p);
			pthread_mutex_unlock(&pmu);
		}
	}
	code = p->exit_code;
	if (c->exit_control) {
		char *s = sbx_xasprintf("{\"type\":\"control\",\"status\":"
		    "\"exited\",\"exitCode\":%d}", code);

		sbxd_ws_send(w, SBX_WS_TEXT, s, strlen(s));
		free(s);
	}
	snprintf(reason, sizeof reason, "{\"exitCode\":%d}", code);
	sbxd_ws_close(w, code ? SBX_WS_ERROR : SBX_WS_NORMAL, reason);
out:
	conn_free(c);
}

static enum MHD_Result
connect_to(struct sbxd_req *r, struct pty *p)
{
	const char *proto = sbxd_header(r, "Sec-WebSocket-Protocol");
	struct conn *c;

	pthread_mutex_lock(&pmu);
	if (p->connected) {
		pthread_mutex_unlock(&pmu);
		pty_put(p);
		return sbxd_dt_tb_err(r, 409, "CONFLICT", "PTY session %s "
		    "already has a connection", p->id);
	}
	p->connected = 1;
	pthread_mutex_unlock(&pmu);
	c = sbx_xcalloc(1, sizeof *c);
	c->p = p;
	c->exit_control = sbxd_ws_has_token(proto, EXIT_CONTROL);
	return sbxd_ws_upgrade(r, EXIT_CONTROL, conn_run, conn_free, c);
}

static enum MHD_Result
h_connect(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct pty *p;

	if (!sbxd_ws_asked(r))
		return sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "a WebSocket "
		    "upgrade is required");
	if (!(p = pty_of(r, &ret)))
		return ret;
	return connect_to(r, p);
}

/* The envs of the subprotocol X-Daytona-Pty-Envs~BASE64URL(JSON). */
static json_t *
proto_envs(const char *proto)
{
	const char *s = proto ? strstr(proto, "X-Daytona-Pty-Envs~") : NULL;
	unsigned char *raw;
	char *b;
	size_t n, i;
	int len;
	json_t *j;

	if (!s)
		return NULL;
	s += strlen("X-Daytona-Pty-Envs~");
	n = strcspn(s, " \t,");
	if (n > 65536)
		return NULL;
	b = sbx_xcalloc(1, n + 4);
	for (i = 0; i < n; i++)
		b[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (i % 4)
		b[i++] = '=';
	raw = sbx_xcalloc(1, n + 4);
	len = EVP_DecodeBlock(raw, (unsigned char *)b, (int)i);
	/* EVP_DecodeBlock counts the padding's zero bytes. */
	while (len > 0 && !raw[len - 1])
		len--;
	j = len > 0 ? json_loadb((char *)raw, (size_t)len, 0, NULL) : NULL;
	free(b);
	free(raw);
	return j;
}

/* GET /process/pty/create-connect?id&cols&rows&cwd: the SDK's create,
 * its envs in a subprotocol. */
static enum MHD_Result
h_create_connect(struct sbxd_req *r)
{
	const char *cols = sbxd_query(r, "cols"), *rows = sbxd_query(r, "rows");
	enum MHD_Result ret;
	json_t *envs;
	struct pty *p;
	long c = 80, w = 24;
	char *e;

	if (!sbxd_ws_asked(r))
		return sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "a WebSocket "
		    "upgrade is required");
	if (cols && (c = strtol(cols, &e, 10), *e || e == cols))
		c = 0;
	if (rows && (w = strtol(rows, &e, 10), *e || e == rows))
		w = 0;
	envs = proto_envs(sbxd_header(r, "Sec-WebSocket-Protocol"));
	if (pty_new(r, sbxd_query(r, "id"), sbxd_query(r, "cwd"), envs, c, w,
	    0, &p, &ret) < 0) {
		json_decref(envs);
		return ret;
	}
	json_decref(envs);
	return connect_to(r, p);
}

const struct sbxd_route sbxd_dt_pty_routes[] = {
	{"POST", "/toolbox/*/process/pty", 0, h_create, NULL},
	{"GET", "/toolbox/*/process/pty", 0, h_list, NULL},
	{"GET", "/toolbox/*/process/pty/create-connect", 0, h_create_connect,
	    NULL},
	{"GET", "/toolbox/*/process/pty/*", 0, h_get, NULL},
	{"DELETE", "/toolbox/*/process/pty/*", 0, h_delete, NULL},
	{"POST", "/toolbox/*/process/pty/*/resize", 0, h_resize, NULL},
	{"GET", "/toolbox/*/process/pty/*/connect", 0, h_connect, NULL},
	{NULL, NULL, 0, NULL, NULL},
};
