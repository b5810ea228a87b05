/* exec.c - sbx-exec on the docker backend: an exec of the engine as the
 * transport of the exec session (execio.h) */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../execio.h"
#include "docker.h"

/* With -t: the engine can size an exec's terminal only once the exec
 * runs (before API 1.42), and by then the command may have looked at it
 * (a 0x0 terminal). So the terminal is sized in the sandbox first, with
 * rows $1 and columns $2, and the command takes the shell's place. */
static const char tty_sh[] =
    "stty rows \"$1\" cols \"$2\" 2>/dev/null\n"
    "shift 2\n"
    "exec \"$@\"\n";

/* Sends signal $1 to every process whose environment holds the tag $2:
 * all an exec started, even what left its session. In pid order, the
 * order they came in: the command gets it before its children, whose end
 * it might otherwise see first and exit on, its own signal still on the
 * way (a shell in `wait`). Rounds until none is left, for what forked
 * meanwhile. Needs sh, tr, sort and kill. */
#define KILLTAG_SH \
    "n=0\n" \
    "while [ $n -lt 20 ]; do\n" \
    "\tpids=$(for d in /proc/[0-9]*; do\n" \
    "\t\tcase \"$(tr '\\0' '\\n' <\"$d/environ\" 2>/dev/null)\" in\n" \
    "\t\t*\"" SBX_EXEC_TAG_VAR "=$2\"*) echo \"${d#/proc/}\" ;;\n" \
    "\t\tesac\n" \
    "\tdone | sort -n)\n" \
    "\t[ -n \"$pids\" ] || exit 0\n" \
    "\tkill -\"$1\" $pids 2>/dev/null\n" \
    "\t[ \"$1\" = 9 ] || exit 0\n" \
    "\tn=$((n + 1))\n" \
    "\tsleep 0.05\n" \
    "done\n"
static const char killtag_sh[] = KILLTAG_SH;

struct demux {
	unsigned char hdr[8];
	size_t hlen;     /* header bytes held */
	size_t left;     /* payload bytes still to come of this frame */
	int stream;      /* 1 stdout, 2 stderr */
	int first;       /* no frame seen yet */
	int holding;     /* the first frame may be the engine's error */
	struct sbx_buf held;
};

/* The transport: the hijacked socket of the exec's start. */
struct xrun {
	struct dk *d;
	const json_t *ref;
	const char *cid;
	char *const *argv;
	char **cmd;      /* what runs: argv, or the pty's sizing shell */
	char **env;
	const struct sbx_exec_opts *o;
	struct sbx_xs *xs;
	char tag[33];
	struct demux dm;
	char *eid, *path;
	json_t *body;
	struct sbx_buf rest; /* what came with the engine's answer */
	int sock, gfd, started, resized;
	pid_t guard;
	long long live_at;
	char inb[65536]; /* a chunk of stdin on its way */
	size_t inlen, inoff;
};

static void
emit(struct xrun *x, int stream, const char *p, size_t n)
{
	sbx_xs_output(x->xs, stream, p, n);
}

/* The engine reports a command it cannot start as text in the first
 * stdout frame: held until the exit code says which it was. */
static const char oci_err[] = "OCI runtime ";

static void
payload(struct xrun *x, const char *p, size_t n)
{
	struct demux *m = &x->dm;

	if (m->first) {
		m->first = 0;
		m->holding = m->stream == 1 && n >= 4 && !strncmp(p, oci_err,
		    n < sizeof oci_err - 1 ? n : sizeof oci_err - 1);
	}
	if (m->holding) {
		if (m->held.len < 4096) {
			sbx_buf_add(&m->held, p, n);
			return;
		}
		m->holding = 0;
		emit(x, 1, m->held.data, m->held.len);
	}
	emit(x, m->stream, p, n);
}

