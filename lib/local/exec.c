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
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "local.h"

int sbx_local_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err);

static char *
sandbox_dir(const json_t *ref, struct sbx_err *err)
{
	const char *id = sbx_json_str(ref, "id"), *dir = sbx_json_str(ref,
	    "dir"), *base;
	char *found;

	/* The store's own copy first; the ref's dir serves a sandbox made
	 * with another SBX_LOCAL_DIR (connecting checks that it is ours). */
	if (id && (found = sbx_local_find(id, NULL)))
		return found;
	if (dir && id && (base = strrchr(dir, '/')) && !strcmp(base + 1, id) &&
	    access(dir, F_OK) == 0)
		return sbx_xstrdup(dir);
	sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' does not exist",
	    id ? id : "?");
	return NULL;
}

static int
not_running(const char *dir, const char *id, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/status", dir), buf[64] = "";
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;

	if (fd >= 0)
		close(fd);
	free(p);
	buf[n > 0 ? n : 0] = '\0';
	return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is %s", id,
	    strstr(buf, "expired") ? "expired" : strstr(buf, "killed") ?
	    "killed" : "not running");
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

static int
fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

struct tty {
	int raw;
	struct termios saved;
};

static void
tty_raw(struct tty *t)
{
	struct termios r;

	if (!isatty(0) || tcgetattr(0, &t->saved) < 0)
		return;
	r = t->saved;
	cfmakeraw(&r);
	if (tcsetattr(0, TCSADRAIN, &r) == 0)
		t->raw = 1;
}

static void
tty_restore(struct tty *t)
{
	if (t->raw)
		tcsetattr(0, TCSADRAIN, &t->saved);
	t->raw = 0;
}

static void
set_winsize(int master)
{
	struct winsize ws;

	if (ioctl(0, TIOCGWINSZ, &ws) == 0 || ioctl(1, TIOCGWINSZ, &ws) == 0)
		ioctl(master, TIOCSWINSZ, &ws);
}

/* Read what is there into a buffer (capture) or an fd; 0 at EOF. */
static int
pump(int from, int to, struct sbx_buf *b)
{
	char buf[65536];
	ssize_t n = read(from, buf, sizeof buf);

	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 1 : 0;
	if (n == 0)
		return 0;
	if (b)
		sbx_buf_add(b, buf, (size_t)n);
	else if (sbx_write_all(to, buf, (size_t)n) < 0)
		return 0;
	return 1;
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
		return -1;
	}
	return 0;
}

static int
build_request(struct sbx_buf *b, char *const argv[],
    const struct sbx_exec_opts *o, uint32_t flags)
{
	struct winsize ws = {0, 0, 0, 0};
	const char *term = getenv("TERM");
	uint32_t argc = 0, envc = 0;

	while (argv[argc])
		argc++;
	while (o->env && o->env[envc])
		envc++;
	if (o->tty && ioctl(0, TIOCGWINSZ, &ws) < 0)
		ioctl(1, TIOCGWINSZ, &ws);
	sbx_msg_put_u32(b, flags);
	sbx_msg_put_u64(b, o->timeout_ms);
	sbx_msg_put_u32(b, ws.ws_row);
	sbx_msg_put_u32(b, ws.ws_col);
	sbx_msg_put_u32(b, argc);
	sbx_msg_put_u32(b, envc);
	sbx_msg_put_str(b, o->cwd ? o->cwd : "");
	sbx_msg_put_str(b, o->tty ? (term && *term ? term : "xterm") : "");
	for (argc = 0; argv[argc]; argc++)
		sbx_msg_put_str(b, argv[argc]);
	for (envc = 0; o->env && o->env[envc]; envc++)
		sbx_msg_put_str(b, o->env[envc]);
	return b->len > SBX_MSG_MAX ? -1 : 0;
}

