/* sessions.c - the shell sessions an agent keeps (sbx-shell): sbx-init in
 * a local sandbox, or sbx-init --shell-server in another backend's; each
 * call a SBX_MSG_SHELL on a connection, answered once its command settles
 * or its wait is over */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local.h"

/* A shell session and the call that waits on it. */
struct session {
	char *name;
	struct sbx_shell *sh;
	int sock;           /* the waiting call, or -1 */
	long long deadline; /* monotonic ms: its answer is due */
	size_t limit;
};

static struct {
	struct session sess[SBX_SESS_MAX];
	int nsess;
	const char *workdir;
	char **env;
	int (*prep)(void);
	void (*activity)(void);
} ss;

void
sbx_sess_setup(const char *workdir, char **env, int (*prep)(void),
    void (*activity)(void))
{
	ss.workdir = workdir;
	ss.env = env;
	ss.prep = prep;
	ss.activity = activity;
}

/* SBX_MSG_SHELLREP: u32 error code (0: none), str error, str session,
 * str status, u32 exit code + 1 (0: none), u32 truncated, u32 bash,
 * bytes output; a list: code 0, then u32 n and n (name, status, shell,
 * u32 a call waiting). */
static void
shell_reply(int sock, uint32_t code, const char *msg, const char *name,
    const char *status, const struct sbx_shell_out *o, int bash)
{
	struct sbx_buf b = SBX_BUF_INIT;

	sbx_msg_put_u32(&b, code);
	sbx_msg_put_str(&b, msg);
	sbx_msg_put_str(&b, name);
	sbx_msg_put_str(&b, o ? o->status : status);
	sbx_msg_put_u32(&b, o && o->exit_code >= 0 ?
	    (uint32_t)o->exit_code + 1 : 0);
	sbx_msg_put_u32(&b, o ? (uint32_t)o->truncated : 0);
	sbx_msg_put_u32(&b, (uint32_t)bash);
	sbx_msg_put_bytes(&b, o ? o->output.data : NULL, o ? o->output.len :
	    0);
	sbx_msg_send(sock, SBX_MSG_SHELLREP, b.data, b.len, NULL, 0);
	sbx_buf_release(&b);
	close(sock);
}

static const char *
session_status(const struct session *se)
{
	return sbx_shell_dead(se->sh) ? "reset" : sbx_shell_running(se->sh) ?
	    "running" : "idle";
}

/* An error answer: code as sbx-shell exits with it; the session's
 * status with it when the call reached one. */
static void
shell_error(int sock, int code, const char *msg, const struct session *se)
{
	shell_reply(sock, (uint32_t)code, msg, se ? se->name : "",
	    se ? session_status(se) : "", NULL, se ? sbx_shell_is_bash(se->sh) :
	    0);
}

static struct session *
session_find(const char *name)
{
	int i;

	for (i = 0; i < ss.nsess; i++)
		if (!strcmp(ss.sess[i].name, name))
			return &ss.sess[i];
	return NULL;
}

static void
session_end(struct session *se)
{
	if (se->sock >= 0)
		shell_error(se->sock, SBX_EX_FAIL, "the session was closed", NULL);
	sbx_shell_free(se->sh);
	free(se->name);
	*se = ss.sess[--ss.nsess];
}

/* A new shell for se (its first, or after the last one ended). */
static int
session_shell(struct session *se, struct sbx_err *err)
{
	if (se->sh)
		sbx_shell_free(se->sh);
	se->sh = sbx_shell_new(NULL, ss.workdir, ss.env, ss.prep, err);
	return se->sh ? 0 : -1;
}

/* The answer to the call waiting on se, when it is due. */
static void
session_answer(struct session *se)
{
	struct sbx_shell_out o;

	if (se->sock < 0 || (!sbx_shell_settled(se->sh) &&
	    sbx_mono_ms() < se->deadline))
		return;
	sbx_shell_take(se->sh, se->limit, &o);
	shell_reply(se->sock, 0, "", se->name, NULL, &o,
	    sbx_shell_is_bash(se->sh));
	sbx_buf_release(&o.output);
	se->sock = -1;
	if (ss.activity)
		ss.activity();
}

static void
shell_list(int sock)
{
	struct sbx_buf b = SBX_BUF_INIT;
	int i;

	sbx_msg_put_u32(&b, 0);
	sbx_msg_put_u32(&b, (uint32_t)ss.nsess);
	for (i = 0; i < ss.nsess; i++) {
		sbx_msg_put_str(&b, ss.sess[i].name);
		sbx_msg_put_str(&b, session_status(&ss.sess[i]));
		sbx_msg_put_str(&b, sbx_shell_is_bash(ss.sess[i].sh) ? "bash" :
		    "sh");
		sbx_msg_put_u32(&b, ss.sess[i].sock >= 0);
	}
	sbx_msg_send(sock, SBX_MSG_SHELLREP, b.data, b.len, NULL, 0);
	sbx_buf_release(&b);
	close(sock);
}

