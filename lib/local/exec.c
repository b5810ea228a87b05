/* exec.c - sbx-exec's side of a local exec: hand our stdio (or a pty's
 * other end) to the agent, forward signals, and wait for the status */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "execio.h"
#include "local.h"

int sbx_local_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err);

static char *
sandbox_dir(const json_t *ref, struct sbx_err *err)
{
	const char *id = sbx_json_str(ref, "id"), *dir;
	char *found;

	/* The store's own copy first; the ref's dir serves a sandbox made
	 * with another SBX_LOCAL_DIR (connecting checks that it is ours). */
	if (id && (found = sbx_local_find(id, NULL)))
		return found;
	if ((dir = sbx_local_other_dir(ref)))
		return sbx_xstrdup(dir);
	sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' does not exist",
	    id ? id : "?");
	return NULL;
}

/* After a connect to the agent failed (errno): what its status file
 * says, or that its agent did not answer, and how. */
static int
not_running(const char *dir, const char *id, struct sbx_err *err)
{
	int e = errno;
	char *p = sbx_xasprintf("%s/status", dir), buf[64] = "";
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;

	if (fd >= 0)
		close(fd);
	free(p);
	buf[n > 0 ? n : 0] = '\0';
	if (strstr(buf, "expired") || strstr(buf, "killed"))
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is "
		    "%s", id, strstr(buf, "expired") ? "expired" : "killed");
	/* Said whole: a sandbox that runs must never land here. */
	return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is not "
	    "running (its agent: %s)", id, strerror(e));
}

/* One access(2): the exec path stays as short as it was. */
static int
paused(const char *dir)
{
	char p[4096];

	snprintf(p, sizeof p, "%s/" SBX_PAUSED_FILE, dir);
	return access(p, F_OK) == 0;
}

/* Whether a paused sandbox is "paused" or "stopped" (sbx-pause -m stop),
 * from what its mark says. */
static const char *
paused_as(const char *dir)
{
	char p[4096], how[4];
	int fd;
	ssize_t n = 0;

	snprintf(p, sizeof p, "%s/" SBX_PAUSED_FILE, dir);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, how, sizeof how);
		close(fd);
	}
	return n == 4 && !memcmp(how, "stop", 4) ? "stopped" : "paused";
}

static void
reply_error(struct sbx_msg *m, struct sbx_err *err)
{
	const char *msg;
	uint32_t v;

	if (sbx_msg_get_u32(m, &v) < 0 || !(msg = sbx_msg_get_str(m)))
		v = SBX_EX_EXECFAIL, msg = "malformed reply";
	sbx_err_set(err, (int)v, "%s", msg);
}

/* The next reply; an error reply or a lost connection fill err. */
static int
recv_reply(int sock, struct sbx_msg *m, struct sbx_err *err)
{
	if (sbx_msg_recv(sock, m) <= 0)
		return sbx_err_set(err, SBX_EX_EXECFAIL,
		    "lost the connection to the sandbox");
	if (m->type == SBX_MSG_ERROR) {
		reply_error(m, err);
		sbx_msg_release(m);
		return -1;
	}
	return 0;
}

/* A CA added to the sandbox after its create (sbx-net): the variables
 * that a sandbox made with one has for every command (sbx_local_ca_env),
 * but those its --env at create named; the request's own --env on top.
 * NULL without a CA. */