/* Split the multiplexed stream into its frames as the bytes come. */
static void
demux(struct xrun *x, const char *p, size_t n)
{
	struct demux *m = &x->dm;
	size_t k;

	if (x->o->tty) {
		/* One stream, no frames: its start may be the engine's
		 * error all the same. */
		m->stream = 1;
		payload(x, p, n);
		return;
	}
	while (n) {
		if (m->left) {
			k = n < m->left ? n : m->left;
			payload(x, p, k);
			m->left -= k;
			p += k;
			n -= k;
			continue;
		}
		k = 8 - m->hlen;
		k = n < k ? n : k;
		memcpy(m->hdr + m->hlen, p, k);
		m->hlen += k;
		p += k;
		n -= k;
		if (m->hlen == 8) {
			m->stream = m->hdr[0] == 2 ? 2 : 1;
			m->left = (size_t)m->hdr[4] << 24 |
			    (size_t)m->hdr[5] << 16 | (size_t)m->hdr[6] << 8 |
			    m->hdr[7];
			m->hlen = 0;
		}
	}
}

/* Create an exec; its id in *eid. */
static int
exec_create(struct dk *d, const char *cid, char *const argv[], char **env,
    const char *cwd, const char *user, int in, int tty, char **eid,
    struct sbx_err *err)
{
	struct sbx_http_resp rs;
	json_t *b = json_object(), *cmd = json_array(), *e = json_array();
	size_t i;
	int rc = 0;

	for (i = 0; argv[i]; i++)
		json_array_append_new(cmd, json_string(argv[i]));
	for (i = 0; env && env[i]; i++)
		json_array_append_new(e, json_string(env[i]));
	json_object_set_new(b, "AttachStdin", json_boolean(in));
	json_object_set_new(b, "AttachStdout", json_true());
	json_object_set_new(b, "AttachStderr", json_true());
	json_object_set_new(b, "Tty", json_boolean(tty));
	json_object_set_new(b, "Cmd", cmd);
	json_object_set_new(b, "Env", e);
	if (cwd)
		json_object_set_new(b, "WorkingDir", json_string(cwd));
	/* The engine looks it up in the container's own files. */
	if (user)
		json_object_set_new(b, "User", json_string(user));
	*eid = NULL;
	if (sbx_docker_req(d, "POST", b, &rs, err, "/containers/%s/exec",
	    cid) < 0) {
		rc = -1;
	} else if (rs.status == 404) {
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' does "
		    "not exist", cid);
	} else if (rs.status == 409) {
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is "
		    "not running (%s)", cid, sbx_docker_msg(&rs));
	} else if (rs.status != 201 || !sbx_json_str(rs.json, "Id")) {
		rc = sbx_docker_fail(&rs, SBX_EX_EXECFAIL,
		    "cannot create an exec", err);
	} else {
		*eid = sbx_xstrdup(sbx_json_str(rs.json, "Id"));
	}
	if (rc == 0 || rs.status)
		sbx_http_resp_release(&rs);
	json_object_clear(b);
	json_decref(b);
	return rc;
}

/* The exec's exit code, once it has ended (bounded wait). */
static int
exec_wait(struct dk *d, const char *eid, long long *code, int wait_ms,
    struct sbx_err *err)
{
	struct sbx_http_resp rs;
	long long until = sbx_mono_ms() + wait_ms;

	for (;;) {
		if (sbx_docker_req(d, "GET", NULL, &rs, err, "/exec/%s/json",
		    eid) < 0)
			return -1;
		if (rs.status != 200) {
			sbx_docker_fail(&rs, SBX_EX_EXECFAIL,
			    "cannot inspect the exec", err);
			sbx_http_resp_release(&rs);
			return -1;
		}
		if (!json_is_true(json_object_get(rs.json, "Running")) &&
		    json_is_integer(json_object_get(rs.json, "ExitCode"))) {
			*code = sbx_json_int(rs.json, "ExitCode", 0);
			sbx_http_resp_release(&rs);
			return 0;
		}
		sbx_http_resp_release(&rs);
		if (sbx_mono_ms() > until)
			return sbx_err_set(err, SBX_EX_EXECFAIL, "the exec did "
			    "not end");
		usleep(10000);
	}
}

/* Signal everything an exec started (by its tag), in a second exec. */
static int
signal_tagged(struct dk *d, const char *cid, int sig, const char *tag,
    struct sbx_err *err)
{
	char s[16], *eid = NULL;
	char *const argv[] = {"sh", "-c", (char *)killtag_sh, "sbx-kill", s,
	    (char *)tag, NULL};
	struct sbx_http_resp rs;
	json_t *b;
	long long code;
	int rc;