/* One call (SBX_MSG_SHELL: str session, str op, bytes data, u32 wait_ms,
 * u32 limit; op one of command, input, signal, read, close, list): the
 * answer once the command settles or wait_ms has passed. */
void
sbx_sess_call(int sock, struct sbx_msg *m)
{
	const char *name = sbx_msg_get_str(m), *op = sbx_msg_get_str(m), *data;
	struct sbx_err err = {0};
	struct session *se;
	uint32_t wait = 0, limit = 0;
	size_t len = 0;
	char *cmd = NULL;
	int rc = 0;

	data = sbx_msg_get_bytes(m, &len);
	if (!name || !op || !data || sbx_msg_get_u32(m, &wait) < 0 ||
	    sbx_msg_get_u32(m, &limit) < 0 || wait > SBX_SHELL_WAIT_MAX ||
	    limit > SBX_SHELL_LIMIT_MAX) {
		shell_error(sock, SBX_EX_USAGE, "malformed shell request", NULL);
		return;
	}
	if (!strcmp(op, "list")) {
		shell_list(sock);
		return;
	}
	se = session_find(name);
	if (!se && strcmp(op, "command")) {
		char msg[300];

		snprintf(msg, sizeof msg, "no session '%s'", name);
		shell_error(sock, SBX_EX_FAIL, msg, NULL);
		return;
	}
	if (se && se->sock >= 0) {
		/* Two calls at once would take each other's output. */
		shell_error(sock, SBX_EX_FAIL, "another call is waiting on this "
		    "session", se);
		return;
	}
	if (!strcmp(op, "close")) {
		shell_reply(sock, 0, "", se->name, "closed", NULL,
		    sbx_shell_is_bash(se->sh));
		session_end(se);
		return;
	}
	if (!se) {
		if (ss.nsess == SBX_SESS_MAX) {
			shell_error(sock, SBX_EX_FAIL, "too many sessions", NULL);
			return;
		}
		se = &ss.sess[ss.nsess++];
		*se = (struct session){sbx_xstrdup(name), NULL, -1, 0, 0};
		if (session_shell(se, &err) < 0) {
			shell_error(sock, SBX_EX_FAIL, err.msg, NULL);
			session_end(se);
			return;
		}
	}
	if (!strcmp(op, "command")) {
		/* The last shell ended (its call said "reset"): a fresh one. */
		if (sbx_shell_dead(se->sh) && session_shell(se, &err) < 0) {
			shell_error(sock, SBX_EX_FAIL, err.msg, NULL);
			session_end(se);
			return;
		}
		if (memchr(data, '\0', len)) {
			rc = sbx_err_set(&err, SBX_EX_USAGE, "a command cannot "
			    "hold a NUL byte");
		} else {
			cmd = sbx_xmalloc(len + 1);
			memcpy(cmd, data, len);
			cmd[len] = '\0';
			rc = sbx_shell_command(se->sh, cmd, &err);
			free(cmd);
		}
	} else if (!strcmp(op, "input")) {
		rc = sbx_shell_input(se->sh, data, len, &err);
	} else if (!strcmp(op, "signal")) {
		rc = sbx_shell_interrupt(se->sh, &err);
	} else if (strcmp(op, "read")) {
		rc = sbx_err_set(&err, SBX_EX_USAGE, "unknown shell operation");
	} else if (!sbx_shell_running(se->sh) && !sbx_shell_settled(se->sh)) {
		rc = sbx_err_set(&err, SBX_EX_FAIL, "no command is running");
	}
	if (rc < 0) {
		shell_error(sock, err.code, err.msg, se);
		return;
	}
	se->sock = sock;
	se->deadline = sbx_mono_ms() + wait;
	se->limit = limit ? limit : SBX_SHELL_LIMIT_DEFAULT;
	sbx_shell_pump(se->sh);
	session_answer(se);
	if (ss.activity)
		ss.activity();
}

int
sbx_sess_busy(void)
{
	int i;

	for (i = 0; i < ss.nsess; i++)
		if (ss.sess[i].sock >= 0 || sbx_shell_running(ss.sess[i].sh))
			return 1;
	return 0;
}

size_t
sbx_sess_pollfds(struct pollfd *p)
{
	size_t n = 0;
	int i;

	for (i = 0; i < ss.nsess; i++)
		n += sbx_shell_pollfds(ss.sess[i].sh, p + n);
	return n;
}

void
sbx_sess_pump(void)
{
	int i;

	for (i = 0; i < ss.nsess; i++) {
		sbx_shell_pump(ss.sess[i].sh);
		session_answer(&ss.sess[i]);
	}
}

int
sbx_sess_reaped(pid_t pid)
{
	int i;

	for (i = 0; i < ss.nsess; i++)
		if (sbx_shell_pid(ss.sess[i].sh) == pid) {
			sbx_shell_reaped(ss.sess[i].sh);
			session_answer(&ss.sess[i]);
			return 1;
		}
	return 0;
}

