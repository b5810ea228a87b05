/* execio.c - one exec session for every backend: the caller's terminal,
 * stdin, signals, output, the deadline and the exit status, around a
 * backend's transport (execio.h) */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "execio.h"

#define CHUNK 65536 /* what one read of stdin or of an output takes */

void
sbx_xs_init(struct sbx_xs *xs, const struct sbx_exec_opts *o,
    struct sbx_exec_result *res, const struct sbx_xs_transport *tp, void *t)
{
	memset(xs, 0, sizeof *xs);
	memset(res, 0, sizeof *res);
	xs->o = o;
	xs->res = res;
	xs->tp = tp;
	xs->t = t;
	xs->t0 = sbx_mono_ms();
	/* Judged now: a closed fd 0, 1 or 2 would be the first the backend
	 * opens (its socket, which must never pass for our stdio). */
	xs->std_open = (fcntl(0, F_GETFD) >= 0) |
	    (fcntl(1, F_GETFD) >= 0) << 1 | (fcntl(2, F_GETFD) >= 0) << 2;
	xs->in_state = sbx_xs_forwards_input(xs) ? 0 : 2;
	xs->outs[0] = xs->outs[1] = xs->outs[2] = -1;
	xs->sfd = -1;
	res->out.limit = o->max_output;
	res->err.limit = o->max_output;
}

int
sbx_xs_forwards_input(const struct sbx_xs *xs)
{
	if (xs->o->tty)
		return 1;
	return xs->o->interactive && !(xs->tp->flags & SBX_XS_PASS_STDIO);
}

void
sbx_xs_output(struct sbx_xs *xs, int stream, const void *p, size_t n)
{
	stream = stream == 2 ? 2 : 1;
	if (stream == 2)
		xs->res->bytes_err += n;
	else
		xs->res->bytes_out += n;
	if (xs->o->capture) {
		sbx_buf_add(stream == 2 ? &xs->res->err : &xs->res->out, p, n);
		return;
	}
	if (!xs->out_dead[stream] && sbx_write_all(stream, p, n) < 0)
		xs->out_dead[stream] = 1;
}

void
sbx_xs_add_output(struct sbx_xs *xs, int fd, int stream)
{
	size_t i;

	for (i = 0; i < 3; i++)
		if (xs->outs[i] < 0) {
			xs->outs[i] = fd;
			xs->out_stream[i] = stream;
			return;
		}
}

void
sbx_xs_hold_input(struct sbx_xs *xs, int hold)
{
	if (xs->in_state < 2)
		xs->in_state = hold ? 1 : 0;
}

void
sbx_xs_done(struct sbx_xs *xs)
{
	xs->done = 1;
}

int
sbx_xs_winsize(struct winsize *ws)
{
	if ((ioctl(1, TIOCGWINSZ, ws) == 0 && ws->ws_row && ws->ws_col) ||
	    (ioctl(0, TIOCGWINSZ, ws) == 0 && ws->ws_row && ws->ws_col))
		return 0;
	memset(ws, 0, sizeof *ws);
	return -1;
}

const char *
sbx_xs_term(void)
{
	const char *t = getenv("TERM");

	return t && *t ? t : "xterm";
}

void
sbx_xs_end(struct sbx_exec_result *res, enum sbx_xs_how how, int n)
{
	res->signal = 0;
	res->timed_out = how == SBX_XS_TIMEDOUT;
	if (how == SBX_XS_TIMEDOUT) {
		res->exit_code = SBX_EX_TIMEOUT;
	} else if (how == SBX_XS_KILLED) {
		res->signal = n;
		res->exit_code = 128 + n;
	} else {
		res->exit_code = n & 255;
	}
}

void
sbx_xs_end_status(struct sbx_exec_result *res, long long code)
{
	if (code > 128 && code < 128 + 65)
		sbx_xs_end(res, SBX_XS_KILLED, (int)code - 128);
	else
		sbx_xs_end(res, SBX_XS_EXITED, (int)(code & 255));
}