	snprintf(s, sizeof s, "%d", sig);
	if (exec_create(d, cid, argv, NULL, "/", NULL, 0, 0, &eid, err) < 0)
		return -1;
	b = json_pack("{sbsb}", "Detach", 1, "Tty", 0);
	rc = sbx_docker_req(d, "POST", b, &rs, err, "/exec/%s/start", eid);
	json_decref(b);
	if (rc == 0) {
		if (rs.status >= 300)
			rc = sbx_docker_fail(&rs, SBX_EX_EXECFAIL,
			    "cannot stop the "
			    "command", err);
		sbx_http_resp_release(&rs);
	}
	if (rc == 0)
		rc = exec_wait(d, eid, &code, 10000, err);
	free(eid);
	return rc;
}

static void
resize(struct dk *d, const char *eid)
{
	struct winsize ws;
	struct sbx_http_resp rs;
	struct sbx_err err;

	if (sbx_xs_winsize(&ws) < 0)
		return;
	if (sbx_docker_req(d, "POST", NULL, &rs, &err,
	    "/exec/%s/resize?h=%u&w=%u", eid, ws.ws_row, ws.ws_col) == 0)
		sbx_http_resp_release(&rs);
}

/* What the engine said when it could not start the command. */
static int
start_error(struct xrun *x, long long code, struct sbx_err *err)
{
	const char *t = x->dm.held.data;
	enum sbx_xs_why why = sbx_xs_start_why(t);
	char detail[301];

	if (why == SBX_XS_START_WORKDIR)
		return sbx_err_set(err, SBX_EX_EXECFAIL, "workdir '%s' does "
		    "not exist in the sandbox", x->o->cwd ? x->o->cwd :
		    "(default)");
	if (why == SBX_XS_START_OTHER && code == SBX_EX_NOEXEC)
		why = SBX_XS_START_NOEXEC;
	snprintf(detail, sizeof detail, "%s", t);
	return sbx_xs_start_fail(err, why, x->argv[0], detail);
}

static void
tag_new(char *tag)
{
	unsigned char r[16];
	size_t i;

	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		for (i = 0; i < sizeof r; i++)
			r[i] = (unsigned char)(rand() ^ getpid());
	for (i = 0; i < sizeof r; i++)
		snprintf(tag + 2 * i, 3, "%02x", r[i]);
}

/* The guard of an exec: a child of ours, in a session of its own, that
 * waits on a socket from us. "ok" comes once the command has ended; an
 * end without it means we died (even by SIGKILL), and the guard kills
 * everything tagged tag on a connection of its own, for the engine never
 * ends an exec whose client is gone. So a command ends with sbx-exec, at
 * the cost of a fork. *fd is our end; the guard's pid is returned. */
static pid_t
guard_start(const struct dk *d, const char *cid, const char *tag, int *fd,
    struct sbx_err *err)
{
	static const int quiet[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
	struct sbx_err e2;
	struct dk g;
	char ok[2] = "";
	int sv[2], null;
	size_t i, n;
	ssize_t r;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return sbx_err_set(err, SBX_EX_EXECFAIL, "socketpair:");
	if ((pid = fork()) < 0) {
		close(sv[0]);
		close(sv[1]);
		return sbx_err_set(err, SBX_EX_EXECFAIL, "fork:");
	}
	if (pid > 0) {
		close(sv[1]);
		*fd = sv[0];
		return pid;
	}
	close(sv[0]);
	setsid();
	for (i = 0; i < sizeof quiet / sizeof quiet[0]; i++)
		signal(quiet[i], SIG_IGN);
	/* Holding no pipe of the caller's open: a reader sees our EOF. */
	if ((null = open("/dev/null", O_RDWR)) >= 0)
		for (i = 0; i < 3; i++)
			dup2(null, (int)i);
	for (n = 0; n < 2; n += (size_t)r)
		if ((r = read(sv[1], ok + n, 2 - n)) <= 0 && !(r < 0 &&
		    errno == EINTR))
			break;
		else if (r < 0)
			r = 0;
	if (memcmp(ok, "ok", 2) && sbx_docker_open(&g, d->endpoint, &e2) == 0)
		signal_tagged(&g, cid, 9, tag, &e2);
	_exit(0);
}

/* Whether the container's environment (the image's and create's) sets
 * the variable "name=" names. */
static int
has_env(const json_t *c, const char *name)
{
	json_t *e = json_object_get(json_object_get(c, "Config"), "Env"), *v;
	size_t i;

	json_array_foreach(e, i, v)
		if (json_is_string(v) && !strncmp(json_string_value(v), name,
		    strlen(name)))
			return 1;
	return 0;
}

/* How often a running exec asks whether its container still runs: an
 * engine may hold the stream of a container that ended open (runsc). */
#define LIVE_MS 2000

/* 0 while the sandbox a command runs in is running or paused. */
static int
still_running(struct dk *d, const json_t *ref, struct sbx_err *err)
{
	const char *st;
	json_t *c;
	int rc = 0;

	if (sbx_docker_find(d, ref, &c, err) < 0)
		return err->code != SBX_EX_NOSANDBOX ? -1 : sbx_err_set(err,
		    SBX_EX_NOSANDBOX, "sandbox '%s' ended under the command "
		    "(gone)", sbx_json_str(ref, "id"));
	st = sbx_docker_status_of(c);
	if (strcmp(st, "running") && strcmp(st, "paused"))
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%s' ended "
		    "under the command (%s)", sbx_json_str(ref, "id"), st);
	json_decref(c);
	return rc;
}