long long
sbx_sess_next(long long now)
{
	long long ms = -1, left;
	int i;

	for (i = 0; i < ss.nsess; i++)
		if (ss.sess[i].sock >= 0) {
			left = ss.sess[i].deadline - now;
			if (left < 0)
				left = 0;
			if (ms < 0 || left < ms)
				ms = left;
		}
	return ms;
}

void
sbx_sess_resumed(long long ms)
{
	int i;

	for (i = 0; i < ss.nsess; i++)
		if (ss.sess[i].sock >= 0)
			ss.sess[i].deadline += ms;
}

/* --- sbx-init --shell-server / --shell-call: the sessions of a sandbox
 * whose PID 1 is not ours (docker, e2b), reached by an exec of the
 * client ------------------------------------------------------------------ */

extern char **environ;

/* Serve the sessions on a unix socket at path until killed; 0 at once
 * when another server answers there already. */
int
sbx_local_shell_serve(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct pollfd p[2 + 2 * SBX_SESS_MAX];
	struct signalfd_siginfo si;
	char cwd[4096];
	sigset_t mask;
	int lfd, sfd, c, st, ms;
	long long left;
	size_t np;
	pid_t pid;

	if (strlen(path) >= sizeof sa.sun_path)
		return SBX_EX_USAGE;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return SBX_EX_FAIL;
	if (connect(lfd, (struct sockaddr *)&sa, sizeof sa) == 0)
		return 0;
	close(lfd);
	unlink(path);
	if ((lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    chmod(path, 0600) < 0 || listen(lfd, 64) < 0)
		return SBX_EX_FAIL;
	/* Listening: the exec that started us may return (its caller's
	 * next call finds us), and we go on in a session of our own. */
	if ((pid = fork()) < 0)
		return SBX_EX_FAIL;
	if (pid > 0)
		_exit(0);
	setsid();
	if ((c = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		dup2(c, 0);
		dup2(c, 1);
		dup2(c, 2);
		close(c);
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	if ((sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
		return SBX_EX_FAIL;
	sbx_sess_setup(getcwd(cwd, sizeof cwd) ? cwd : "/", environ, NULL,
	    NULL);
	for (;;) {
		p[0] = (struct pollfd){lfd, POLLIN, 0};
		p[1] = (struct pollfd){sfd, POLLIN, 0};
		np = 2 + sbx_sess_pollfds(p + 2);
		left = sbx_sess_next(sbx_mono_ms());
		ms = left < 0 ? -1 : left > 3600000 ? 3600000 : (int)left;
		if (poll(p, (nfds_t)np, ms) < 0 && errno != EINTR)
			return SBX_EX_FAIL;
		sbx_sess_pump();
		if (p[1].revents & POLLIN) {
			while (read(sfd, &si, sizeof si) > 0)
				;
			while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
				sbx_sess_reaped(pid);
		}
		if ((p[0].revents & POLLIN) && (c = accept4(lfd, NULL, NULL,
		    SOCK_CLOEXEC)) >= 0) {
			struct timeval tv = {2, 0};
			struct sbx_msg m;

			/* A stuck client must not stall the others. */
			setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
			if (sbx_msg_recv(c, &m) > 0 && m.type == SBX_MSG_SHELL)
				sbx_sess_call(c, &m);
			else
				close(c);
			sbx_msg_release(&m);
		}
	}
}

/* One call: the SBX_MSG_SHELL frame in hex on stdin to the server at
 * path, its SBX_MSG_SHELLREP frame in hex on stdout (hex: the exec of
 * another backend carries text safely). */
int
sbx_local_shell_client(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct sbx_buf in = SBX_BUF_INIT, frame = SBX_BUF_INIT;
	struct sbx_buf out = SBX_BUF_INIT;
	struct sbx_msg m;
	uint32_t h[2];
	char buf[65536];
	ssize_t n;
	int fd;

	if (strlen(path) >= sizeof sa.sun_path)
		return SBX_EX_USAGE;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	while ((n = read(0, buf, sizeof buf)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || in.len + (size_t)n > 2 * (SBX_MSG_MAX + sizeof h) + 1)
			return SBX_EX_FAIL;
		sbx_buf_add(&in, buf, (size_t)n);
	}
	if (sbx_hex_get(in.data ? in.data : "", in.len, &frame) < 0) {
		dprintf(2, "sbx-init: a shell call is hex on stdin\n");
		return SBX_EX_USAGE;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		dprintf(2, "sbx-init: no shell server at '%s': %s\n", path,
		    strerror(errno));
		return SBX_EX_NOSANDBOX;
	}
	if (sbx_write_all(fd, frame.data, frame.len) < 0 ||
	    sbx_msg_recv(fd, &m) <= 0)
		return SBX_EX_FAIL;
	h[0] = (uint32_t)m.len;
	h[1] = m.type;
	sbx_hex_put(&out, h, sizeof h);
	sbx_hex_put(&out, m.data, m.len);
	sbx_buf_add(&out, "\n", 1);
	return sbx_write_all(1, out.data, out.len) < 0 ? SBX_EX_FAIL : 0;
}
