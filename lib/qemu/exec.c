/* exec.c - sbx-exec on a qemu sandbox: the exec session (execio.h) over
 * the keeper's socket, whose frames are the guest's (guest.h): stdin in
 * IN frames, the output in OUT frames, signals, the exit status. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "execio.h"
#include "msg.h"
#include "qemu.h"

/* The one command of a connection. */
#define CMD_ID 1u
/* Our stdin is not read while more than this waits to go. */
#define OUT_MAX (256u << 10)

struct qx {
	int fd;
	const char *id;
	const char *dir;
	long long suspended; /* sbx_qemu_suspended_ms() at the start */
	char *const *argv;
	const char *cwd;
	json_t *meta;
	struct sbx_xs *xs;
	struct sbx_buf out; /* frames to the keeper */
	struct sbx_buf in;  /* what came, to a frame's end */
	int exited;
	uint32_t status, stage, errnum;
	char why[256];       /* a start's refusal, said by the guest */
	struct sbx_err *err; /* ready()'s, for guest_frame */
	int failed;          /* guest_frame set it */
};

/* A frame of the command's: IN (p, n), SIGNAL (a), WINCH (a, b). */
static void
small(struct qx *x, uint32_t type, uint32_t a, uint32_t b2, const void *p,
    size_t n)
{
	struct sbx_buf b = SBX_BUF_INIT;

	sbx_msg_put_u32(&b, CMD_ID);
	if (type == SBX_GUEST_SIGNAL || type == SBX_GUEST_WINCH)
		sbx_msg_put_u32(&b, a);
	if (type == SBX_GUEST_WINCH)
		sbx_msg_put_u32(&b, b2);
	if (n)
		sbx_buf_add(&b, p, n);
	sbx_qemu_frame_put(&x->out, type, b.data, b.len);
	sbx_buf_release(&b);
}

static int
qx_start(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct qx *x = t;
	struct sbx_buf b = SBX_BUF_INIT;
	json_t *env = json_object_get(x->meta, "env"), *v;
	const char *user;
	uint32_t flags = 0, n = 0;
	size_t i;
	int ca;

	(void)err;
	if (sbx_xs_forwards_input(xs))
		flags |= SBX_GUEST_X_STDIN;
	if (!xs->o->cwd)
		flags |= SBX_GUEST_X_MKDIR;
	if (xs->o->tty)
		flags |= SBX_GUEST_X_TTY;
	/* -u, else the image's User. */
	user = xs->o->user ? xs->o->user : sbx_json_str(x->meta, "user");
	if (user)
		flags |= SBX_GUEST_X_USER;
	sbx_msg_put_u32(&b, CMD_ID);
	sbx_msg_put_u32(&b, flags);
	sbx_msg_put_str(&b, x->cwd);
	for (i = 0; xs->o->env && xs->o->env[i]; i++)
		n++;
	ca = json_is_true(json_object_get(x->meta, "ca"));
	sbx_msg_put_u32(&b, (uint32_t)(json_array_size(env) + 2 + n +
	    (ca ? SBX_LOCAL_CA_ENV : 0) +
	    (xs->o->tty ? 1 : 0)));
	/* As on every backend, a UTF-8 locale unless the image says; with
	 * a pty the caller's TERM, unless -e says. */
	sbx_msg_put_str(&b, "LANG=C.UTF-8");
	/* Header injection: what points clients that do not read
	 * /etc/ssl/certs at the VM's CA, before the image's Env and -e,
	 * which may replace them. */
	for (i = 0; ca && i < SBX_LOCAL_CA_ENV; i++)
		sbx_msg_put_str(&b, sbx_local_ca_env[i]);
	if (xs->o->tty) {
		char *term = sbx_xasprintf("TERM=%s", sbx_xs_term());

		sbx_msg_put_str(&b, term);
		free(term);
	}
	json_array_foreach(env, i, v)
		sbx_msg_put_str(&b, json_is_string(v) ? json_string_value(v) :
		    "SBX_BAD_ENV=");
	/* Where the guest puts sbx-create's --env, which it keeps. */
	sbx_msg_put_str(&b, "=");
	for (i = 0; i < n; i++)
		sbx_msg_put_str(&b, xs->o->env[i]);
	for (n = 0; x->argv[n]; n++)
		;
	sbx_msg_put_u32(&b, n);
	for (i = 0; i < n; i++)
		sbx_msg_put_str(&b, x->argv[i]);
	if (xs->o->tty) {
		struct winsize ws;

		sbx_xs_winsize(&ws);
		sbx_msg_put_u32(&b, ws.ws_row);
		sbx_msg_put_u32(&b, ws.ws_col);
	}
	if (user)
		sbx_msg_put_str(&b, user);
	sbx_qemu_frame_put(&x->out, SBX_GUEST_EXEC, b.data, b.len);
	sbx_buf_release(&b);
	return 0;
}

