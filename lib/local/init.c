/* init.c - sbx-init, PID 1 of a local sandbox: reaps orphans, serves exec
 * requests on the sandbox's socket, and ends the sandbox once it has been
 * idle for its timeout; with --docker, PID 1 of a docker sandbox (its
 * socket in a directory the host bind-mounts). Linked statically: it needs
 * nothing from the image. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "local.h"

enum { FD_CONFIG = 3, FD_LISTEN = 4, FD_STATUS = 5 };

#define MAX_EXECS 1024
#define WATCH_MS 25

/* One command running for one client. */
struct run {
	int sock;           /* the client; -1 once it has gone */
	pid_t pid;
	long long deadline; /* monotonic ms, 0: none */
	int cg_kill;        /* the exec's cgroup.kill, or -1 */
	int timed_out;
	char tag[24];       /* --docker: its SBX_EXEC_TAG_VAR value */
};

/* The cgroup of a timed exec whose command ended before its deadline:
 * what it left running is killed at the deadline all the same. */
struct lingerer {
	int cg_kill;
	long long deadline;
};

static struct {
	uint64_t timeout;   /* idle seconds, 0: none */
	char *workdir;
	char **env;         /* the sandbox's environment for commands */
	size_t nenv;
	struct sbx_local_user user; /* the image's User */
	struct run runs[MAX_EXECS];
	int nruns;
	struct lingerer lingers[MAX_EXECS];
	int nlingers;
	long long last_activity;    /* wall clock, for reports */
	long long last_mono;        /* monotonic ms, for the idle timer */
	int docker;                 /* --docker: PID 1 of a container */
	int listen;                 /* FD_LISTEN, or -1: no socket */
	int null_in;                /* /dev/null read-only, or -1 */
	pid_t main;                 /* --docker: the container's command */
	unsigned long long ntags;
} ag = {.listen = FD_LISTEN, .null_in = -1};

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
	ag.last_mono = sbx_mono_ms();
}

/* K=V into the environment of commands: a name given again replaces its
 * value (a second entry would hide behind the first). ag.env has room
 * (made for all that can come). */