static char **
ca_env(const char *dir, char *const *env)
{
	char *p = sbx_xasprintf("%s/ca.crt", dir), **out;
	json_t *meta, *names, *v;
	size_t n = 0, i, j, k = 0, len;
	int has = access(p, F_OK) == 0;

	free(p);
	if (!has)
		return NULL;
	p = sbx_xasprintf("%s/meta.json", dir);
	meta = json_load_file(p, 0, NULL);
	free(p);
	names = json_object_get(meta, "env_names");
	while (env && env[n])
		n++;
	out = sbx_xcalloc(SBX_LOCAL_CA_ENV + n + 1, sizeof *out);
	for (i = 0; i < SBX_LOCAL_CA_ENV; i++) {
		len = strcspn(sbx_local_ca_env[i], "=");
		json_array_foreach(names, j, v)
			if (json_is_string(v) && strlen(json_string_value(v)) ==
			    len && !strncmp(json_string_value(v),
			    sbx_local_ca_env[i], len))
				break;
		if (j == json_array_size(names))
			out[k++] = (char *)sbx_local_ca_env[i];
	}
	for (i = 0; i < n; i++)
		out[k++] = env[i];
	json_decref(meta);
	return out;
}

static int
build_request(struct sbx_buf *b, char *const argv[],
    const struct sbx_exec_opts *o, uint32_t flags)
{
	struct winsize ws = {0, 0, 0, 0};
	uint32_t argc = 0, envc = 0;

	while (argv[argc])
		argc++;
	while (o->env && o->env[envc])
		envc++;
	if (o->tty)
		sbx_xs_winsize(&ws);
	sbx_msg_put_u32(b, flags);
	sbx_msg_put_u64(b, o->timeout_ms);
	sbx_msg_put_u32(b, ws.ws_row);
	sbx_msg_put_u32(b, ws.ws_col);
	sbx_msg_put_u32(b, argc);
	sbx_msg_put_u32(b, envc);
	sbx_msg_put_str(b, o->cwd ? o->cwd : "");
	sbx_msg_put_str(b, o->tty ? sbx_xs_term() : "");
	for (argc = 0; argv[argc]; argc++)
		sbx_msg_put_str(b, argv[argc]);
	for (envc = 0; o->env && o->env[envc]; envc++)
		sbx_msg_put_str(b, o->env[envc]);
	if (flags & SBX_EXEC_USER)
		sbx_msg_put_str(b, o->user);
	return b->len > SBX_MSG_MAX ? -1 : 0;
}

/* --- the transport: the agent's socket, our fds passed over it ---------- */

struct lx {
	const char *dir, *id;
	int (*connect)(const char *dir);
	struct sbx_buf req;
	int sock, master, null, procs_fd, kill_fd;
	int outp[2], errp[2];
	int fds[SBX_MSG_FDS], nfds;
	int status, timed_out;
	int canon; /* the pty's ICANON at our stdin's end, then; -1 before */
};

/* The request to the agent. The agent gives a connection 2 s for its
 * request, then drops it (a stuck client must not stall it): a request
 * that found its connection dropped never reached the agent, so it goes
 * again on a new one. That is no sign of a sandbox that is not running:
 * only a connect that fails is. */
#define SEND_TRIES 3
static int
lx_send(struct lx *x, struct sbx_err *err)
{
	int i;

	for (i = 0; i < SEND_TRIES; i++) {
		if (x->sock < 0 && (x->sock = x->connect(x->dir)) < 0)
			return not_running(x->dir, x->id, err);
		if (sbx_msg_send(x->sock, SBX_MSG_EXEC, x->req.data, x->req.len,
		    x->fds, x->nfds) == 0)
			return 0;
		if (errno != EPIPE && errno != ECONNRESET)
			break;
		close(x->sock);
		x->sock = -1;
	}
	return sbx_err_set(err, SBX_EX_EXECFAIL,
	    "cannot send the command to the sandbox:");
}

static int
lx_start(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct lx *x = t;
	struct sbx_msg m = {0};

	if (lx_send(x, err) < 0)
		return -1;
	if (x->outp[1] >= 0) {
		close(x->outp[1]);
		close(x->errp[1]);
		x->outp[1] = x->errp[1] = -1;
		sbx_xs_add_output(xs, x->outp[0], 1);
		sbx_xs_add_output(xs, x->errp[0], 2);
	}
	if (!xs->o->tty)
		return 0;
	/* Only a pty needs a reply before the end: its master. */
	if (recv_reply(x->sock, &m, err) < 0)
		return -1;
	if (m.type != SBX_MSG_STARTED || m.nfds != 1) {
		sbx_msg_release(&m);
		return sbx_err_set(err, SBX_EX_EXECFAIL, "no pty from sandbox");
	}
	x->master = m.fds[0];
	m.nfds = 0;
	sbx_msg_release(&m);
	sbx_xs_add_output(xs, x->master, 1);
	return 0;
}