enum sbx_xs_why
sbx_xs_start_why(const char *t)
{
	/* runc: "chdir to cwd ... failed"; runsc: "failed to find initial
	 * working directory"; envd: "cwd '/x' does not exist"; sbxd:
	 * "cannot change directory to '/x': ...". Before the command's:
	 * they may say "no such file" too. */
	if (strstr(t, "chdir") || strstr(t, "initial working directory") ||
	    strstr(t, "cwd ") || strstr(t, "cannot change directory"))
		return SBX_XS_START_WORKDIR;
	if (strcasestr(t, "not found") || strcasestr(t, "no such file"))
		return SBX_XS_START_NOTFOUND;
	if (strcasestr(t, "permission denied"))
		return SBX_XS_START_NOEXEC;
	return SBX_XS_START_OTHER;
}

int
sbx_xs_start_fail(struct sbx_err *err, enum sbx_xs_why why, const char *cmd,
    const char *detail)
{
	if (why == SBX_XS_START_NOTFOUND)
		return sbx_err_set(err, SBX_EX_NOTFOUND, "'%s': No such file "
		    "or directory", cmd);
	if (why == SBX_XS_START_NOEXEC)
		return sbx_err_set(err, SBX_EX_NOEXEC, "'%s': Permission "
		    "denied", cmd);
	return sbx_err_set(err, SBX_EX_EXECFAIL, "cannot start '%s': %s", cmd,
	    detail);
}

int
sbx_xs_paused(struct sbx_err *err, const char *id, const char *how)
{
	return sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%s' is %s "
	    "(sbx-exec --resume, or sbx-pause --resume)", id, how);
}

int
sbx_xs_not_running(struct sbx_err *err, const char *id, const char *state)
{
	return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is %s", id,
	    state);
}

int
sbx_xs_vanished(struct sbx_err *err, const char *id, const char *cmd)
{
	return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s': it went "
	    "away while '%s' ran", id, cmd);
}

/* --- a guard ------------------------------------------------------------- */

