/* init.c - sbx-init, PID 1 of a local sandbox: reaps orphans, serves exec
 * requests on the sandbox's socket, and ends the sandbox once it has been
 * idle for its timeout. Linked statically: it needs nothing from the image. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "local.h"

enum { FD_CONFIG = 3, FD_LISTEN = 4, FD_STATUS = 5 };

#define MAX_HANDLERS 1024

static struct {
	uint64_t timeout;   /* idle seconds, 0: none */
	char *workdir;
	char **env;         /* the sandbox's environment for commands */
	size_t nenv;
	pid_t handlers[MAX_HANDLERS];
	int nhandlers;
	long long last_activity;    /* wall clock, for reports */
	struct timespec last_mono;  /* monotonic, for the idle timer */
} ag;

static void
logmsg(const char *fmt, const char *arg)
{
	dprintf(2, "sbx-init: ");
	dprintf(2, fmt, arg);
	dprintf(2, "\n");
}

static void
touch(void)
{
	ag.last_activity = (long long)time(NULL);
	clock_gettime(CLOCK_MONOTONIC, &ag.last_mono);
}

static int
read_config(void)
{
	struct sbx_msg m;
	const char *s;
	uint32_t n, i;

	if (sbx_msg_recv(FD_CONFIG, &m) <= 0)
		return -1;
	if (sbx_msg_get_u64(&m, &ag.timeout) < 0 ||
	    !(s = sbx_msg_get_str(&m)) || sbx_msg_get_u32(&m, &n) < 0 ||
	    n > 4096) {
		sbx_msg_release(&m);
		return -1;
	}
	ag.workdir = sbx_xstrdup(s);
	ag.env = sbx_xcalloc(n + 1, sizeof *ag.env);
	for (i = 0; i < n; i++) {
		if (!(s = sbx_msg_get_str(&m)))
			break;
		ag.env[ag.nenv++] = sbx_xstrdup(s);
	}
	sbx_msg_release(&m);
	close(FD_CONFIG);
	return 0;
}

/* --- one exec: runs in a child of the agent ---------------------------- */

struct req {
	uint32_t flags;
	uint64_t timeout_ms;
	uint32_t rows, cols;
	const char *cwd, *term;
	char **argv, **env;
	int in, out, err, cg_procs, cg_kill;
};

static int
parse_req(struct sbx_msg *m, struct req *r)
{
	uint32_t argc, envc, i;
	size_t k = 0;
	int fi = 0;

	memset(r, 0, sizeof *r);
	r->in = r->out = r->err = r->cg_procs = r->cg_kill = -1;
	if (sbx_msg_get_u32(m, &r->flags) < 0 ||
	    sbx_msg_get_u64(m, &r->timeout_ms) < 0 ||
	    sbx_msg_get_u32(m, &r->rows) < 0 ||
	    sbx_msg_get_u32(m, &r->cols) < 0 ||
	    sbx_msg_get_u32(m, &argc) < 0 || sbx_msg_get_u32(m, &envc) < 0 ||
	    argc == 0 || argc > m->len || envc > m->len ||
	    !(r->cwd = sbx_msg_get_str(m)) || !(r->term = sbx_msg_get_str(m)))
		return -1;
	if (!*r->cwd)
		r->cwd = ag.workdir;
	r->argv = sbx_xcalloc(argc + 1, sizeof *r->argv);
	for (i = 0; i < argc; i++)
		if (!(r->argv[i] = (char *)sbx_msg_get_str(m)))
			return -1;
	r->env = sbx_xcalloc(ag.nenv + envc + 4, sizeof *r->env);
	/* The sandbox's environment, then the request's on top of it. */
	for (i = 0; i < ag.nenv; i++)
		r->env[k++] = ag.env[i];
	if (*r->term)
		r->env[k++] = sbx_xasprintf("TERM=%s", r->term);
	for (i = 0; i < envc; i++) {
		char *e = (char *)sbx_msg_get_str(m);
		size_t j, n;

		if (!e || !strchr(e, '='))
			return -1;
		n = (size_t)(strchr(e, '=') - e) + 1;
		for (j = 0; j < k; j++)
			if (!strncmp(r->env[j], e, n))
				break;
		r->env[j] = e;
		if (j == k)
			k++;
	}
	if (!(r->flags & SBX_EXEC_TTY)) {
		if (r->flags & SBX_EXEC_STDIN)
			r->in = m->fds[fi++];
		r->out = m->fds[fi++];
		r->err = m->fds[fi++];
	}
	if (r->flags & SBX_EXEC_CGROUP) {
		r->cg_procs = m->fds[fi++];
		r->cg_kill = m->fds[fi++];
	}
	if (fi > m->nfds)
		return -1;
	return 0;
}