static int
lx_fds(void *t, struct pollfd *p, long long *wake)
{
	struct lx *x = t;

	(void)wake;
	p[0] = (struct pollfd){x->sock, POLLIN, 0};
	return 1;
}

/* The pty's end-of-file character, sent when its ICANON is now on (1) or
 * off (0), -1 when it cannot tell. */
static int
pty_eof(int master)
{
	struct termios tio;
	unsigned char c;

	if (tcgetattr(master, &tio) < 0)
		return -1;
	c = tio.c_cc[VEOF] != _POSIX_VDISABLE ? tio.c_cc[VEOF] : 4;
	if (sbx_write_all(master, &c, 1) < 0)
		return -1;
	return !!(tio.c_lflag & ICANON);
}

/* After our stdin's end, the command's terminal stays at its end, as
 * one where ^D was typed: a ^D that came in one mode is no end in the
 * other (canonical, it becomes a NUL that a line editor in raw mode
 * reads, and bash waited at its prompt), so each change of mode gets one
 * more. Seen when the command wrote, as a line editor does once raw. */
static void
pty_eof_again(struct lx *x)
{
	struct termios tio;

	if (x->canon < 0 || tcgetattr(x->master, &tio) < 0 ||
	    !!(tio.c_lflag & ICANON) == x->canon)
		return;
	x->canon = pty_eof(x->master);
}

static int
lx_ready(void *t, struct sbx_xs *xs, const struct pollfd *p, int n,
    struct sbx_err *err)
{
	struct lx *x = t;
	struct sbx_msg m = {0};
	uint32_t v;

	(void)n;
	if (x->master >= 0)
		pty_eof_again(x);
	if (!p[0].revents)
		return 0;
	if (recv_reply(x->sock, &m, err) < 0)
		return -1;
	if (m.type == SBX_MSG_EXIT && !sbx_msg_get_u32(&m, &v)) {
		x->status = (int)v;
		if (!sbx_msg_get_u32(&m, &v))
			x->timed_out = (int)v;
		sbx_xs_done(xs);
	}
	sbx_msg_release(&m);
	return 0;
}

/* With a pty only: the rest of stdin was passed as fd 0. */
static int
lx_input(void *t, struct sbx_xs *xs, const char *p, size_t n)
{
	struct lx *x = t;

	(void)xs;
	return sbx_write_all(x->master, p, n);
}

/* Our stdin's end: the pty's own ^D, and again at each change of mode
 * (pty_eof_again). */
static void
lx_tty_eof(void *t)
{
	struct lx *x = t;

	x->canon = pty_eof(x->master);
}

static void
lx_signal(void *t, int sig)
{
	struct lx *x = t;
	struct sbx_buf b = SBX_BUF_INIT;

	sbx_msg_put_u32(&b, (uint32_t)sig);
	sbx_msg_send(x->sock, SBX_MSG_SIGNAL, b.data, b.len, NULL, 0);
	sbx_buf_release(&b);
}

static void
lx_resize(void *t)
{
	struct lx *x = t;
	struct winsize ws;

	if (x->master >= 0 && sbx_xs_winsize(&ws) == 0)
		ioctl(x->master, TIOCSWINSZ, &ws);
}