static int
dx_start(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct xrun *x = t;
	struct sbx_http_req rq = {.method = "POST", .in_fd = -1, .out_fd = -1};
	long status;
	int fl;

	if ((x->guard = guard_start(x->d, x->cid, x->tag, &x->gfd, err)) < 0 ||
	    exec_create(x->d, x->cid, x->cmd, x->env, xs->o->cwd, xs->o->user,
	    sbx_xs_forwards_input(xs), xs->o->tty, &x->eid, err) < 0)
		return -1;
	x->path = sbx_xasprintf("/v%d.%d/exec/%s/start", API_MAJOR,
	    x->d->minor, x->eid);
	rq.path = x->path;
	rq.body = x->body = json_pack("{sbsb}", "Detach", 0, "Tty",
	    xs->o->tty);
	x->started = 1;
	if (sbx_http_hijack(x->d->h, &rq, &x->sock, &status, &x->rest,
	    err) < 0) {
		err->code = SBX_EX_EXECFAIL;
		return -1;
	}
	if (status >= 300)
		return sbx_err_set(err, status == 409 ? SBX_EX_NOSANDBOX :
		    SBX_EX_EXECFAIL, "cannot start the command: %.300s (status "
		    "%ld)", x->rest.data ? x->rest.data : "", status);
	if (xs->o->tty)
		resize(x->d, x->eid);
	/* Never blocked on a write: an engine that stops reading our stdin
	 * must not keep us from seeing the command end. */
	if ((fl = fcntl(x->sock, F_GETFL)) >= 0)
		fcntl(x->sock, F_SETFL, fl | O_NONBLOCK);
	return 0;
}

static int
dx_fds(void *t, struct pollfd *p, long long *wake)
{
	struct xrun *x = t;

	p[0] = (struct pollfd){x->sock, POLLIN | (x->inlen ? POLLOUT : 0), 0};
	if (x->rest.len)
		*wake = 0;
	/* Once killed at the deadline, only its end is awaited. */
	if (!x->xs->res->timed_out && (*wake < 0 || *wake > x->live_at))
		*wake = x->live_at;
	return 1;
}

static int
dx_ready(void *t, struct sbx_xs *xs, const struct pollfd *p, int n,
    struct sbx_err *err)
{
	struct xrun *x = t;
	char buf[65536];
	ssize_t r;