static void
send_error(int sock, uint32_t code, const char *msg)
{
	struct sbx_buf b = SBX_BUF_INIT;

	sbx_msg_put_u32(&b, code);
	sbx_msg_put_str(&b, msg);
	sbx_msg_send(sock, SBX_MSG_ERROR, b.data, b.len, NULL, 0);
	sbx_buf_release(&b);
}

/* The command's side of the fork: never returns. Errors go to errfd as
 * a code and a message. */
static void
child(struct req *r, int tty_slave, int errfd)
{
	struct {
		uint32_t code;
		char msg[500];
	} e;
	sigset_t none;
	int i;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (i = 1; i < NSIG; i++)
		signal(i, SIG_DFL);
	setsid();
	if (tty_slave >= 0) {
		ioctl(tty_slave, TIOCSCTTY, 0);
		dup2(tty_slave, 0);
		dup2(tty_slave, 1);
		dup2(tty_slave, 2);
	} else {
		if (r->in < 0)
			r->in = open("/dev/null", O_RDONLY | O_CLOEXEC);
		dup2(r->in, 0);
		dup2(r->out, 1);
		dup2(r->err, 2);
	}
	if (r->cg_procs >= 0 && write(r->cg_procs, "0", 1) < 0) {
		/* The timeout will fall back to the process group. */
	}
	/* Only 0, 1, 2 and the error pipe survive; the pipe closes on exec. */
	if (dup2(errfd, 3) < 0)
		_exit(SBX_EX_EXECFAIL);
	fcntl(3, F_SETFD, FD_CLOEXEC);
	syscall(SYS_close_range, 4, ~0U, 0);
	errfd = 3;
	if (chdir(r->cwd) < 0) {
		e.code = SBX_EX_EXECFAIL;
		snprintf(e.msg, sizeof e.msg, "cannot change directory to '%s': %s",
		    r->cwd, strerror(errno));
		goto fail;
	}
	if (sbx_local_harden() < 0) {
		e.code = SBX_EX_EXECFAIL;
		snprintf(e.msg, sizeof e.msg, "cannot drop privileges: %s",
		    strerror(errno));
		goto fail;
	}
	environ = r->env;
	execvp(r->argv[0], r->argv);
	e.code = errno == ENOENT || errno == ENOTDIR ? SBX_EX_NOTFOUND :
	    SBX_EX_NOEXEC;
	snprintf(e.msg, sizeof e.msg, "'%s': %s", r->argv[0], strerror(errno));
fail:
	if (write(errfd, &e, sizeof e) < 0)
		_exit(SBX_EX_EXECFAIL);
	_exit((int)e.code);
}

static int
open_pty(struct req *r, int *master, int *slave)
{
	struct winsize ws = {(unsigned short)r->rows, (unsigned short)r->cols,
	    0, 0};
	int unlock = 0;

	*master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*master < 0)
		return -1;
	if (ioctl(*master, TIOCSPTLCK, &unlock) < 0 ||
	    (*slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY)) < 0) {
		close(*master);
		return -1;
	}
	if (ws.ws_row && ws.ws_col)
		ioctl(*master, TIOCSWINSZ, &ws);
	return 0;
}