static int
lx_finish(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct lx *x = t;

	(void)err;
	if (x->timed_out)
		sbx_xs_end(xs->res, SBX_XS_TIMEDOUT, 0);
	else if (WIFSIGNALED(x->status))
		sbx_xs_end(xs->res, SBX_XS_KILLED, WTERMSIG(x->status));
	else
		sbx_xs_end(xs->res, SBX_XS_EXITED, WEXITSTATUS(x->status));
	return 0;
}

static const struct sbx_xs_transport lx_transport = {
	.signals = SBX_XS_SIGS_END | SBX_XS_SIG(SIGUSR1) | SBX_XS_SIG(SIGUSR2),
	.flags = SBX_XS_PASS_STDIO, /* the agent has no deadline to be kept */
	.start = lx_start,
	.fds = lx_fds,
	.ready = lx_ready,
	.input = lx_input,
	.signal = lx_signal,
	.tty_eof = lx_tty_eof,
	.resize = lx_resize,
	.finish = lx_finish,
};

/* /dev/null, opened once, for an fd of ours that is closed or that the
 * sandbox must not get; -1 (errno) if it cannot be opened. */
static int
dev_null(struct lx *x)
{
	if (x->null < 0)
		x->null = open("/dev/null", O_RDWR | O_CLOEXEC);
	return x->null;
}

/* Our fd as the command's: itself, or /dev/null in place of a directory
 * (an fd of the host's tree would let the command walk it past every
 * mount of the sandbox: openat(fd, "..")). Through the docker engine's
 * exec such a stdin reads as empty too. */
static int
passable(struct lx *x, int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
		return dev_null(x);
	return fd;
}

/* An exec through the agent of dir: a local sandbox's (local: its
 * cgroup, its CA), or with sock connected already, one of another
 * backend's. std_open: which of our fds 0-2 are open, as sbx_xs_init
 * judged them before sock was made (-1: judged here). */
static int
agent_exec(const char *dir, const char *id, int local, int sock,
    int (*connect)(const char *dir), int std_open, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err)
{
	struct lx x = {.sock = sock, .master = -1, .null = -1, .procs_fd = -1,
	    .canon = -1,
	    .kill_fd = -1, .outp = {-1, -1}, .errp = {-1, -1},
	    .req = SBX_BUF_INIT, .dir = dir, .id = id, .connect = connect};
	char *cgdir = NULL, **caenv = NULL;
	struct sbx_cgroups cg = {0};
	struct sbx_exec_opts oc;
	struct sbx_xs xs;
	uint32_t flags = 0;
	int rc = -1;
	size_t i;

	sbx_xs_init(&xs, o, res, &lx_transport, &x);
	if (std_open >= 0)
		xs.std_open = std_open;
	if (o->tty)
		flags |= SBX_EXEC_TTY;
	if (!o->tty) {
		if (o->interactive && (xs.std_open & 1)) {
			flags |= SBX_EXEC_STDIN;
			if ((x.fds[x.nfds++] = passable(&x, 0)) < 0)
				goto no_null;
		}
		if (o->capture) {
			if (pipe2(x.outp, O_CLOEXEC) < 0 ||
			    pipe2(x.errp, O_CLOEXEC) < 0) {
				sbx_err_set(err, SBX_EX_EXECFAIL,
				    "cannot create pipes:");
				goto out;
			}
			x.fds[x.nfds++] = x.outp[1];
			x.fds[x.nfds++] = x.errp[1];
		} else {
			for (i = 1; i <= 2; i++)
				if ((x.fds[x.nfds++] = xs.std_open & (1 << i) ?
				    passable(&x, (int)i) : dev_null(&x)) < 0)
					goto no_null;
		}
	}
	if (o->timeout_ms && local) {
		/* A cgroup of its own lets the timeout reach every process
		 * the command starts, even those that leave its session. */
		/* By the directory's name: the ref may hold a name. */
		sbx_cg_find(&cg, strrchr(dir, '/') + 1);
		if ((cgdir = sbx_cg_exec_new(&cg, &x.procs_fd, &x.kill_fd))) {
			flags |= SBX_EXEC_CGROUP;
			x.fds[x.nfds++] = x.procs_fd;
			x.fds[x.nfds++] = x.kill_fd;
		}
	}
	if (local && (caenv = ca_env(dir, o->env))) {
		oc = *o;
		oc.env = caenv;
		o = &oc;
	}
	if (o->user)
		flags |= SBX_EXEC_USER;
	if (build_request(&x.req, argv, o, flags) < 0) {
		sbx_err_set(err, SBX_EX_EXECFAIL, "command line too long");
		goto out;
	}
	/* Connected last, by lx_send, the request ready and our signals
	 * set up: the agent waits 2 s on a connection for its request, and
	 * what comes before it here (a cgroup's mkdir, under load) need not
	 * be that quick; and the agent, woken by the connect, finds the
	 * request there already instead of going back to sleep for it. */
	rc = sbx_xs_run(&xs, err);
	/* The command wrote to the caller's fds itself: not through us. */
	if (!o->tty && !o->capture)
		res->bytes_unknown = 1;
	goto out;
no_null:
	sbx_err_set(err, SBX_EX_EXECFAIL, "cannot open /dev/null:");
out:
	{
		int all[] = {x.sock, x.null, x.master, x.outp[0], x.outp[1],
		    x.errp[0], x.errp[1], x.procs_fd, x.kill_fd};

		for (i = 0; i < sizeof all / sizeof all[0]; i++)
			if (all[i] >= 0)
				close(all[i]);
	}
	if (cgdir)
		sbx_cg_exec_free(cgdir, x.timed_out);
	sbx_cg_release(&cg);
	sbx_buf_release(&x.req);
	free(caenv);
	return rc;
}