static int
env_set(const char *s)
{
	size_t j, len;

	if (!strchr(s, '='))
		return -1;
	len = (size_t)(strchr(s, '=') - s) + 1;
	for (j = 0; j < ag.nenv; j++)
		if (!strncmp(ag.env[j], s, len))
			break;
	if (j < ag.nenv) {
		explicit_bzero(ag.env[j], strlen(ag.env[j]));
		free(ag.env[j]);
	} else {
		ag.nenv++;
	}
	ag.env[j] = sbx_xstrdup(s);
	return 0;
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
	/* The defaults, then --env. */
	for (i = 0; i < n; i++)
		if (!(s = sbx_msg_get_str(&m)) || env_set(s) < 0)
			break;
	/* Who commands run as: set, uid, gid, then the groups. */
	if (i < n || sbx_msg_get_u32(&m, &n) < 0 || (ag.user.set = !!n,
	    sbx_msg_get_u32(&m, &ag.user.uid) < 0) ||
	    sbx_msg_get_u32(&m, &ag.user.gid) < 0 ||
	    sbx_msg_get_u32(&m, &ag.user.ngroups) < 0 ||
	    ag.user.ngroups > SBX_LOCAL_NGROUPS) {
		sbx_msg_release(&m);
		return -1;
	}
	for (i = 0; i < ag.user.ngroups; i++)
		if (sbx_msg_get_u32(&m, &ag.user.groups[i]) < 0) {
			sbx_msg_release(&m);
			return -1;
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
	char **argv, **env, *term_env;
	int in, out, err, cg_procs, cg_kill;
	const char *user;            /* -u, or NULL: the sandbox's user */
	int has_home;                /* the request's env sets HOME */
	struct sbx_local_user u;     /* -u's, looked up */
	char *home_env, *tag_env;
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
		r->env[k++] = r->term_env = sbx_xasprintf("TERM=%s", r->term);
	for (i = 0; i < envc; i++) {
		char *e = (char *)sbx_msg_get_str(m);
		size_t j, n;

		if (!e || !strchr(e, '='))
			return -1;
		if (!strncmp(e, "HOME=", 5))
			r->has_home = 1;
		n = (size_t)(strchr(e, '=') - e) + 1;
		for (j = 0; j < k; j++)
			if (!strncmp(r->env[j], e, n))
				break;
		r->env[j] = e;
		if (j == k)
			k++;
	}
	if ((r->flags & SBX_EXEC_USER) && !(r->user = sbx_msg_get_str(m)))
		return -1;
	/* The fds the flags promise, in order: stdin, stdout, stderr, then
	 * the exec cgroup's procs and kill files. */
	if (((r->flags & SBX_EXEC_TTY) ? 0 : 2 + !!(r->flags & SBX_EXEC_STDIN)) +
	    ((r->flags & SBX_EXEC_CGROUP) ? 2 : 0) != m->nfds)
		return -1;
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
	return 0;
}

/* Whether id is inside the sandbox's map (file: uid_map or gid_map). */
static int
mapped(const char *file, uint32_t id)
{
	char buf[1024], *p, *e;
	unsigned long in, len;
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	for (p = buf; *p; p = e) {
		in = strtoul(p, &e, 10);
		strtoul(e, &e, 10);
		len = strtoul(e, &e, 10);
		if (id >= in && id - in < len)
			return 1;
		if (e == p || !(e = strchr(e, '\n')))
			break;
		e++;
	}
	return 0;
}

/* sbx-exec -u: the user looked up in the sandbox's own files, its ids
 * checked against the sandbox's map (a rootless one has root alone),
 * HOME its home unless the request sets it. */
static int
as_user(struct req *r, struct sbx_err *err)
{
	uint32_t i;
	size_t k;

	if (sbx_local_user_lookup("/", r->user, &r->u, err) < 0)
		return -1;
	if (!mapped("/proc/self/uid_map", r->u.uid) ||
	    !mapped("/proc/self/gid_map", r->u.gid))
		return sbx_err_set(err, SBX_EX_USAGE, "user '%s' (%u:%u) is "
		    "outside the sandbox's ids", r->user, r->u.uid, r->u.gid);
	/* A rootless sandbox may not set groups: only root's own. */
	for (i = 0; i < r->u.ngroups; i++)
		if (!mapped("/proc/self/gid_map", r->u.groups[i]))
			r->u.groups[i--] = r->u.groups[--r->u.ngroups];
	if (r->has_home)
		return 0;
	r->home_env = sbx_xasprintf("HOME=%s", r->u.home);
	for (k = 0; r->env[k] && strncmp(r->env[k], "HOME=", 5); k++)
		;
	r->env[k] = r->home_env;
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

/* What the command's side of the spawn reports, in memory it shares with
 * the agent until it execs. */
struct spawn {
	struct req *r;
	int tty_slave;
	volatile uint32_t code;
	char msg[512];
};

static void
spawn_fail(struct spawn *sp, uint32_t code, const char *what, int err)
{
	snprintf(sp->msg, sizeof sp->msg, "%s: %s", what, strerror(err));
	sp->code = code;
	_exit((int)code);
}

/* execvp without touching the agent's memory: PATH from the command's
 * own environment, candidates built on this stack. */
static void
exec_path(struct spawn *sp, char **argv, char **env)
{
	const char *path = "/usr/local/bin:/usr/bin:/bin", *p, *e;
	char buf[4096];
	size_t i, n, an = strlen(argv[0]);
	int err = ENOENT, seen_eacces = 0;

	if (strchr(argv[0], '/')) {
		execve(argv[0], argv, env);
		err = errno;
	} else {
		for (i = 0; env[i]; i++)
			if (!strncmp(env[i], "PATH=", 5))
				path = env[i] + 5;
		for (p = path; ; p = e + 1) {
			e = strchr(p, ':');
			n = e ? (size_t)(e - p) : strlen(p);
			if (n + an + 2 <= sizeof buf) {
				memcpy(buf, n ? p : ".", n ? n : 1);
				n = n ? n : 1;
				buf[n] = '/';
				memcpy(buf + n + 1, argv[0], an + 1);
				execve(buf, argv, env);
				if (errno == EACCES)
					seen_eacces = 1;
				else if (errno != ENOENT && errno != ENOTDIR)
					break;
			}
			if (!e)
				break;
		}
		err = seen_eacces ? EACCES : errno == ENOTDIR ? ENOENT : errno;
	}
	snprintf(buf, sizeof buf, "'%s'", argv[0]);
	spawn_fail(sp, err == ENOENT ? SBX_EX_NOTFOUND : SBX_EX_NOEXEC, buf,
	    err);
}

/* Once for every command, which inherit all three (local sandboxes; a
 * container's engine took every capability already): no capability can
 * come back through an exec, and whatever sbx-create left ignored is not
 * (an ignored signal stays so across execve, a caught one does not),
 * but SIGPIPE, which the agent ignores and spawn_child restores; and the
 * seccomp denylist, which the agent keeps to as well (it makes none of
 * those calls). Without it, each command installs its own. */
static int
agent_prep(void)
{
	sbx_sig_default();
	signal(SIGPIPE, SIG_IGN);
	if (sbx_local_drop_bounding() < 0)
		return -1;
	if (sbx_local_seccomp_once() < 0)
		logmsg("%s", "no seccomp filter of its own: each command "
		    "installs one");
	return 0;
}

/* The command's side: runs on its own stack in the agent's memory until
 * execve, so it makes only system calls. */
static int
spawn_child(void *arg)
{
	struct spawn *sp = arg;
	struct req *r = sp->r;
	char what[600];
	sigset_t none;

	if (ag.docker) {
		sbx_sig_default();
	} else {
		sigemptyset(&none);
		signal(SIGPIPE, SIG_DFL);
		sigprocmask(SIG_SETMASK, &none, NULL);
	}
	setsid();
	if (sp->tty_slave >= 0) {
		ioctl(sp->tty_slave, TIOCSCTTY, 0);
		dup2(sp->tty_slave, 0);
		dup2(sp->tty_slave, 1);
		dup2(sp->tty_slave, 2);
	} else {
		/* The agent's own: a lookup of /dev/null in the sandbox
		 * was 9 us of each exec. */
		if (r->in < 0 && (r->in = ag.null_in) < 0 &&
		    (r->in = open("/dev/null", O_RDONLY)) < 0)
			spawn_fail(sp, SBX_EX_EXECFAIL, "/dev/null", errno);
		dup2(r->in, 0);
		dup2(r->out, 1);
		dup2(r->err, 2);
	}
	/* Into the exec's own cgroup; without one the timeout falls back
	 * to the process group. */
	if (r->cg_procs >= 0 && write(r->cg_procs, "0", 1) < 0)
		r->cg_procs = -1;
	syscall(SYS_close_range, 3, ~0U, 0);
	if (chdir(r->cwd) < 0) {
		snprintf(what, sizeof what, "cannot change directory to '%s'",
		    r->cwd);
		spawn_fail(sp, SBX_EX_EXECFAIL, what, errno);
	}
	/* In a container the engine took every capability from us already
	 * (and set no_new_privs): we run the command as we are. */
	if (!ag.docker && sbx_local_harden(r->user ? &r->u : &ag.user) < 0)
		spawn_fail(sp, SBX_EX_EXECFAIL, "cannot drop privileges", errno);
	exec_path(sp, r->argv, r->env);
	return 0;
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

/* --docker: the pids of the processes whose environment holds
 * SBX_EXEC_TAG_VAR=tag, in pid order (the order they came in), into pids
 * (at most max); how many. */
static size_t
tagged(const char *tag, pid_t *pids, size_t max)
{
	char want[64], path[64], buf[65536];
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = 0, wl, i, j;
	ssize_t r;
	int fd;
	pid_t pid;

	if (!d)
		return 0;
	wl = (size_t)snprintf(want, sizeof want, "%s=%s", SBX_EXEC_TAG_VAR,
	    tag) + 1;
	while (n < max && (e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
		    (pid = (pid_t)strtol(e->d_name, NULL, 10)) == getpid())
			continue;
		snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		r = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (r <= 0)
			continue;
		buf[r] = '\0';
		/* Each entry ends with a NUL: want, NUL included, at the
		 * start or after one. */
		for (i = 0; i + wl <= (size_t)r + 1; i++)
			if ((i == 0 || buf[i - 1] == '\0') &&
			    !memcmp(buf + i, want, wl))
				break;
		if (i + wl > (size_t)r + 1)
			continue;
		for (j = n++; j > 0 && pids[j - 1] > pid; j--)
			pids[j] = pids[j - 1];
		pids[j] = pid;
	}
	closedir(d);
	return n;
}

/* --docker: signal everything of an exec; SIGKILL in rounds, for what
 * forked meanwhile. */
static void
kill_tagged(const char *tag, int sig)
{
	pid_t pids[1024];
	size_t n, i;
	int round;

	for (round = 0; round < 20; round++) {
		if (!(n = tagged(tag, pids, sizeof pids / sizeof pids[0])))
			return;
		for (i = 0; i < n; i++)
			kill(pids[i], sig);
		if (sig != SIGKILL)
			return;
		usleep(5000);
	}
}

/* Kill the command and, with a cgroup (or in a container, its tag),
 * everything it started. */
static void
kill_all(struct run *run)
{
	if (run->cg_kill >= 0 && write(run->cg_kill, "1", 1) == 1)
		return;
	kill(-run->pid, SIGKILL);
	kill(run->pid, SIGKILL);
	if (ag.docker)
		kill_tagged(run->tag, SIGKILL);
}

static char spawn_stack[256 * 1024] __attribute__((aligned(16)));

static void
start_exec(int sock, struct sbx_msg *m)
{
	struct req r;
	struct sbx_err uerr = {0};
	struct spawn sp = {0};
	struct sbx_buf b = SBX_BUF_INIT;
	int master = -1, slave = -1, i;
	struct run *run;
	char tag[24] = "";
	pid_t pid;

	if (parse_req(m, &r) < 0) {
		send_error(sock, SBX_EX_EXECFAIL, "malformed exec request");
		goto out;
	}
	if (ag.nruns == MAX_EXECS) {
		send_error(sock, SBX_EX_EXECFAIL, "too many commands at once");
		goto out;
	}
	if (r.user && ag.docker) {
		/* Without capabilities: the engine's exec does -u. */
		send_error(sock, SBX_EX_EXECFAIL, "this agent runs commands as "
		    "its own user only");
		goto out;
	}
	if (ag.docker) {
		size_t k = 0;

		snprintf(tag, sizeof tag, "%llu.%lld", ++ag.ntags,
		    sbx_mono_ms());
		while (r.env[k])
			k++;
		r.env[k] = r.tag_env = sbx_xasprintf("%s=%s", SBX_EXEC_TAG_VAR,
		    tag);
	}
	if (r.user && as_user(&r, &uerr) < 0) {
		send_error(sock, (uint32_t)uerr.code, uerr.msg);
		goto out;
	}
	if ((r.flags & SBX_EXEC_TTY) && open_pty(&r, &master, &slave) < 0) {
		send_error(sock, SBX_EX_EXECFAIL, "cannot allocate a pty");
		goto out;
	}
	sp.r = &r;
	sp.tty_slave = slave;
	/* vfork-style: no page tables to copy, we wait until it execs. */
	pid = clone(spawn_child, spawn_stack + sizeof spawn_stack,
	    CLONE_VM | CLONE_VFORK | SIGCHLD, &sp);
	if (slave >= 0)
		close(slave);
	if (pid < 0) {
		send_error(sock, SBX_EX_EXECFAIL, "cannot start the command");
		goto out;
	}
	if (sp.code) {
		waitpid(pid, NULL, 0);
		send_error(sock, sp.code, sp.msg);
		goto out;
	}
	/* The pty master goes to the client and we keep no copy: when the
	 * client goes, the command gets a hangup, as on a terminal. Without
	 * a pty the client needs nothing before the exit. */
	if (master >= 0) {
		sbx_msg_put_u32(&b, (uint32_t)pid);
		sbx_msg_send(sock, SBX_MSG_STARTED, b.data, b.len, &master, 1);
		sbx_buf_release(&b);
	}
	run = &ag.runs[ag.nruns++];
	run->sock = sock;
	run->pid = pid;
	run->timed_out = 0;
	run->deadline = r.timeout_ms ? sbx_mono_ms() +
	    (long long)r.timeout_ms : 0;
	run->cg_kill = r.cg_kill;
	memcpy(run->tag, tag, sizeof run->tag);
	/* Only the command keeps the caller's stdio. */
	for (i = 0; i < m->nfds; i++)
		if (m->fds[i] == r.cg_kill)
			m->fds[i] = -1;
	touch();
	sock = -1;
out:
	if (master >= 0)
		close(master);
	if (sock >= 0)
		close(sock);
	free(r.argv);
	free(r.env);
	free(r.term_env);
	free(r.home_env);
	free(r.tag_env);
}

static void
end_run(int i, int status)
{
	struct run *run = &ag.runs[i];
	struct sbx_buf b = SBX_BUF_INIT;

	if (run->sock >= 0) {
		sbx_msg_put_u32(&b, (uint32_t)status);
		sbx_msg_put_u32(&b, (uint32_t)run->timed_out);
		sbx_msg_send(run->sock, SBX_MSG_EXIT, b.data, b.len, NULL, 0);
		sbx_buf_release(&b);
		close(run->sock);
	}
	if (run->cg_kill >= 0 && run->deadline && ag.nlingers < MAX_EXECS)
		ag.lingers[ag.nlingers++] = (struct lingerer){run->cg_kill,
		    run->deadline};
	else if (run->cg_kill >= 0)
		close(run->cg_kill);
	ag.runs[i] = ag.runs[--ag.nruns];
	touch();
}

/* A message from the client of run i: a signal, or its going away. */
static void
client_msg(int i)
{
	struct run *run = &ag.runs[i];
	struct sbx_msg in;
	uint32_t sig;

	if (sbx_msg_recv(run->sock, &in) <= 0) {
		/* The caller is gone: so is its command. */
		close(run->sock);
		run->sock = -1;
		kill_all(run);
		return;
	}
	if (in.type == SBX_MSG_SIGNAL && sbx_msg_get_u32(&in, &sig) == 0 &&
	    sig > 0 && sig < NSIG) {
		if (ag.docker)
			kill_tagged(run->tag, (int)sig);
		else
			kill(-run->pid, (int)sig);
	}
	sbx_msg_release(&in);
}

/* A session's shell, before it execs: as an exec's command (the image's
 * user, no capabilities, the seccomp filter). */
static int
session_prep(void)
{
	return ag.docker ? 0 : sbx_local_harden(&ag.user);
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
	sbx_msg_put_u32(&b, (uint32_t)ag.nruns);
	sbx_msg_send(sock, SBX_MSG_INFOREP, b.data, b.len, NULL, 0);
	sbx_buf_release(&b);
}

/* Time frozen does not count: not for the idle timeout, not for an
 * exec's. The host says how long it was (it sends this before it thaws
 * us, so it is read before any deadline is looked at). */
static void
resumed(long long ms)
{
	int i;

	if (ms <= 0)
		return;
	ag.last_mono += ms;
	if (ag.last_mono > sbx_mono_ms())
		ag.last_mono = sbx_mono_ms();
	for (i = 0; i < ag.nruns; i++)
		if (ag.runs[i].deadline)
			ag.runs[i].deadline += ms;
	for (i = 0; i < ag.nlingers; i++)
		ag.lingers[i].deadline += ms;
	sbx_sess_resumed(ms);
}

/* SBX_MSG_ADOPT: a sandbox made ahead (local.warm) taken by a create:
 * its idle timeout and its --env (u64 seconds, u32 n, n K=V), over the
 * environment it was made with. Answered with SBX_MSG_INFOREP. */
static void
adopt(int sock, struct sbx_msg *m)
{
	uint64_t timeout;
	uint32_t n, i;
	const char *s;

	if (sbx_msg_get_u64(m, &timeout) < 0 || sbx_msg_get_u32(m, &n) < 0 ||
	    n > 4096)
		return;
	ag.env = sbx_xrealloc(ag.env, (ag.nenv + n + 1) * sizeof *ag.env);
	for (i = 0; i < n; i++)
		if (!(s = sbx_msg_get_str(m)) || env_set(s) < 0)
			break;
	ag.env[ag.nenv] = NULL;
	sbx_sess_setup(ag.workdir, ag.env, session_prep, touch);
	if (i < n)
		return;
	ag.timeout = timeout;
	touch();
	reply_info(sock);
}

static void
serve(int sock)
{
	struct timeval tv = {2, 0};
	struct sbx_msg m;
	uint64_t frozen_ms;

	/* In a container, the socket's directory is the container's too:
	 * only the host (a peer outside our pid namespace, pid 0 to us) or
	 * our own user may ask, not a process of another user in here. */
	if (ag.docker) {
		struct ucred cr;
		socklen_t len = sizeof cr;

		if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
		    (cr.pid != 0 && cr.uid != geteuid())) {
			close(sock);
			return;
		}
	}
	/* A stuck client must not stall the agent. */
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (sbx_msg_recv(sock, &m) <= 0) {
		close(sock);
		return;
	}
	tv.tv_sec = 0;
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (m.type == SBX_MSG_EXEC) {
		start_exec(sock, &m);
	} else if (m.type == SBX_MSG_SHELL) {
		sbx_sess_call(sock, &m);
	} else {
		if (m.type == SBX_MSG_INFO)
			reply_info(sock);
		else if (m.type == SBX_MSG_DIRTY)
			sbx_watch_reply(sock, &m);
		else if (m.type == SBX_MSG_RESUMED && !sbx_msg_get_u64(&m,
		    &frozen_ms))
			resumed((long long)frozen_ms);
		else if (m.type == SBX_MSG_ADOPT)
			adopt(sock, &m);
		close(sock);
	}
	sbx_msg_release(&m);
}

/* Collect children that ended: our commands report to their clients,
 * orphans of the sandbox are just reaped. At most REAP_BATCH at a time:
 * a fork bomb's orphans die as fast as we reap them, and deadlines
 * (-T) must still be looked at. 1 when more may be waiting. */
#define REAP_BATCH 64
static int
reap(void)
{
	siginfo_t si;
	int i, k, status;

	for (k = 0; k < REAP_BATCH; k++) {
		si.si_pid = 0;
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 ||
		    si.si_pid == 0)
			return 0;
		if (waitpid(si.si_pid, &status, 0) != si.si_pid)
			return 0;
		/* --docker: the container ends with its command, with its
		 * status, as under docker's own init. */
		if (ag.docker && si.si_pid == ag.main)
			_exit(WIFEXITED(status) ? WEXITSTATUS(status) :
			    128 + WTERMSIG(status));
		for (i = 0; i < ag.nruns; i++)
			if (ag.runs[i].pid == si.si_pid) {
				end_run(i, status);
				break;
			}
		sbx_sess_reaped(si.si_pid);
	}
	return 1;
}

/* Milliseconds until the next deadline (a timeout or the idle end), or
 * -1 for none; runs out of time are killed here. */
static int
next_wait(int *expired)
{
	long long now = sbx_mono_ms(), ms = -1, left;
	int i;

	*expired = 0;
	for (i = 0; i < ag.nruns; i++) {
		struct run *run = &ag.runs[i];

		if (!run->deadline)
			continue;
		if ((left = run->deadline - now) <= 0) {
			run->timed_out = 1;
			run->deadline = 0;
			kill_all(run);
			continue;
		}
		if (ms < 0 || left < ms)
			ms = left;
	}
	for (i = ag.nlingers - 1; i >= 0; i--) {
		struct lingerer *l = &ag.lingers[i];

		if ((left = l->deadline - now) <= 0) {
			if (write(l->cg_kill, "1", 1) < 0)
				logmsg("%s", "cannot kill a timed-out cgroup");
			close(l->cg_kill);
			ag.lingers[i] = ag.lingers[--ag.nlingers];
		} else if (ms < 0 || left < ms) {
			ms = left;
		}
	}
	if ((left = sbx_sess_next(now)) >= 0 && (ms < 0 || left < ms))
		ms = left;
	if (ag.timeout && !ag.nruns && !sbx_sess_busy()) {
		left = (long long)ag.timeout * 1000 - (now - ag.last_mono);
		if (left <= 0)
			*expired = 1;
		else if (ms < 0 || left < ms)
			ms = left;
	}
	return ms > 3600000 ? 3600000 : (int)ms;
}

/* The signals PID 1 of a container passes on to its command, as
 * docker's own init does: sbx-pause's stop, sbx-kill --keep's. */
static const int passed[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1,
    SIGUSR2, SIGWINCH};

/* --docker RUNDIR -- CMD...: the socket RUNDIR/sock, the container's
 * environment and working directory for commands, CMD started. */
static int
docker_setup(char **argv)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char cwd[4096];
	sigset_t none;
	size_t i;
	int fd;

	/* No idle timeout of ours (the keep-alive has it): FD_STATUS is
	 * never written. */
	ag.docker = 1;
	ag.workdir = sbx_xstrdup(getcwd(cwd, sizeof cwd) ? cwd : "/");
	for (i = 0; environ[i]; i++)
		;
	ag.env = sbx_xcalloc(i + 1, sizeof *ag.env);
	for (ag.nenv = 0; ag.nenv < i; ag.nenv++)
		ag.env[ag.nenv] = sbx_xstrdup(environ[ag.nenv]);
	/* No exec goes to us without it: the host's exec uses the
	 * engine's then. A socket of an agent that ran before (a restart)
	 * is gone first. */
	ag.listen = -1;
	if (snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", argv[2]) >=
	    (int)sizeof sa.sun_path)
		logmsg("%s", "its socket's path is too long");
	else if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0) {
		unlink(sa.sun_path);
		if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
		    chmod(sa.sun_path, 0666) < 0 || listen(fd, 128) < 0) {
			logmsg("cannot listen on '%s'", sa.sun_path);
			close(fd);
		} else {
			ag.listen = fd;
		}
	}
	sigemptyset(&none);
	if ((ag.main = fork()) < 0) {
		logmsg("%s", "cannot start the container's command");
		return -1;
	}
	if (ag.main == 0) {
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (ag.listen >= 0)
			close(ag.listen);
		execvp(argv[4], argv + 4);
		logmsg("cannot run '%s'", argv[4]);
		_exit(SBX_EX_NOTFOUND);
	}
	return 0;
}