	(void)n;
	/* What came with the answer, once the terminal is as it will be. */
	if (x->rest.len) {
		demux(x, x->rest.data, x->rest.len);
		x->rest.len = 0;
	}
	if (!xs->res->timed_out && sbx_mono_ms() >= x->live_at) {
		if (still_running(x->d, x->ref, err) < 0)
			return -1;
		x->live_at = sbx_mono_ms() + LIVE_MS;
	}
	if (x->inlen && (p[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
		r = write(x->sock, x->inb + x->inoff, x->inlen - x->inoff);
		if (r > 0 && (x->inoff += (size_t)r) == x->inlen) {
			x->inlen = 0;
			sbx_xs_hold_input(xs, 0);
		}
		/* The command takes no more: stdin stays held. */
		if (r < 0 && errno != EINTR && errno != EAGAIN)
			x->inlen = 0;
	}
	if (p[0].revents) {
		r = read(x->sock, buf, sizeof buf);
		/* The first resize may come before the command's pty
		 * exists: once it writes, it surely does. */
		if (r > 0 && xs->o->tty && !x->resized) {
			resize(x->d, x->eid);
			x->resized = 1;
		}
		if (r > 0)
			demux(x, buf, (size_t)r);
		else if (r == 0 || (errno != EINTR && errno != EAGAIN))
			sbx_xs_done(xs);
	}
	return 0;
}

static int
dx_input(void *t, struct sbx_xs *xs, const char *p, size_t n)
{
	struct xrun *x = t;

	if (!n) {
		/* The end of our stdin: the command's too. */
		shutdown(x->sock, SHUT_WR);
		return 0;
	}
	if (n > sizeof x->inb)
		n = sizeof x->inb;
	memcpy(x->inb, p, n);
	x->inlen = n;
	x->inoff = 0;
	sbx_xs_hold_input(xs, 1);
	return 0;
}

static void
dx_signal(void *t, int sig)
{
	struct xrun *x = t;
	struct sbx_err e2;

	signal_tagged(x->d, x->cid, sig, x->tag, &e2);
}

static void
dx_resize(void *t)
{
	struct xrun *x = t;

	resize(x->d, x->eid);
}

static int
dx_expire(void *t, struct sbx_err *err)
{
	struct xrun *x = t;

	return signal_tagged(x->d, x->cid, 9, x->tag, err);
}

static int
dx_finish(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct xrun *x = t;
	struct sbx_exec_result *res = xs->res;
	long long code = 0;
	size_t i;
	int slow;

	if (exec_wait(x->d, x->eid, &code, 10000, err) < 0)
		return -1;
	/* A command killed with its sandbox: the sandbox is what failed.
	 * The engine may tell the exec's end (137, or 126 as the container
	 * stops) before the container's, so for those it waits half a
	 * second. */
	slow = code == 128 + SIGKILL || code == SBX_EX_NOEXEC;
	for (i = 0; (code > 128 || slow) && i < (slow ? 10u : 1u); i++) {
		if (i)
			usleep(50000);
		if (still_running(x->d, x->ref, err) < 0)
			return -1;
	}
	/* It has ended: what it left running stays. */
	send(x->gfd, "ok\n", 3, MSG_NOSIGNAL);
	if (x->dm.holding) {
		if ((code == SBX_EX_NOEXEC || code == SBX_EX_NOTFOUND) &&
		    !res->out.len && !res->err.len)
			return start_error(x, code, err);
		emit(x, 1, x->dm.held.data, x->dm.held.len);
	}
	if (res->timed_out)
		sbx_xs_end(res, SBX_XS_TIMEDOUT, 0);
	else
		sbx_xs_end_status(res, code);
	return 0;
}

static const struct sbx_xs_transport dx_transport = {
	.signals = SBX_XS_SIGS_END,
	/* The engine never ends an exec at a deadline: we kill by tag. */
	.flags = SBX_XS_DEADLINE,
	.start = dx_start,
	.fds = dx_fds,
	.ready = dx_ready,
	.input = dx_input,
	.signal = dx_signal,
	.resize = dx_resize,
	.expire = dx_expire,
	.finish = dx_finish,
};

/* -u's names, in the container's own files ($1 the user[:group]): the
 * engine would run nothing either, but say so on the command's stdout
 * with its 126. */
static const char user_sh[] =
    "u=${1%%:*} g=\n"
    "case $1 in *:*) g=${1#*:} ;; esac\n"
    "known() { awk -F: -v n=\"$2\" '$1 == n { f = 1 } END { exit !f }' "
    "\"$1\"; }\n"
    "case $u in *[!0-9]*) known /etc/passwd \"$u\" || "
    "{ echo \"no user '$u' in the sandbox's /etc/passwd\"; exit 1; } ;; "
    "esac\n"
    "case $g in *[!0-9]*) known /etc/group \"$g\" || "
    "{ echo \"no group '$g' in the sandbox's /etc/group\"; exit 1; } ;; "
    "esac\n";

static int
user_known(const json_t *ref, const char *user, struct sbx_err *err)
{
	char *const argv[] = {"sh", "-c", (char *)user_sh, "sbx-exec",
	    (char *)user, NULL};
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4096};
	struct sbx_exec_result r;
	int rc;

	/* Ids alone need no look-up. */
	if (strspn(user, "0123456789:") == strlen(user))
		return 0;
	if (sbx_docker_exec(ref, argv, &o, &r, err) < 0)
		return -1;
	rc = r.exit_code == 0 ? 0 : r.exit_code == 1 && r.out.len ?
	    sbx_err_set(err, SBX_EX_USAGE, "%.*s", (int)strcspn(r.out.data,
	    "\n"), r.out.data) : sbx_err_set(err, SBX_EX_EXECFAIL, "cannot "
	    "look user '%s' up in the sandbox (status %d)", user, r.exit_code);
	sbx_buf_release(&r.out);
	sbx_buf_release(&r.err);
	return rc;
}

/* How long an exec waits for the agent of a container that has just
 * started (sbx-create returns once the engine started it, not once its
 * agent listens). */
#define AGENT_WAIT_MS 3000

/* Whether the agent of container c may run this exec: a container made
 * with it (AGENT_LABEL), no -u (it has no capabilities to become
 * another user: the engine's exec does), none of our stdio a directory
 * (a container's process must never get an fd of the host's tree). */
static const char *
agent_for(const json_t *c, const struct sbx_exec_opts *o)
{
	const char *dir = sbx_docker_agent_dir(c);
	struct stat st;
	int fd;

	if (!dir || o->user)
		return NULL;
	for (fd = 0; fd < 3; fd++)
		if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
			return NULL;
	return dir;
}

/* A connection to the agent in dir: waited for, for a container that
 * started a moment ago; -1 when it does not listen (a runtime that keeps
 * its sockets to itself, as gVisor does). */
static int
agent_conn(const char *dir, const json_t *c)
{
	long long started = sbx_time_parse(sbx_json_str(json_object_get(c,
	    "State"), "StartedAt"));
	long long until = sbx_mono_ms();
	int fd;

	if (started > 0 && sbx_now() - started < AGENT_WAIT_MS / 1000)
		until += AGENT_WAIT_MS;
	for (;;) {
		if ((fd = sbx_docker_agent_connect(dir)) >= 0 ||
		    (errno != ENOENT && errno != ECONNREFUSED) ||
		    sbx_mono_ms() >= until)
			return fd;
		usleep(5000);
	}
}

/* The exec through the agent (agent.c): as on local, the caller's fds
 * passed, with what the engine's exec would add. */
static int
agent_exec(struct dk *d, const json_t *ref, const json_t *c, const char *dir,
    int sock, int std_open, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err)
{
	struct sbx_exec_opts ao = *o;
	struct sbx_err e2 = {0};
	size_t n = 0, k = 0;
	char **env;
	int rc, i;

	while (o->env && o->env[n])
		n++;
	env = sbx_xcalloc(n + 2, sizeof *env);
	/* As on every backend, a UTF-8 locale, unless the image has one. */
	if (!has_env(c, "LANG="))
		env[k++] = "LANG=C.UTF-8";
	if (n)
		memcpy(env + k, o->env, n * sizeof *env);
	ao.env = env;
	rc = sbx_agent_exec(dir, sbx_json_str(ref, "id"), sock,
	    sbx_docker_agent_connect, std_open, argv, &ao, res, err);
	/* The agent went: with its container? The engine may tell the
	 * container's end a moment after the agent's. */
	for (i = 0; rc < 0 && err->code == SBX_EX_EXECFAIL && i < 40; i++) {
		if (still_running(d, ref, &e2) < 0) {
			if (e2.code == SBX_EX_NOSANDBOX)
				*err = e2;
			break;
		}
		usleep(50000);
	}
	free(env);
	return rc;
}

int
sbx_docker_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err)
{
	struct xrun x = {.sock = -1, .gfd = -1, .guard = -1,
	    .rest = SBX_BUF_INIT};
	struct sbx_xs xs;
	struct dk d;
	char *term = NULL, *tag = NULL, rows[12], cols[12];
	const char *adir;
	struct winsize ws;
	json_t *c = NULL;
	size_t n = 0, i, k = 0;
	int rc = -1, std_open, asock;

	if (o->user && user_known(ref, o->user, err) < 0) {
		*res = (struct sbx_exec_result){0};
		return -1;
	}
	sbx_xs_init(&xs, o, res, &dx_transport, &x);
	/* Judged before the engine's connection may take a closed one. */
	std_open = xs.std_open;
	if (sbx_docker_ref_open(&d, ref, &c, err) < 0) {
		if (err->code != SBX_EX_NOSANDBOX)
			err->code = SBX_EX_EXECFAIL;
		return -1;
	}
	x.cid = sbx_json_str(c, "Id");
	if (!strcmp(sbx_docker_status_of(c), "paused") ||
	    !strcmp(sbx_docker_status_of(c), "stopped")) {
		sbx_xs_paused(err, sbx_json_str(ref, "id"),
		    sbx_docker_status_of(c));
		goto out;
	}
	if (strcmp(sbx_docker_status_of(c), "running")) {
		sbx_xs_not_running(err, sbx_json_str(ref, "id"),
		    sbx_docker_status_of(c));
		goto out;
	}
	if ((adir = agent_for(c, o)) && (asock = agent_conn(adir, c)) >= 0) {
		rc = agent_exec(&d, ref, c, adir, asock, std_open, argv, o, res,
		    err);
		goto out;
	}
	x.d = &d;
	x.ref = ref;
	x.o = o;
	x.xs = &xs;
	x.argv = argv;
	x.cmd = (char **)argv;
	x.dm.first = 1;
	x.live_at = xs.t0 + LIVE_MS;
	/* Everything the command starts carries the tag: --timeout and our
	 * signals reach them all through it. */
	tag_new(x.tag);
	while (o->env && o->env[n])
		n++;
	x.env = sbx_xcalloc(n + 4, sizeof *x.env);
	/* With a tty the engine sets TERM=xterm: the caller's replaces it,
	 * and -e TERM=..., later in the list, replaces that. */
	if (o->tty)
		x.env[k++] = term = sbx_xasprintf("TERM=%s", sbx_xs_term());
	/* As on every backend, a UTF-8 locale, unless the image has one. */
	if (!has_env(c, "LANG="))
		x.env[k++] = "LANG=C.UTF-8";
	for (i = 0; i < n; i++)
		x.env[k++] = o->env[i];
	x.env[k] = tag = sbx_xasprintf(SBX_EXEC_TAG_VAR "=%s", x.tag);
	if (o->tty && sbx_xs_winsize(&ws) == 0) {
		for (i = 0; argv[i]; i++)
			;
		x.cmd = sbx_xcalloc(i + 7, sizeof *x.cmd);
		x.cmd[0] = "sh";
		x.cmd[1] = "-c";
		x.cmd[2] = (char *)tty_sh;
		x.cmd[3] = "sbx-exec";
		x.cmd[4] = rows;
		x.cmd[5] = cols;
		snprintf(rows, sizeof rows, "%u", ws.ws_row);
		snprintf(cols, sizeof cols, "%u", ws.ws_col);
		memcpy(x.cmd + 6, argv, (i + 1) * sizeof *argv);
	}
	rc = sbx_xs_run(&xs, err);
out:
	/* x.sock is the client's: sbx_docker_close closes it. */
	if (x.guard > 0) {
		/* A command that never started needs no killing. */
		if (!x.started)
			send(x.gfd, "ok\n", 3, MSG_NOSIGNAL);
		close(x.gfd);
		waitpid(x.guard, NULL, 0);
	}
	if (x.cmd != argv)
		free(x.cmd);
	free(term);
	free(tag);
	free(x.env);
	sbx_buf_release(&x.dm.held);
	sbx_buf_release(&x.rest);
	json_decref(x.body);
	json_decref(c);
	free(x.eid);
	free(x.path);
	sbx_docker_close(&d);
	return rc;
}