int
sbx_local_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err)
{
	const char *id = sbx_json_str(ref, "id");
	char *dir;
	int rc;

	if (!(dir = sandbox_dir(ref, err))) {
		*res = (struct sbx_exec_result){0};
		return -1;
	}
	if (paused(dir)) {
		*res = (struct sbx_exec_result){0};
		sbx_xs_paused(err, id, paused_as(dir));
		free(dir);
		return -1;
	}
	rc = agent_exec(dir, id, 1, -1, sbx_local_connect, -1, argv, o, res,
	    err);
	free(dir);
	return rc;
}

int
sbx_agent_exec(const char *dir, const char *id, int sock,
    int (*connect)(const char *dir), int std_open, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err)
{
	return agent_exec(dir, id, 0, sock, connect, std_open, argv, o, res,
	    err);
}

int sbx_local_shell(const json_t *ref, const struct sbx_shell_req *rq,
    json_t **out, struct sbx_err *err);

int
sbx_local_shell(const json_t *ref, const struct sbx_shell_req *rq,
    json_t **out, struct sbx_err *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	const char *id = sbx_json_str(ref, "id");
	struct sbx_msg m = {0};
	char *dir;
	int sock = -1, rc = -1;

	*out = NULL;
	if (!(dir = sandbox_dir(ref, err)))
		return -1;
	if (paused(dir)) {
		sbx_xs_paused(err, id, paused_as(dir));
		goto out;
	}
	if ((sock = sbx_local_connect(dir)) < 0) {
		not_running(dir, id, err);
		goto out;
	}
	sbx_shell_frame(&b, rq);
	if (sbx_msg_send(sock, SBX_MSG_SHELL, b.data, b.len, NULL, 0) < 0 ||
	    sbx_msg_recv(sock, &m) <= 0 || m.type != SBX_MSG_SHELLREP) {
		sbx_err_set(err, SBX_EX_FAIL, "lost the connection to the "
		    "sandbox");
		goto out;
	}
	rc = sbx_shell_answer(&m, rq->op, out, err);
out:
	sbx_msg_release(&m);
	sbx_buf_release(&b);
	if (sock >= 0)
		close(sock);
	free(dir);
	return rc;
}