int
sbx_local_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err)
{
	const char *id = sbx_json_str(ref, "id");
	char *dir = NULL, *cgdir = NULL;
	struct sbx_buf req = SBX_BUF_INIT;
	struct sbx_cgroups cg = {0};
	struct tty tty = {0};
	struct sbx_msg m = {0};
	int sock = -1, fds[SBX_MSG_FDS], nfds = 0, null = -1, master = -1;
	int outp[2] = {-1, -1}, errp[2] = {-1, -1}, procs_fd = -1, kill_fd = -1;
	int sfd = -1, rc = -1, done = 0, status = 0, timed_out = 0, in_open;
	uint32_t flags = 0, v;
	long long t0 = sbx_mono_ms();
	sigset_t sigs, old;

	memset(res, 0, sizeof *res);
	if (!(dir = sandbox_dir(ref, err)))
		goto out;
	if (paused(dir)) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%s' is %s "
		    "(sbx-exec --resume, or sbx-pause --resume)", id,
		    paused_as(dir));
		goto out;
	}
	if ((sock = sbx_local_connect(dir)) < 0) {
		not_running(dir, id, err);
		goto out;
	}
	if (o->tty)
		flags |= SBX_EXEC_TTY;
	if (!o->tty) {
		in_open = o->interactive && fd_open(0);
		if (in_open) {
			flags |= SBX_EXEC_STDIN;
			fds[nfds++] = 0;
		}
		if (o->capture) {
			if (pipe2(outp, O_CLOEXEC) < 0 ||
			    pipe2(errp, O_CLOEXEC) < 0) {
				sbx_err_set(err, SBX_EX_EXECFAIL,
				    "cannot create pipes:");
				goto out;
			}
			res->out.limit = o->max_output;
			res->err.limit = o->max_output;
			fds[nfds++] = outp[1];
			fds[nfds++] = errp[1];
		} else {
			if ((!fd_open(1) || !fd_open(2)) &&
			    (null = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0)
				goto out;
			fds[nfds++] = fd_open(1) ? 1 : null;
			fds[nfds++] = fd_open(2) ? 2 : null;
		}
	}
	if (o->timeout_ms) {
		/* A cgroup of its own lets the timeout reach every process
		 * the command starts, even those that leave its session. */
		/* By the directory's name: the ref may hold a name. */
		sbx_cg_find(&cg, strrchr(dir, '/') + 1);
		if ((cgdir = sbx_cg_exec_new(&cg, &procs_fd, &kill_fd))) {
			flags |= SBX_EXEC_CGROUP;
			fds[nfds++] = procs_fd;
			fds[nfds++] = kill_fd;
		}
	}
	if (build_request(&req, argv, o, flags) < 0) {
		sbx_err_set(err, SBX_EX_EXECFAIL, "command line too long");
		goto out;
	}
	/* Signals for the command are caught from here on. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	sigaddset(&sigs, SIGWINCH);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	sigprocmask(SIG_BLOCK, &sigs, &old);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sbx_msg_send(sock, SBX_MSG_EXEC, req.data, req.len, fds, nfds) < 0) {
		not_running(dir, id, err);
		goto restore;
	}
	if (outp[1] >= 0) {
		close(outp[1]);
		close(errp[1]);
		outp[1] = errp[1] = -1;
	}
	/* Only a pty needs a reply before the end: its master. */
	if (o->tty) {
		if (recv_reply(sock, &m, err) < 0)
			goto restore;
		if (m.type != SBX_MSG_STARTED || m.nfds != 1) {
			sbx_err_set(err, SBX_EX_EXECFAIL, "no pty from sandbox");
			goto restore;
		}
		master = m.fds[0];
		m.nfds = 0;
		tty_raw(&tty);
	}
	sbx_msg_release(&m);
	{
		int in_eof = !o->tty, m_eof = master < 0;
		int o_eof = outp[0] < 0, e_eof = errp[0] < 0;

		while (!done || !m_eof || !o_eof || !e_eof) {
			struct pollfd p[6] = {
				{done ? -1 : sock, POLLIN, 0},
				{sfd, POLLIN, 0},
				{in_eof ? -1 : 0, POLLIN, 0},
				{m_eof ? -1 : master, POLLIN, 0},
				{o_eof ? -1 : outp[0], POLLIN, 0},
				{e_eof ? -1 : errp[0], POLLIN, 0},
			};
			/* After the exit, only drain what is already there:
			 * a background process may hold the pipe forever. */
			int r = poll(p, 6, done ? 0 : -1);

			if (r < 0 && errno != EINTR)
				break;
			if (done && r == 0)
				break;
			if (p[1].revents & POLLIN) {
				struct signalfd_siginfo si;

				while (read(sfd, &si, sizeof si) == sizeof si) {
					struct sbx_buf b = SBX_BUF_INIT;

					if (si.ssi_signo == SIGWINCH) {
						if (master >= 0)
							set_winsize(master);
						continue;
					}
					sbx_msg_put_u32(&b, si.ssi_signo);
					sbx_msg_send(sock, SBX_MSG_SIGNAL, b.data,
					    b.len, NULL, 0);
					sbx_buf_release(&b);
				}
			}
			if (p[2].revents && !pump(0, master, NULL)) {
				/* EOF on our stdin: pass it on as ^D. */
				in_eof = 1;
				if (write(master, "\004", 1) < 0)
					in_eof = 1;
			}
			if (p[3].revents && !pump(master, 1, NULL))
				m_eof = 1;
			if (p[4].revents && !pump(outp[0], -1, &res->out))
				o_eof = 1;
			if (p[5].revents && !pump(errp[0], -1, &res->err))
				e_eof = 1;
			if (p[0].revents) {
				if (recv_reply(sock, &m, err) < 0)
					goto restore;
				if (m.type == SBX_MSG_EXIT &&
				    !sbx_msg_get_u32(&m, &v)) {
					status = (int)v;
					if (!sbx_msg_get_u32(&m, &v))
						timed_out = (int)v;
					done = 1;
				}
				sbx_msg_release(&m);
			}
		}
	}
	res->timed_out = timed_out;
	if (timed_out) {
		res->exit_code = SBX_EX_TIMEOUT;
	} else if (WIFSIGNALED(status)) {
		res->signal = WTERMSIG(status);
		res->exit_code = 128 + res->signal;
	} else {
		res->exit_code = WEXITSTATUS(status);
	}
	rc = 0;
restore:
	tty_restore(&tty);
	sigprocmask(SIG_SETMASK, &old, NULL);
out:
	res->duration_ms = sbx_mono_ms() - t0;
	sbx_msg_release(&m);
	{
		int all[] = {sock, null, master, outp[0], outp[1], errp[0],
		    errp[1], procs_fd, kill_fd, sfd};
		size_t i;

		for (i = 0; i < sizeof all / sizeof all[0]; i++)
			if (all[i] >= 0)
				close(all[i]);
	}
	if (cgdir)
		sbx_cg_exec_free(cgdir, timed_out);
	sbx_cg_release(&cg);
	sbx_buf_release(&req);
	free(dir);
	return rc;
}
