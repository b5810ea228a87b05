/* spawn.c - the spawner: the one process that forks sbxd's children.
 *
 * sbxd has threads; a child forked from a threaded process may find a
 * lock another thread held at the fork (an allocator's: glibc's malloc
 * resets its own, GCC 12's AddressSanitizer does not), and POSIX lets
 * it call only async-signal-safe functions. So sbxd forks once, at its
 * start, before any thread: that single-threaded spawner forks each
 * child (an exec's runner, a lifecycle worker, a files helper) on
 * request, a JSON document and the child's fds over a socket. It
 * answers with the child's pidfd, for signals that cannot reach a
 * reused pid, and reaps it, writing its wait status to a pipe the
 * request brought: sbxd waits on that pipe. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbxd.h"

#define SPAWN_FDS 7 /* a request's own, and the status pipe's */

static const struct {
	const char *kind;
	void (*fn)(json_t *args, int *fds, int nfds);
} kinds[] = {
	{"proc", sbxd_proc_child},
	{"worker", sbxd_worker_child},
	{"inbox", sbxd_inbox_child},
	{"build", sbxd_build_child},
};

static int spawn_sock = -1;
static pthread_mutex_t spawn_mu = PTHREAD_MUTEX_INITIALIZER;

/* A child the spawner has not reaped yet, and where its status goes. */
struct kid {
	pid_t pid;
	int statfd;
};

static void
reap(struct kid **kids, size_t *n)
{
	size_t i;
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		for (i = 0; i < *n; i++) {
			if ((*kids)[i].pid != pid)
				continue;
			/* sbxd may have stopped waiting: EPIPE is no harm. */
			if (write((*kids)[i].statfd, &status, sizeof status) <
			    0) {
			}
			close((*kids)[i].statfd);
			(*kids)[i] = (*kids)[--*n];
			break;
		}
}

static void __attribute__((noreturn))
run_child(const char *kind, json_t *args, int *fds, int nfds)
{
	size_t i;

	sbx_sig_default();
	for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (!strcmp(kinds[i].kind, kind))
			kinds[i].fn(args, fds, nfds);
	_exit(125);
}

/* One request: fork its child, answer {"pid"} with the pidfd, or
 * {"errno"}. The status fd is the last of fds. */
static void
serve(int sock, int sfd, json_t *q, int *fds, int nfds, struct kid **kids,
    size_t *n, size_t *cap)
{
	const char *kind = sbx_json_str(q, "kind");
	json_t *a;
	pid_t pid = -1;
	int i, pidfd = -1, e = EINVAL;

	if (kind && nfds >= 1) {
		pid = fork();
		e = errno;
	}
	if (pid == 0) {
		close(sock);
		close(sfd);
		run_child(kind, json_object_get(q, "args"), fds, nfds - 1);
	}
	if (pid > 0) {
		if ((pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0) {
			/* Not ours to report: end it; reap writes. */
			e = errno;
			kill(pid, SIGKILL);
		}
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 16;
			*kids = sbx_xrealloc(*kids, *cap * sizeof **kids);
		}
		(*kids)[*n].pid = pid;
		(*kids)[(*n)++].statfd = fds[nfds - 1];
		nfds--;
	}
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	a = pidfd >= 0 ? json_pack("{s:i}", "pid", (int)pid) :
	    json_pack("{s:i}", "errno", e);
	if (sbxd_msg_sendv(sock, a, &pidfd, pidfd >= 0) < 0)
		_exit(0);
	json_decref(a);
	if (pidfd >= 0)
		close(pidfd);
}