int
sbx_local_init_main(int argc, char **argv)
{
	struct pollfd p[3 + MAX_EXECS + 2 * SBX_SESS_MAX];
	size_t np, k;
	sigset_t mask;
	int sfd, wfd, null, ms, expired, i, n, wpoll, more = 0;
	long long wnext = 0, now;

	sbx_prog_set(argv);
	/* Nothing in the sandbox may trace us or read our memory. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (argc >= 5 && !strcmp(argv[1], "--docker") &&
	    !strcmp(argv[3], "--")) {
		/* Blocked before its command starts: none is missed. */
		for (k = 0; k < sizeof passed / sizeof passed[0]; k++)
			sigaddset(&mask, passed[k]);
		sigprocmask(SIG_BLOCK, &mask, NULL);
		if (docker_setup(argv) < 0)
			return SBX_EX_EXECFAIL;
	} else if (read_config() < 0) {
		logmsg("%s", "cannot read the configuration");
		return 1;
	} else if (agent_prep() < 0) {
		logmsg("%s", "cannot empty the capability bounding set");
		return 1;
	}
	sbx_sess_setup(ag.workdir, ag.env, session_prep, touch);
	if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		close(null);
	}
	/* Each command's stdin when it is given none (spawn_child). */
	ag.null_in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	fcntl(FD_LISTEN, F_SETFD, FD_CLOEXEC);
	fcntl(FD_STATUS, F_SETFD, FD_CLOEXEC);
	sbx_watch_start(ag.workdir);
	touch();
	for (;;) {
		struct signalfd_siginfo si;

		ms = next_wait(&expired);
		if (more)
			ms = 0; /* children are left to reap */
		if (expired) {
			/* A resume may be waiting right behind the thaw. */
			struct pollfd lp = {ag.listen, POLLIN, 0};

			if (poll(&lp, 1, 0) == 1) {
				int c = accept4(ag.listen, NULL, NULL,
				    SOCK_CLOEXEC);

				if (c >= 0) {
					serve(c);
					continue;
				}
			}
			dprintf(FD_STATUS, "expired %lld\n", (long long)time(NULL));
			logmsg("%s", "idle for its timeout: the sandbox ends");
			return 0;
		}
		p[0] = (struct pollfd){ag.listen, POLLIN, 0};
		p[1] = (struct pollfd){sfd, POLLIN, 0};
		/* inotify events are taken in at most every WATCH_MS: a
		 * writer of many files would wake us for each one. */
		now = sbx_mono_ms();
		wfd = sbx_watch_fd();
		wpoll = wfd >= 0 && now >= wnext;
		if (wfd >= 0 && !wpoll && (ms < 0 || wnext - now < ms))
			ms = (int)(wnext - now);
		p[2] = (struct pollfd){wpoll ? wfd : -1, POLLIN, 0};
		n = ag.nruns;
		for (i = 0; i < n; i++)
			p[3 + i] = (struct pollfd){ag.runs[i].sock, POLLIN, 0};
		np = (size_t)(3 + n);
		np += sbx_sess_pollfds(p + np);
		if (poll(p, (nfds_t)np, ms) < 0)
			continue;
		/* What the shells wrote, kept for the next call; the calls
		 * whose answer is due. */
		sbx_sess_pump();
		if (p[2].revents & POLLIN) {
			sbx_watch_read();
			wnext = sbx_mono_ms() + WATCH_MS;
		}
		/* Client messages first: reaping reorders the runs. */
		for (i = n - 1; i >= 0; i--)
			if (p[3 + i].revents && ag.runs[i].sock == p[3 + i].fd)
				client_msg(i);
		if (p[1].revents & POLLIN) {
			while (read(sfd, &si, sizeof si) > 0)
				if (si.ssi_signo != SIGCHLD && ag.main > 0)
					kill(ag.main, (int)si.ssi_signo);
			more = reap();
		} else if (more) {
			more = reap();
		}
		if (p[0].revents & POLLIN) {
			int c = accept4(ag.listen, NULL, NULL, SOCK_CLOEXEC);

			if (c >= 0)
				serve(c);
		}
	}
}