/* Kill the command and, with a cgroup, all it started. */
static void
kill_all(struct req *r, pid_t pid)
{
	if (r->cg_kill >= 0 && write(r->cg_kill, "1", 1) == 1)
		return;
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
}

static void
handle_exec(int sock, struct sbx_msg *m)
{
	struct req r;
	int master = -1, slave = -1, ep[2], pfd = -1, tfd = -1, status = 0;
	int timed_out = 0, gone = 0, fds[1];
	struct {
		uint32_t code;
		char msg[500];
	} e;
	struct sbx_buf b = SBX_BUF_INIT;
	pid_t pid;
	ssize_t n;

	if (parse_req(m, &r) < 0) {
		send_error(sock, SBX_EX_EXECFAIL, "malformed exec request");
		return;
	}
	if ((r.flags & SBX_EXEC_TTY) && open_pty(&r, &master, &slave) < 0) {
		send_error(sock, SBX_EX_EXECFAIL, "cannot allocate a pty");
		return;
	}
	if (pipe2(ep, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
		send_error(sock, SBX_EX_EXECFAIL, "cannot fork");
		return;
	}
	if (pid == 0) {
		close(ep[0]);
		child(&r, slave, ep[1]);
	}
	close(ep[1]);
	if (slave >= 0)
		close(slave);
	n = read(ep[0], &e, sizeof e);
	close(ep[0]);
	if (n == (ssize_t)sizeof e) {
		waitpid(pid, NULL, 0);
		e.msg[sizeof e.msg - 1] = '\0';
		send_error(sock, e.code, e.msg);
		return;
	}
	/* The pty master goes to the client; we keep no copy, so when the
	 * client goes the command gets a hangup, as on a terminal. */
	sbx_msg_put_u32(&b, (uint32_t)pid);
	fds[0] = master;
	sbx_msg_send(sock, SBX_MSG_STARTED, b.data, b.len, fds,
	    master >= 0 ? 1 : 0);
	sbx_buf_release(&b);
	if (master >= 0)
		close(master);
	/* Only the command keeps the caller's stdio. */
	for (int i = 0; i < m->nfds; i++)
		if (m->fds[i] != r.cg_kill) {
			close(m->fds[i]);
			m->fds[i] = -1;
		}
	pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (r.timeout_ms) {
		struct itimerspec its = {{0, 0}, {(time_t)(r.timeout_ms / 1000),
		    (long)(r.timeout_ms % 1000) * 1000000L}};

		tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
		timerfd_settime(tfd, 0, &its, NULL);
	}
	for (;;) {
		struct pollfd p[3] = {{pfd, POLLIN, 0},
		    {gone ? -1 : sock, POLLIN, 0}, {tfd, POLLIN, 0}};

		if (poll(p, 3, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents) {
			if (waitpid(pid, &status, 0) == pid)
				break;
		}
		if (p[2].revents & POLLIN) {
			timed_out = 1;
			kill_all(&r, pid);
			close(tfd);
			tfd = -1;
		}
		if (p[1].revents) {
			struct sbx_msg in;
			uint32_t sig;

			if (sbx_msg_recv(sock, &in) <= 0) {
				/* The caller is gone: so is its command. */
				gone = 1;
				kill_all(&r, pid);
				continue;
			}
			if (in.type == SBX_MSG_SIGNAL &&
			    sbx_msg_get_u32(&in, &sig) == 0 && sig < NSIG)
				kill(-pid, (int)sig);
			sbx_msg_release(&in);
		}
	}
	if (!gone) {
		sbx_msg_put_u32(&b, (uint32_t)status);
		sbx_msg_put_u32(&b, (uint32_t)timed_out);
		sbx_msg_send(sock, SBX_MSG_EXIT, b.data, b.len, NULL, 0);
		sbx_buf_release(&b);
	}
}

/* --- the agent ----------------------------------------------------------- */

static uint32_t
count_procs(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	uint32_t n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
			n++;
	closedir(d);
	return n ? n - 1 : 0; /* not counting ourselves */
}

static void
reply_info(int sock)
{
	struct sbx_buf b = SBX_BUF_INIT;

	sbx_msg_put_u64(&b, (uint64_t)ag.last_activity);
	sbx_msg_put_u32(&b, count_procs());
	sbx_msg_put_u32(&b, (uint32_t)ag.nhandlers);
	sbx_msg_send(sock, SBX_MSG_INFOREP, b.data, b.len, NULL, 0);
	sbx_buf_release(&b);
}

static void
serve(int sock)
{
	struct timeval tv = {2, 0};
	struct sbx_msg m;
	pid_t pid;

	/* A stuck client must not stall the agent. */
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (sbx_msg_recv(sock, &m) <= 0)
		return;
	if (m.type == SBX_MSG_INFO) {
		reply_info(sock);
	} else if (m.type == SBX_MSG_EXEC) {
		if (ag.nhandlers == MAX_HANDLERS) {
			send_error(sock, SBX_EX_EXECFAIL, "too many commands");
		} else if ((pid = fork()) == 0) {
			sigset_t none;

			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			tv.tv_sec = 0;
			setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
			close(FD_LISTEN);
			handle_exec(sock, &m);
			_exit(0);
		} else if (pid > 0) {
			ag.handlers[ag.nhandlers++] = pid;
			touch();
		}
	}
	sbx_msg_release(&m);
}

static void
reap(void)
{
	pid_t pid;
	int i;

	while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
		for (i = 0; i < ag.nhandlers; i++)
			if (ag.handlers[i] == pid) {
				ag.handlers[i] = ag.handlers[--ag.nhandlers];
				touch();
				break;
			}
}

/* Milliseconds until the sandbox is idle for its timeout; -1: never. */
static int
idle_wait(void)
{
	struct timespec now;
	long long ms;

	if (!ag.timeout || ag.nhandlers)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (long long)ag.timeout * 1000 -
	    ((now.tv_sec - ag.last_mono.tv_sec) * 1000LL +
	    (now.tv_nsec - ag.last_mono.tv_nsec) / 1000000);
	if (ms <= 0)
		return 0;
	return ms > 3600000 ? 3600000 : (int)ms;
}

int
sbx_local_init_main(int argc, char **argv)
{
	sigset_t mask;
	int sfd, null, ms;

	(void)argc;
	sbx_prog_set(argv[0]);
	/* Nothing in the sandbox may trace us or read our memory. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (read_config() < 0) {
		logmsg("%s", "cannot read the configuration");
		return 1;
	}
	if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		close(null);
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	fcntl(FD_LISTEN, F_SETFD, FD_CLOEXEC);
	fcntl(FD_STATUS, F_SETFD, FD_CLOEXEC);
	touch();
	for (;;) {
		struct pollfd p[2] = {{FD_LISTEN, POLLIN, 0}, {sfd, POLLIN, 0}};
		struct signalfd_siginfo si;
		int c;

		ms = idle_wait();
		if (ms == 0) {
			dprintf(FD_STATUS, "expired %lld\n", (long long)time(NULL));
			logmsg("idle for %s seconds: the sandbox ends",
			    sbx_xasprintf("%llu",
			    (unsigned long long)ag.timeout));
			return 0;
		}
		if (poll(p, 2, ms) < 0 && errno != EINTR)
			continue;
		if (p[1].revents & POLLIN) {
			while (read(sfd, &si, sizeof si) > 0)
				;
			reap();
		}
		if (p[0].revents & POLLIN) {
			c = accept4(FD_LISTEN, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0) {
				serve(c);
				close(c);
			}
		}
	}
}