static void __attribute__((noreturn))
spawner(int sock, pid_t parent)
{
	struct kid *kids = NULL;
	size_t n = 0, cap = 0;
	sigset_t sigs;
	int sfd, fds[SPAWN_FDS], nfds;
	json_t *q;

	/* sbxd's signals are sbxd's: a ^C or a TERM to the group must
	 * not take the spawner before sbxd has done with its children.
	 * The children clear the mask; blocked, nothing is pending. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	if ((sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
		_exit(1);
	for (;;) {
		struct pollfd p[2] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
		struct signalfd_siginfo si;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (p[1].revents) {
			while (read(sfd, &si, sizeof si) == sizeof si)
				;
			reap(&kids, &n);
		}
		if (!p[0].revents)
			continue;
		/* sbxd is gone: its children are on their own. */
		if (!(q = sbxd_msg_recvv(sock, fds, &nfds, SPAWN_FDS)))
			_exit(0);
		serve(sock, sfd, q, fds, nfds, &kids, &n, &cap);
		json_decref(q);
	}
}

int
sbxd_spawner_start(struct sbx_err *err)
{
	pid_t me = getpid(), pid;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "socketpair:");
	fflush(NULL);
	if ((pid = fork()) < 0) {
		close(sv[0]);
		close(sv[1]);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot fork:");
	}
	if (pid == 0) {
		close(sv[0]);
		spawner(sv[1], me);
	}
	close(sv[1]);
	spawn_sock = sv[0];
	return 0;
}

int
sbxd_spawn(const char *kind, const json_t *args, const int *fds, int nfds,
    struct sbxd_child *c, struct sbx_err *err)
{
	int all[SPAWN_FDS], st[2], pidfd = -1, i;
	json_t *q, *a = NULL;

	c->pid = -1;
	c->pidfd = c->statfd = -1;
	c->done = 0;
	c->status = 0;
	if (nfds + 1 > SPAWN_FDS)
		return sbx_err_set(err, SBX_EX_FAIL, "too many fds for a "
		    "child");
	if (pipe2(st, O_CLOEXEC) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot make a pipe:");
	for (i = 0; i < nfds; i++)
		all[i] = fds[i];
	all[nfds] = st[1];
	q = json_pack("{s:s,s:O}", "kind", kind, "args", args);
	pthread_mutex_lock(&spawn_mu);
	if (spawn_sock >= 0 && sbxd_msg_sendv(spawn_sock, q, all, nfds + 1)
	    == 0)
		a = sbxd_msg_recv(spawn_sock, &pidfd);
	pthread_mutex_unlock(&spawn_mu);
	json_decref(q);
	close(st[1]);
	if (!a || pidfd < 0) {
		errno = (int)sbx_json_int(a, "errno", EIO);
		json_decref(a);
		close(st[0]);
		if (pidfd >= 0)
			close(pidfd);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot fork:");
	}
	c->pid = (pid_t)sbx_json_int(a, "pid", -1);
	c->pidfd = pidfd;
	c->statfd = st[0];
	json_decref(a);
	return 0;
}

int
sbxd_child_kill(struct sbxd_child *c, int sig)
{
	if (c->pidfd < 0 || c->done)
		return 0;
	return (int)syscall(SYS_pidfd_send_signal, c->pidfd, sig, NULL, 0);
}

int
sbxd_child_wait(struct sbxd_child *c, int timeout_ms)
{
	struct pollfd p = {c->statfd, POLLIN, 0};
	ssize_t n;
	int r;

	if (c->done)
		return 1;
	if (c->statfd < 0)
		return -1;
	while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return 0;
	while ((n = read(c->statfd, &c->status, sizeof c->status)) < 0 &&
	    errno == EINTR)
		;
	close(c->statfd);
	c->statfd = -1;
	if (n != (ssize_t)sizeof c->status) {
		/* The spawner is gone, and with it the status. */
		c->status = W_EXITCODE(125, 0);
		c->done = 1;
		return -1;
	}
	c->done = 1;
	return 1;
}

void
sbxd_child_release(struct sbxd_child *c)
{
	if (c->pid > 0 && !c->done)
		sbxd_child_wait(c, -1);
	if (c->statfd >= 0)
		close(c->statfd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	c->pid = -1;
	c->statfd = c->pidfd = -1;
}