static int
qx_fds(void *t, struct pollfd *p, long long *wake)
{
	struct qx *x = t;

	(void)wake;
	p[0] = (struct pollfd){.fd = x->fd, .events = POLLIN |
	    (x->out.len ? POLLOUT : 0)};
	return 1;
}

/* A frame of the guest's; -1 with err on one that ends it all. */
static int
guest_frame(void *arg, uint32_t type, const char *p, size_t n)
{
	struct qx *x = arg;
	uint32_t w[4] = {0, 0, 0, 0};

	memcpy(w, p, n < sizeof w ? n : sizeof w);
	if (type == SBX_GUEST_OUT && n >= 8) {
		sbx_xs_output(x->xs, w[1] == 2 ? 2 : 1, p + 8, n - 8);
	} else if (type == SBX_GUEST_EXIT && n >= 8 && w[0] == CMD_ID) {
		x->exited = 1;
		x->status = w[1];
		if (n >= 16) {
			x->stage = w[2];
			x->errnum = w[3];
			snprintf(x->why, sizeof x->why, "%.*s", (int)(n - 16),
			    p + 16);
		}
		sbx_xs_done(x->xs);
	} else if (type == SBX_GUEST_ERROR) {
		x->failed = 1;
		return sbx_err_set(x->err, SBX_EX_EXECFAIL, "the sandbox's agent "
		    "refused the command: %.*s", (int)(n < 200 ? n : 200), p);
	}
	return 0;
}

static int
qx_ready(void *t, struct sbx_xs *xs, const struct pollfd *p, int n,
    struct sbx_err *err)
{
	struct qx *x = t;
	char buf[65536];
	ssize_t r;