static void __attribute__((noreturn))
guard_main(int sock, const sigset_t *old, void (*kill)(void *),
    void (*job)(void *), void *arg)
{
	static const int quiet[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
	char c;
	size_t i;
	ssize_t n;
	int null;

	setsid();
	for (i = 0; i < sizeof quiet / sizeof quiet[0]; i++)
		signal(quiet[i], SIG_IGN);
	sigprocmask(SIG_SETMASK, old, NULL);
	/* Holding none of the caller's pipes: a reader sees our EOF. */
	if ((null = open("/dev/null", O_RDWR)) >= 0)
		for (i = 0; i < 3; i++)
			dup2(null, (int)i);
	if (dup2(sock, 3) < 0)
		_exit(0);
	close_range(4, ~0U, 0);
	/* "k" once the command ended, "j" with the job to do; EOF: we
	 * died. (Gone already is as good.) */
	while ((n = read(3, &c, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		kill(arg);
	if (n == 1 && c == 'j' && job && fork() == 0) {
		/* We end at once: our parent waits no longer. */
		close(3);
		job(arg);
	}
	_exit(0);
}

void
sbx_xs_guard_start(struct sbx_xs_guard *g, const sigset_t *old,
    void (*kill)(void *), void *arg)
{
	int sv[2];

	g->fd = -1;
	g->pid = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	fflush(NULL);
	if ((g->pid = fork()) == 0) {
		close(sv[0]);
		guard_main(sv[1], old, kill, g->job, arg);
	}
	close(sv[1]);
	if (g->pid > 0)
		g->fd = sv[0];
	else
		close(sv[0]);
}

void
sbx_xs_guard_stop(struct sbx_xs_guard *g)
{
	if (g->fd >= 0) {
		if (write(g->fd, "k", 1) < 0) {
		}
		close(g->fd);
		g->fd = -1;
	}
	if (g->pid > 0)
		while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR)
			;
	g->pid = -1;
}

int
sbx_xs_guard_leave(struct sbx_xs_guard *g)
{
	if (g->fd < 0 || g->pid <= 0 || !g->job)
		return -1;
	if (write(g->fd, "j", 1) != 1) {
		sbx_xs_guard_stop(g);
		return -1;
	}
	close(g->fd);
	g->fd = -1;
	while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR)
		;
	g->pid = -1;
	return 0;
}

/* --- the loop ------------------------------------------------------------- */

static void
signals_block(struct sbx_xs *xs)
{
	int s;

	sigemptyset(&xs->sigs);
	/* Captured, a tool's own use of the sandbox (a stats reading, a
	 * transfer): its signals are its caller's, which a reading must not
	 * swallow (sbx-stats -f ends on SIGINT); its guard ends the command
	 * should the caller die of one. */
	if (xs->o->capture) {
		sigprocmask(SIG_BLOCK, &xs->sigs, &xs->old);
		return;
	}
	sigaddset(&xs->sigs, SIGWINCH);
	for (s = 1; s < 64; s++)
		if (xs->tp->signals & SBX_XS_SIG(s))
			sigaddset(&xs->sigs, s);
	/* pthread_sigmask's rule for one thread; threads a transport
	 * starts later inherit it. */
	sigprocmask(SIG_BLOCK, &xs->sigs, &xs->old);
	xs->sfd = signalfd(-1, &xs->sigs, SFD_CLOEXEC | SFD_NONBLOCK);
}

static void
term_raw(struct sbx_xs *xs)
{
	struct termios r;

	if (!xs->o->tty || !isatty(0) || tcgetattr(0, &xs->saved) < 0)
		return;
	r = xs->saved;
	cfmakeraw(&r);
	xs->raw = tcsetattr(0, TCSADRAIN, &r) == 0;
}

static void
signals_read(struct sbx_xs *xs)
{
	struct signalfd_siginfo si;

	while (read(xs->sfd, &si, sizeof si) == sizeof si) {
		if (si.ssi_signo == SIGWINCH) {
			if (xs->o->tty && xs->tp->resize)
				xs->tp->resize(xs->t);
		} else if (xs->tp->signal) {
			xs->tp->signal(xs->t, (int)si.ssi_signo);
		}
	}
}

/* Our stdin's end: for a pty ^D, else the transport closes the
 * command's stdin. */
static void
input_end(struct sbx_xs *xs)
{
	xs->in_state = 2;
	if (xs->o->tty && xs->tp->tty_eof)
		xs->tp->tty_eof(xs->t);
	else if (!xs->tp->input)
		return;
	else if (xs->o->tty)
		xs->tp->input(xs->t, xs, "\004", 1);
	else
		xs->tp->input(xs->t, xs, NULL, 0);
}

static void
input_read(struct sbx_xs *xs, char *buf)
{
	ssize_t n = read(0, buf, CHUNK);

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		input_end(xs);
		return;
	}
	/* The command takes no more: what comes is not its. */
	if (xs->tp->input && xs->tp->input(xs->t, xs, buf, (size_t)n) < 0)
		xs->in_state = 2;
}

/* Read what is there from an output fd; 0 at its end. */
static int
output_read(struct sbx_xs *xs, int i, char *buf)
{
	ssize_t n = read(xs->outs[i], buf, CHUNK);

	if (n < 0)
		return errno == EINTR || errno == EAGAIN;
	if (n == 0)
		return 0;
	sbx_xs_output(xs, xs->out_stream[i], buf, (size_t)n);
	return 1;
}

/* After the end, only what is already there: a background process may
 * hold a pipe open forever. */
static void
outputs_drain(struct sbx_xs *xs, char *buf)
{
	struct pollfd p[3];
	int i, r;

	for (;;) {
		for (i = 0; i < 3; i++)
			p[i] = (struct pollfd){xs->outs[i], POLLIN, 0};
		if ((r = poll(p, 3, 0)) < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return;
		for (i = 0; i < 3; i++)
			if (p[i].revents && !output_read(xs, i, buf))
				xs->outs[i] = -1;
	}
}

static int
loop(struct sbx_xs *xs, char *buf, struct sbx_err *err)
{
	const struct sbx_xs_transport *tp = xs->tp;
	long long deadline = 0, drain_until = 0, now, wake, paused = 0, more;
	struct pollfd p[5 + SBX_XS_FDS];
	int i, n, r;

	if ((tp->flags & SBX_XS_DEADLINE) && xs->o->timeout_ms)
		deadline = xs->t0 + (long long)xs->o->timeout_ms;
	while (!xs->done) {
		/* Closed when the session began: at its end from the start. */
		if (xs->in_state == 0 && !(xs->std_open & 1))
			input_end(xs);
		p[0] = (struct pollfd){xs->sfd, POLLIN, 0};
		p[1] = (struct pollfd){xs->in_state ? -1 : 0, POLLIN, 0};
		for (i = 0; i < 3; i++)
			p[2 + i] = (struct pollfd){xs->outs[i], POLLIN, 0};
		wake = drain_until ? drain_until : deadline ? deadline : -1;
		n = tp->fds ? tp->fds(xs->t, p + 5, &wake) : 0;
		now = sbx_mono_ms();
		r = poll(p, (nfds_t)(5 + n), wake < 0 ? -1 : wake > now ?
		    (int)(wake - now < 1 << 30 ? wake - now : 1 << 30) : 0);
		if (r < 0 && errno != EINTR)
			return sbx_err_set(err, SBX_EX_EXECFAIL, "poll:");
		if (r < 0)
			continue;
		if (p[0].revents & POLLIN)
			signals_read(xs);
		if (p[1].revents && xs->in_state == 0)
			input_read(xs, buf);
		for (i = 0; i < 3; i++)
			if (p[2 + i].revents && !output_read(xs, i, buf))
				xs->outs[i] = -1;
		if (tp->ready && tp->ready(xs->t, xs, p + 5, n, err) < 0)
			return -1;
		if (xs->done)
			break;
		now = sbx_mono_ms();
		if (drain_until && now >= drain_until)
			break; /* what it started holds its stream open */
		if (deadline && !drain_until && now >= deadline &&
		    tp->paused_ms && (more = tp->paused_ms(xs->t) - paused) >
		    0) {
			/* Paused meanwhile: later by as much. */
			paused += more;
			deadline += more;
		}
		if (deadline && !drain_until && now >= deadline) {
			xs->res->timed_out = 1;
			if (tp->expire && tp->expire(xs->t, err) < 0)
				return -1;
			drain_until = sbx_mono_ms() + SBX_XS_DRAIN_MS;
		}
	}
	outputs_drain(xs, buf);
	return 0;
}

int
sbx_xs_run(struct sbx_xs *xs, struct sbx_err *err)
{
	char *buf = sbx_xmalloc(CHUNK);
	int rc = -1;

	signals_block(xs);
	/* Raw before the start: no output of the command's may come
	 * through a terminal that still edits it. */
	term_raw(xs);
	if (xs->tp->start(xs->t, xs, err) < 0)
		goto out;
	if (xs->o->started)
		xs->o->started(xs->o->started_arg);
	if (loop(xs, buf, err) < 0)
		goto out;
	/* The command's time, not what finish asks afterwards. */
	xs->res->duration_ms = sbx_mono_ms() - xs->t0;
	rc = xs->tp->finish(xs->t, xs, err);
out:
	if (xs->raw)
		tcsetattr(0, TCSADRAIN, &xs->saved);
	xs->raw = 0;
	sigprocmask(SIG_SETMASK, &xs->old, NULL);
	if (xs->sfd >= 0)
		close(xs->sfd);
	xs->sfd = -1;
	if (rc < 0)
		xs->res->duration_ms = sbx_mono_ms() - xs->t0;
	free(buf);
	return rc;
}