	(void)n;
	if (x->out.len && (p[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
		r = send(x->fd, x->out.data, x->out.len, MSG_NOSIGNAL |
		    MSG_DONTWAIT);
		if (r > 0) {
			memmove(x->out.data, x->out.data + r, x->out.len -
			    (size_t)r);
			x->out.len -= (size_t)r;
		}
		if (x->out.len < OUT_MAX)
			sbx_xs_hold_input(xs, 0);
	}
	if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
		return 0;
	r = read(x->fd, buf, sizeof buf);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (r <= 0)
		return sbx_xs_vanished(err, x->id, x->argv[0]);
	sbx_buf_add(&x->in, buf, (size_t)r);
	x->err = err;
	x->failed = 0;
	if (sbx_qemu_frames_take(&x->in, guest_frame, x) == 0)
		return 0;
	if (!x->failed)
		sbx_err_set(err, SBX_EX_EXECFAIL, "a frame of more than %u "
		    "bytes from the sandbox's agent", SBX_MSG_MAX);
	return -1;
}

static int
qx_input(void *t, struct sbx_xs *xs, const char *p, size_t n)
{
	struct qx *x = t;

	small(x, SBX_GUEST_IN, 0, 0, p, n);
	if (x->out.len >= OUT_MAX)
		sbx_xs_hold_input(xs, 1);
	return 0;
}

static void
qx_signal(void *t, int sig)
{
	small(t, SBX_GUEST_SIGNAL, (uint32_t)sig, 0, NULL, 0);
}

static void
qx_resize(void *t)
{
	struct winsize ws;

	if (sbx_xs_winsize(&ws) == 0)
		small(t, SBX_GUEST_WINCH, ws.ws_row, ws.ws_col, NULL, 0);
}

static int
qx_expire(void *t, struct sbx_err *err)
{
	(void)err;
	small(t, SBX_GUEST_SIGNAL, SIGKILL, 0, NULL, 0);
	return 0;
}

static int
qx_finish(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct qx *x = t;
	struct sbx_exec_result *res = xs->res;
	int st = (int)x->status;

	if (!x->exited)
		return sbx_xs_vanished(err, x->id, x->argv[0]);
	if (x->stage == SBX_GUEST_START_EXEC)
		return sbx_xs_start_fail(err, x->errnum == ENOENT ?
		    SBX_XS_START_NOTFOUND : x->errnum == EACCES ||
		    x->errnum == ENOEXEC ? SBX_XS_START_NOEXEC :
		    SBX_XS_START_OTHER, x->argv[0], strerror((int)x->errnum));
	if (x->stage == SBX_GUEST_START_USER)
		return sbx_err_set(err, SBX_EX_EXECFAIL, "%s", *x->why ? x->why :
		    strerror((int)x->errnum));
	if (x->stage == SBX_GUEST_START_WORKDIR)
		return sbx_err_set(err, SBX_EX_EXECFAIL, "cannot start '%s': "
		    "workdir '%s': %s", x->argv[0], x->cwd,
		    strerror((int)x->errnum));
	if (x->stage)
		return sbx_xs_start_fail(err, SBX_XS_START_OTHER, x->argv[0],
		    strerror((int)x->errnum));
	if (res->timed_out)
		sbx_xs_end(res, SBX_XS_TIMEDOUT, 0);
	else if (WIFSIGNALED(st))
		sbx_xs_end(res, SBX_XS_KILLED, WTERMSIG(st));
	else
		sbx_xs_end(res, SBX_XS_EXITED, WEXITSTATUS(st));
	return 0;
}

/* The time the VM was suspended since the command started, which -T
 * does not count, as on local. */
static long long
qx_paused_ms(void *t)
{
	struct qx *x = t;

	return sbx_qemu_suspended_ms(x->dir) - x->suspended;
}

static const struct sbx_xs_transport qx_transport = {
	.signals = SBX_XS_SIGS_END,
	/* The keeper never ends a command at a deadline: we kill it. */
	.flags = SBX_XS_DEADLINE,
	.start = qx_start,
	.fds = qx_fds,
	.ready = qx_ready,
	.input = qx_input,
	.signal = qx_signal,
	.resize = qx_resize,
	.expire = qx_expire,
	.paused_ms = qx_paused_ms,
	.finish = qx_finish,
};

int
sbx_qemu_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	struct qx x = {.fd = -1, .argv = argv, .out = SBX_BUF_INIT,
	    .in = SBX_BUF_INIT};
	struct sbx_xs xs;
	char *id = NULL, *dir;
	pid_t kp, qp;
	int rc = -1, how;

	sbx_xs_init(&xs, o, res, &qx_transport, &x);
	if (!want || !(dir = sbx_local_find_in(sbx_qemu_root(), want, &id)))
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
	x.id = id;
	x.xs = &xs;
	x.meta = sbx_local_meta(dir);
	/* Paused: at once, not after a wait on a VM that does not run. */
	if ((how = sbx_local_paused(dir, NULL))) {
		sbx_xs_paused(err, id, how == 't' ? "stopped" : "paused");
		goto out;
	}
	sbx_qemu_pids(dir, &kp, &qp);
	if (!kp || !qp || !x.meta || (x.fd = sbx_local_connect(dir)) < 0) {
		json_t *info = sbx_backend_find("qemu")->ops->info(ref, err);

		sbx_xs_not_running(err, id, info ? sbx_json_str(info,
		    "status") : "gone");
		json_decref(info);
		goto out;
	}
	fcntl(x.fd, F_SETFL, O_NONBLOCK);
	x.dir = dir;
	x.suspended = sbx_qemu_suspended_ms(dir);
	x.cwd = o->cwd ? o->cwd : sbx_json_str(x.meta, "workdir");
	if (!x.cwd)
		x.cwd = "/";
	rc = sbx_xs_run(&xs, err);
out:
	if (x.fd >= 0)
		close(x.fd);
	sbx_buf_release(&x.out);
	sbx_buf_release(&x.in);
	json_decref(x.meta);
	free(dir);
	free(id);
	return rc;
}
