/* proc.c - envd's process service: commands in a sandbox over Connect RPC
 *
 * Each process is a child of sbxd that runs the backend's exec with the
 * process's pipes (or a pty of sbxd's) as its stdin, stdout and stderr,
 * and writes the result to a pipe at the end. A pump thread reads the
 * output and hands each chunk, as an envelope, to every stream that
 * watches the process (Start's, and Connect's). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

#define CHUNK 32768
#define PTY_CHUNK 16384
#define QUEUE_MAX (4u << 20) /* bytes a slow stream may hold back */

struct ev {
	struct ev *next;
	struct sbx_buf frame; /* one envelope */
};

/* One stream of a process's events. */
struct sub {
	struct sub *next;
	struct ev *head, *tail;
	size_t queued;
	int gone;             /* its client went */
	struct sbxd_wait *w;  /* its stream's wait: woken by an event */
	int ended;            /* the end event is queued */
	char *end_error;      /* the end of stream's error code, or NULL */
	char *end_msg;
	int lost;             /* its sandbox was killed: the stream breaks */
};

struct result {
	int rc, exit_code, signal, timed_out, code;
	char msg[512];
};

struct sbxd_proc {
	struct sbxd_proc *next;
	struct sbxd_box *box;
	unsigned pid;
	char *tag;
	json_t *config;
	struct sbxd_child ch; /* the runner: the backend's exec */
	int in_fd;            /* stdin's pipe or the pty's master; -1 */
	int pty;
	int out_fd, err_fd, res_fd;
	struct sub *subs;
	int refs;
	int done;
	int lost;             /* its sandbox was killed under it */
};

static void
proc_put(struct sbxd_proc *p)
{
	/* mu held */
	if (--p->refs)
		return;
	if (p->in_fd >= 0)
		close(p->in_fd);
	sbxd_child_release(&p->ch);
	free(p->tag);
	json_decref(p->config);
	sbxd_box_put_locked(p->box);
	free(p);
}

static char *
b64(const char *p, size_t n)
{
	char *s = sbx_xmalloc(4 * ((n + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)s, (const unsigned char *)p, (int)n);
	return s;
}

static struct ev *
ev_new(const json_t *msg, int flags)
{
	struct ev *e = sbx_xcalloc(1, sizeof *e);

	sbx_e2b_frame_json(&e->frame, flags, msg);
	return e;
}

/* Queue an event for every stream of p (mu held). */
static void
publish(struct sbxd_proc *p, const json_t *event)
{
	json_t *msg = json_pack("{s:O}", "event", event);
	struct sub *s;
	struct ev *e;

	for (s = p->subs; s; s = s->next) {
		if (s->gone)
			continue;
		e = ev_new(msg, 0);
		s->queued += e->frame.len;
		if (s->tail)
			s->tail->next = e;
		else
			s->head = e;
		s->tail = e;
		sbxd_wake(s->w);
	}
	json_decref(msg);
	pthread_cond_broadcast(&sbxd.cv);
}

static int
backed_up(struct sbxd_proc *p)
{
	struct sub *s;

	for (s = p->subs; s; s = s->next)
		if (!s->gone && s->queued > QUEUE_MAX)
			return 1;
	return 0;
}

/* Read what is there on fd into an event of kind; 0 at EOF. */
static int
pump_fd(struct sbxd_proc *p, int fd, const char *kind)
{
	char buf[CHUNK];
	ssize_t n;
	char *s;
	json_t *ev;
	struct timespec ts;

	n = read(fd, buf, p->pty ? PTY_CHUNK : CHUNK);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 1;
	if (n <= 0)
		return 0;
	s = b64(buf, (size_t)n);
	ev = json_pack("{s:{s:s}}", "data", kind, s);
	free(s);
	pthread_mutex_lock(&sbxd.mu);
	publish(p, ev);
	/* A stream that does not read holds the process back, as a pipe
	 * would: nothing is dropped. */
	while (backed_up(p) && !sbxd.stopping) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec++;
		pthread_cond_timedwait(&sbxd.cv, &sbxd.mu, &ts);
	}
	pthread_mutex_unlock(&sbxd.mu);
	json_decref(ev);
	return 1;
}

static const char *
signame(int sig)
{
	switch (sig) {
	case SIGKILL: return "killed";
	case SIGTERM: return "terminated";
	case SIGINT: return "interrupt";
	case SIGHUP: return "hangup";
	case SIGQUIT: return "quit";
	case SIGABRT: return "aborted";
	case SIGSEGV: return "segmentation fault";
	case SIGPIPE: return "broken pipe";
	case SIGALRM: return "alarm clock";
	case SIGUSR1: return "user defined signal 1";
	case SIGUSR2: return "user defined signal 2";
	default: return "signal";
	}
}

/* The end event and the end of stream, as envd writes them. */
static void
finish(struct sbxd_proc *p, const struct result *res)
{
	char status[64];
	json_t *end = json_object(), *ev;
	const char *ecode = NULL;
	const char *emsg = NULL;
	struct sub *s;

	if (res->rc < 0) {
		json_object_set_new(end, "exitCode", json_integer(-1));
		json_object_set_new(end, "status", json_string(res->msg));
		json_object_set_new(end, "error", json_string(res->msg));
		ecode = res->code == SBX_EX_NOSANDBOX ? "not_found" :
		    "unknown";
		emsg = res->msg;
	} else if (res->timed_out || res->signal) {
		snprintf(status, sizeof status, "signal: %s",
		    signame(res->timed_out ? SIGKILL : res->signal));
		json_object_set_new(end, "exitCode", json_integer(-1));
		json_object_set_new(end, "status", json_string(status));
		json_object_set_new(end, "error", json_string(status));
		if (res->timed_out) {
			ecode = "deadline_exceeded";
			emsg = "the operation timed out";
		}
	} else {
		snprintf(status, sizeof status, "exit status %d",
		    res->exit_code);
		if (res->exit_code)
			json_object_set_new(end, "exitCode",
			    json_integer(res->exit_code));
		json_object_set_new(end, "exited", json_true());
		json_object_set_new(end, "status", json_string(status));
		if (res->exit_code)
			json_object_set_new(end, "error", json_string(status));
	}
	ev = json_pack("{s:o}", "end", end);
	pthread_mutex_lock(&sbxd.mu);
	/* A sandbox killed under its processes takes envd with it: their
	 * streams break, with no end event and no end of stream, as E2B's
	 * do (the SDK then asks /health, 502 for a sandbox gone). */
	if (!p->lost)
		publish(p, ev);
	for (s = p->subs; s; s = s->next) {
		s->ended = 1;
		s->lost = p->lost;
		sbxd_wake(s->w);
		if (ecode) {
			s->end_error = sbx_xstrdup(ecode);
			s->end_msg = sbx_xstrdup(emsg);
		}
	}
	p->done = 1;
	pthread_cond_broadcast(&sbxd.cv);
	pthread_mutex_unlock(&sbxd.mu);
	json_decref(ev);
}

static void
proc_unlink(struct sbxd_proc *p)
{
	struct sbxd_proc **pp;

	/* mu held */
	for (pp = &p->box->procs; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			proc_put(p);
			break;
		}
}

static void *
pump(void *arg)
{
	struct sbxd_proc *p = arg;
	struct result res = {.rc = -1, .msg = "sbxd's exec ended early"};
	int out_eof = p->out_fd < 0, err_eof = p->err_fd < 0, res_eof = 0;
	ssize_t n;
	size_t got = 0;
	int status;

	while (!out_eof || !err_eof || !res_eof) {
		struct pollfd f[3] = {
			{out_eof ? -1 : p->out_fd, POLLIN, 0},
			{err_eof ? -1 : p->err_fd, POLLIN, 0},
			{res_eof ? -1 : p->res_fd, POLLIN, 0},
		};
		/* After the exit, only what is there already: something the
		 * command left behind may hold its output open. */
		int r = poll(f, 3, res_eof ? 0 : -1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (f[0].revents && !pump_fd(p, p->out_fd, p->pty ? "pty" :
		    "stdout"))
			out_eof = 1;
		if (f[1].revents && !pump_fd(p, p->err_fd, "stderr"))
			err_eof = 1;
		if (f[2].revents) {
			n = read(p->res_fd, (char *)&res + got,
			    sizeof res - got);
			if (n > 0)
				got += (size_t)n;
			else if (n == 0 || errno != EINTR)
				res_eof = 1;
		}
	}
	sbxd_child_wait(&p->ch, -1);
	status = p->ch.status;
	if (got != sizeof res) {
		memset(&res, 0, sizeof res);
		if (WIFSIGNALED(status)) {
			/* SendSignal SIGKILL ends the runner, and with it
			 * the command: that is how the command ended. */
			res.signal = WTERMSIG(status);
		} else {
			res.rc = -1;
			snprintf(res.msg, sizeof res.msg, "the process's "
			    "runner ended early");
		}
	}
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->err_fd >= 0)
		close(p->err_fd);
	close(p->res_fd);
	finish(p, &res);
	pthread_mutex_lock(&sbxd.mu);
	proc_unlink(p);
	proc_put(p); /* the pump's */
	pthread_mutex_unlock(&sbxd.mu);
	return NULL;
}

/* The process a selector names (mu held), or NULL. */
static struct sbxd_proc *
proc_find(struct sbxd_box *b, const json_t *sel)
{
	const json_t *proc = json_object_get(sel, "process");
	const json_t *pid = json_object_get(proc, "pid");
	const char *tag = sbx_json_str(proc, "tag");
	struct sbxd_proc *p;

	for (p = b->procs; p; p = p->next) {
		if (p->done)
			continue;
		if (json_is_integer(pid) &&
		    json_integer_value(pid) == (json_int_t)p->pid)
			return p;
		if (tag && p->tag && !strcmp(tag, p->tag))
			return p;
	}
	return NULL;
}

static void
sel_name(const json_t *sel, char *buf, size_t n)
{
	const json_t *proc = json_object_get(sel, "process");
	const json_t *pid = json_object_get(proc, "pid");

	if (json_is_integer(pid))
		snprintf(buf, n, "process with pid %lld not found",
		    (long long)json_integer_value(pid));
	else
		snprintf(buf, n, "process with tag %s not found",
		    sbx_json_str(proc, "tag") ? sbx_json_str(proc, "tag") :
		    "(none)");
}

/* --- streams ----------------------------------------------------------- */

struct stream {
	struct sbxd_proc *p;  /* NULL: only the end of stream is left */
	struct sub *sub;
	struct sbxd_stream io;
};

void
sbxd_stream_start(struct sbxd_stream *s, struct sbxd_req *r)
{
	const char *ka = sbxd_header(r, "Keepalive-Ping-Interval");
	const char *to = sbxd_header(r, "Connect-Timeout-Ms");
	uint64_t v;

	s->keepalive_ms = ka && sbx_parse_u64(ka, 1, 86400, &v) == 0 ?
	    (long long)v * 1000 : 90000;
	s->next_ping = sbx_mono_ms() + s->keepalive_ms;
	s->c = r->c;
	if (to && sbx_parse_u64(to, 1, UINT32_MAX, &v) == 0 && !s->deadline)
		s->deadline = sbx_mono_ms() + (long long)v;
}

void
sbxd_stream_end(struct sbxd_stream *s, const char *code, const char *msg)
{
	json_t *j = code ? json_pack("{s:{s:s,s:s}}", "error", "code", code,
	    "message", msg ? msg : "") : json_object();

	sbx_e2b_frame_json(&s->out, SBX_E2B_FRAME_END, j);
	json_decref(j);
	s->last = 1;
}

size_t
sbxd_stream_take(struct sbxd_stream *s, char *buf, size_t max)
{
	size_t n = s->out.len - s->off;

	if (!n) {
		s->out.len = s->off = 0;
		return 0;
	}
	if (n > max)
		n = max;
	memcpy(buf, s->out.data + s->off, n);
	s->off += n;
	return n;
}

/* Never blocks: with nothing to send, the connection waits suspended
 * until an event, the keepalive or the deadline (wake.c). */
static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *st = cls;
	struct ev *e;
	long long now, until;
	size_t n;
	int waited, broken;

	(void)pos;
	for (;;) {
		if ((n = sbxd_stream_take(&st->io, buf, max)))
			return (ssize_t)n;
		if (st->io.last)
			return MHD_CONTENT_READER_END_OF_STREAM;
		e = NULL;
		waited = broken = 0;
		pthread_mutex_lock(&sbxd.mu);
		{
			struct sub *s = st->sub;

			now = sbx_mono_ms();
			if ((e = s->head)) {
				s->head = e->next;
				if (!s->head)
					s->tail = NULL;
				s->queued -= e->frame.len;
				pthread_cond_broadcast(&sbxd.cv);
			} else if (s->ended && s->lost) {
				struct sbxd_box *b = st->p ? st->p->box : NULL;

				/* Broken once the sandbox is gone (unlinked:
				 * 502 on envd, 404 on the control plane, no
				 * more in sbx-ls), as the SDK's health check
				 * that follows wants it. */
				if (!b || b->gone || !b->dying)
					broken = 1;
				else
					waited = sbxd_wait(&st->io.w,
					    st->io.c, -1, now + 20) == 0;
			} else if (s->ended) {
				sbxd_stream_end(&st->io, s->end_error,
				    s->end_msg);
			} else if (sbxd.stopping) {
				sbxd_stream_end(&st->io, "unavailable",
				    "sbxd is stopping");
			} else if (st->io.deadline && now >= st->io.deadline) {
				sbxd_stream_end(&st->io, "deadline_exceeded",
				    "the operation timed out");
			} else if (now >= st->io.next_ping) {
				json_t *k = json_pack("{s:{s:{}}}", "event",
				    "keepalive");

				sbx_e2b_frame_json(&st->io.out, 0, k);
				json_decref(k);
				st->io.next_ping = now + st->io.keepalive_ms;
			} else {
				until = st->io.next_ping;
				if (st->io.deadline && st->io.deadline < until)
					until = st->io.deadline;
				/* Under mu: an event published after the
				 * look above wakes it. */
				waited = sbxd_wait(&st->io.w, st->io.c, -1,
				    until) == 0;
			}
		}
		pthread_mutex_unlock(&sbxd.mu);
		if (broken)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (waited)
			return 0;
		if (e) {
			sbx_buf_add(&st->io.out, e->frame.data, e->frame.len);
			sbx_buf_release(&e->frame);
			free(e);
			st->io.next_ping = sbx_mono_ms() + st->io.keepalive_ms;
		}
	}
}

static void
sub_free(struct sub *s)
{
	struct ev *e;

	while ((e = s->head)) {
		s->head = e->next;
		sbx_buf_release(&e->frame);
		free(e);
	}
	free(s->end_error);
	free(s->end_msg);
	free(s);
}

static void
stream_free(void *cls)
{
	struct stream *st = cls;
	struct sub **pp;

	pthread_mutex_lock(&sbxd.mu);
	if (st->p) {
		for (pp = &st->p->subs; *pp; pp = &(*pp)->next)
			if (*pp == st->sub) {
				*pp = st->sub->next;
				break;
			}
		proc_put(st->p);
	}
	pthread_cond_broadcast(&sbxd.cv);
	pthread_mutex_unlock(&sbxd.mu);
	sbxd_wait_cancel(&st->io.w);
	if (st->sub)
		sub_free(st->sub);
	sbx_buf_release(&st->io.out);
	free(st);
}

static enum MHD_Result
stream_reply(struct sbxd_req *r, struct stream *st)
{
	sbxd_stream_start(&st->io, r);
	return sbxd_reply_stream(r, CHUNK + 64, stream_read, st, stream_free);
}

/* A stream that is only an error (Connect streams fail with 200). */
static enum MHD_Result
stream_fail(struct sbxd_req *r, const char *code, const char *msg)
{
	struct stream *st = sbx_xcalloc(1, sizeof *st);

	sbxd_stream_end(&st->io, code, msg);
	return stream_reply(r, st);
}

json_t *
sbxd_stream_request(struct sbxd_req *r, enum MHD_Result *ret)
{
	const char *payload;
	size_t len;
	int flags;
	long used;
	json_t *j;

	used = sbx_e2b_unframe(r->body.data, r->body.len, sbxd.o.max_body,
	    &flags, &payload, &len);
	if (used <= 0 || (size_t)used != r->body.len || (flags & 1)) {
		*ret = sbxd_reply_connect(r, "invalid_argument", "%s",
		    used > 0 && (size_t)used == r->body.len ?
		    "compressed messages are not supported" :
		    "the request is not one Connect envelope");
		return NULL;
	}
	j = json_loadb(payload, len, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		*ret = sbxd_reply_connect(r, "invalid_argument",
		    "the request is not a JSON object");
		return NULL;
	}
	return j;
}

json_t *
sbxd_unary_request(struct sbxd_req *r, enum MHD_Result *ret)
{
	json_t *j = r->body.len ? json_loadb(r->body.data, r->body.len, 0,
	    NULL) : json_object();

	if (!json_is_object(j)) {
		json_decref(j);
		*ret = sbxd_reply_connect(r, "invalid_argument",
		    "the request is not a JSON object");
		return NULL;
	}
	return j;
}

/* --- Start --------------------------------------------------------------- */

/* "~", "~/x" and relative paths are the user's home's; none is the
 * template's WORKDIR when it has one, else the home of root (the
 * sandbox's workdir, /home/user, is the default user's). */
static char *
cwd_of(const char *cwd, int root, const char *home, const char *workdir)
{
	if ((!cwd || !*cwd) && workdir)
		return sbx_xstrdup(workdir);
	if (!cwd || !*cwd)
		return root ? sbx_xstrdup(home) : NULL;
	if (!strcmp(cwd, "~"))
		return sbx_xstrdup(home);
	if (!strncmp(cwd, "~/", 2))
		return sbx_xasprintf("%s/%s", home, cwd + 2);
	if (*cwd != '/')
		return sbx_xasprintf("%s/%s", home, cwd);
	return sbx_xstrdup(cwd);
}

/* Tells h_start that the command is in the sandbox: fd 4 closed. */
static void
child_started(void *arg)
{
	(void)arg;
	close(4);
}

/* A process that ran, in the sandbox's log on the host, as sbx-exec
 * writes it (sbx-logs(1); GET /sandboxes/{id}/logs); a failure to write
 * it is the command's business no more than sbx-exec's. */
static void
log_line(const json_t *ref, long long start, char **argv, char **env,
    const struct sbx_exec_result *res)
{
	char cid[SBX_CMDLOG_ID_LEN + 1];
	struct sbx_err err = {0};
	json_t *line;

	sbx_cmdlog_new_id(cid);
	line = sbx_cmdlog_line(start, cid, argv, env, 0);
	sbx_cmdlog_ended(line, res);
	sbx_cmdlog_append(sbxd.be->name, sbx_json_str(ref, "id"), line, &err);
	json_decref(line);
}

/* The spawner's child for a process: the backend's exec on fds 0, 1
 * and 2 (args: ref, argv, cwd, env, timeout_ms, tty, interactive), its
 * result on 3, and 4 closed once the command is handed to the sandbox;
 * fds are those five. */
void
sbxd_proc_child(json_t *args, int *fds, int nfds)
{
	struct sbx_exec_opts o = {0};
	struct sbx_exec_result res = {0};
	struct result out = {0};
	struct sbx_err err = {0};
	json_t *a = json_object_get(args, "argv");
	json_t *e = json_object_get(args, "env");
	char **argv, **env;
	long long start;
	size_t i;

	if (nfds != 5 || !json_array_size(a))
		_exit(125);
	setsid();
	/* Moved above 4 first, so that no dup2 overwrites another. */
	for (i = 0; i < 5; i++)
		fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10);
	for (i = 0; i < 5; i++)
		if (fds[i] < 0 || dup2(fds[i], (int)i) < 0)
			_exit(125);
	close_range(5, ~0U, 0);
	fcntl(4, F_SETFD, FD_CLOEXEC);
	o.started = child_started;
	o.tty = json_is_true(json_object_get(args, "tty"));
	o.interactive = json_is_true(json_object_get(args, "interactive"));
	o.timeout_ms = (uint64_t)sbx_json_int(args, "timeout_ms", 0);
	o.cwd = sbx_json_str(args, "cwd");
	o.user = sbx_json_str(args, "user");
	if (o.tty)
		ioctl(0, TIOCSCTTY, 0);
	argv = sbx_xcalloc(json_array_size(a) + 1, sizeof *argv);
	for (i = 0; i < json_array_size(a); i++)
		argv[i] = (char *)json_string_value(json_array_get(a, i));
	env = sbx_xcalloc(json_array_size(e) + 1, sizeof *env);
	for (i = 0; i < json_array_size(e); i++)
		env[i] = (char *)json_string_value(json_array_get(e, i));
	o.env = env;
	start = sbx_now();
	out.rc = sbxd.be->ops->exec(json_object_get(args, "ref"), argv, &o, &res,
	    &err);
	out.exit_code = res.exit_code;
	out.signal = res.signal;
	out.timed_out = res.timed_out;
	if (out.rc == 0)
		log_line(json_object_get(args, "ref"), start, argv, env, &res);
	if (out.rc < 0) {
		out.code = err.code;
		snprintf(out.msg, sizeof out.msg, "%s", err.msg);
	}
	if (sbx_write_all(3, &out, sizeof out) < 0)
		_exit(125);
	_exit(0);
}

/* What sbxd_proc_child needs of a process. */
static json_t *
proc_args(struct sbxd_box *b, char **argv, char **env,
    const struct sbx_exec_opts *o)
{
	json_t *a = json_array(), *e = json_array();
	size_t i;

	for (i = 0; argv[i]; i++)
		json_array_append_new(a, json_string(argv[i]));
	for (i = 0; env && env[i]; i++)
		json_array_append_new(e, json_string(env[i]));
	return json_pack("{s:O,s:o,s:o,s:s?,s:I,s:b,s:b,s:s?}", "ref", b->ref,
	    "argv", a, "env", e, "cwd", o->cwd, "timeout_ms",
	    (json_int_t)o->timeout_ms, "tty", o->tty, "interactive",
	    o->interactive, "user", o->user);
}

/* As envd: who a process runs as, the name the request gives (the SDK's
 * default "user", or "root"), looked up in the sandbox's passwd by its
 * files helper. *as: the exec's user (NULL: the sandbox's root, for
 * "user" where its image has no such account), *home its home. -1 with
 * the helper's error (an unknown name: "unauthenticated"). */
static int
run_as(struct sbxd_box *b, const char *name, char **as, char **home,
    json_t **fail)
{
	json_t *a;
	int known;

	*as = *home = NULL;
	*fail = NULL;
	if (!strcmp(name, "root")) {
		*as = sbx_xstrdup("0"); /* whatever its passwd calls it */
		*home = sbx_xstrdup("/root");
		return 0;
	}
	pthread_mutex_lock(&sbxd.mu);
	known = !strcmp(name, "user") ? b->has_user : 0;
	pthread_mutex_unlock(&sbxd.mu);
	if (known) {
		*as = known > 0 ? sbx_xstrdup(name) : NULL;
		*home = sbx_xstrdup("/home/user");
		return 0;
	}
	a = sbxd_inbox_do(b, json_pack("{s:s,s:s}", "op", "user", "user",
	    name), NULL);
	if (sbx_json_str(a, "error")) {
		*fail = a;
		return -1;
	}
	known = json_is_true(json_object_get(a, "known"));
	*as = known ? sbx_xstrdup(name) : NULL;
	*home = sbx_xstrdup(sbx_json_str(a, "home") ? sbx_json_str(a, "home") :
	    "/home/user");
	if (!strcmp(name, "user")) {
		pthread_mutex_lock(&sbxd.mu);
		b->has_user = known ? 1 : -1;
		pthread_mutex_unlock(&sbxd.mu);
	}
	json_decref(a);
	return 0;
}

static enum MHD_Result
h_start(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = sbxd_stream_request(r, &ret), *proc, *args, *v, *pty;
	struct sbx_exec_opts o = {0};
	struct sbxd_proc *p = NULL;
	struct stream *st;
	struct sbxd_box *b = r->box;
	const char *cmd, *to;
	char **argv = NULL, **env = NULL, *cwd = NULL, *name, *user;
	char *as = NULL, *home = NULL;
	json_t *ufail;
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	int res[2] = {-1, -1}, master = -1, slave = -1, use_stdin, root;
	int go[2] = {-1, -1};
	size_t i, n;
	uint64_t ms;
	pthread_t th;
	json_t *pargs = NULL;
	int spawned;

	if (!j)
		return ret;
	proc = json_object_get(j, "process");
	cmd = sbx_json_str(proc, "cmd");
	args = json_object_get(proc, "args");
	pty = json_object_get(j, "pty");
	if (!cmd || !*cmd || (args && !json_is_array(args))) {
		ret = stream_fail(r, "invalid_argument", "process.cmd is "
		    "required, process.args is a list of strings");
		goto out;
	}
	n = json_array_size(args);
	argv = sbx_xcalloc(n + 2, sizeof *argv);
	argv[0] = sbx_xstrdup(cmd);
	for (i = 0; i < n; i++) {
		v = json_array_get(args, i);
		if (!json_is_string(v)) {
			ret = stream_fail(r, "invalid_argument",
			    "process.args is a list of strings");
			goto out;
		}
		argv[i + 1] = sbx_xstrdup(json_string_value(v));
	}
	if (!json_is_null(json_object_get(proc, "envs")) &&
	    json_object_get(proc, "envs") &&
	    !json_is_object(json_object_get(proc, "envs"))) {
		ret = stream_fail(r, "invalid_argument",
		    "process.envs maps names to values");
		goto out;
	}
	env = sbxd_box_env(b, json_object_get(proc, "envs"));
	/* As envd: the user the request names (the SDK's "user" unless it
	 * asks for root), whose HOME comes first, before the sandbox's
	 * envVars and the process's envs. */
	user = sbxd_rpc_user(r);
	/* Not the default user: no cwd is the user's home, not ours. */
	root = user && strcmp(user, "user");
	if (run_as(b, user ? user : "user", &as, &home, &ufail) < 0) {
		free(user);
		ret = stream_fail(r, sbx_json_str(ufail, "error"),
		    sbx_json_str(ufail, "message"));
		json_decref(ufail);
		goto out;
	}
	free(user);
	free(env[0]);
	env[0] = sbx_xasprintf("HOME=%s", home);
	cwd = cwd_of(sbx_json_str(proc, "cwd"), root, home, b->workdir);
	o.user = as;
	v = json_object_get(j, "stdin");
	use_stdin = v ? json_is_true(v) : 1;
	if ((to = sbxd_header(r, "Connect-Timeout-Ms")) &&
	    sbx_parse_u64(to, 1, UINT32_MAX, &ms) == 0)
		o.timeout_ms = ms;
	o.cwd = cwd;
	o.env = env;
	o.tty = json_is_object(pty);
	o.interactive = o.tty || use_stdin;

	if (o.tty) {
		struct winsize ws = {24, 80, 0, 0};
		json_t *size = json_object_get(pty, "size");
		struct termios tio;

		ws.ws_col = (unsigned short)sbx_json_int(size, "cols", 80);
		ws.ws_row = (unsigned short)sbx_json_int(size, "rows", 24);
		if ((master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0
		    || grantpt(master) < 0 || unlockpt(master) < 0 ||
		    !(name = ptsname(master)) ||
		    (slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
			ret = stream_fail(r, "internal", "cannot open a pty");
			goto out;
		}
		ioctl(master, TIOCSWINSZ, &ws);
		/* The backend's exec makes the command's own pty inside
		 * the sandbox: ours only carries bytes, and raw from the
		 * start, else input sent before the backend made it raw
		 * would meet a line discipline twice (a ^D would arrive
		 * as a NUL). */
		if (tcgetattr(slave, &tio) == 0) {
			cfmakeraw(&tio);
			tcsetattr(slave, TCSANOW, &tio);
		}
	} else if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
	    (use_stdin ? pipe2(in, O_CLOEXEC) :
	    (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC))) < 0) {
		ret = stream_fail(r, "internal", "cannot make pipes");
		goto out;
	}
	if (pipe2(res, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0) {
		ret = stream_fail(r, "internal", "cannot make pipes");
		goto out;
	}

	p = sbx_xcalloc(1, sizeof *p);
	p->pty = o.tty;
	p->config = json_deep_copy(proc);
	if (sbx_json_str(j, "tag"))
		p->tag = sbx_xstrdup(sbx_json_str(j, "tag"));
	st = sbx_xcalloc(1, sizeof *st);
	st->sub = sbx_xcalloc(1, sizeof *st->sub);
	st->sub->w = &st->io.w;

	pthread_mutex_lock(&sbxd.mu);
	if (sbxd.stopping) {
		pthread_mutex_unlock(&sbxd.mu);
		free(st->sub);
		free(st);
		ret = stream_fail(r, "unavailable", "sbxd is stopping");
		goto out;
	}
	{
		int cfd[5] = {o.tty ? slave : in[0], o.tty ? slave : out[1],
		    o.tty ? slave : err[1], res[1], go[1]};
		struct sbx_err serr;

		pargs = proc_args(b, argv, env, &o);
		spawned = sbxd_spawn("proc", pargs, cfd, 5, &p->ch, &serr);
	}
	if (spawned < 0) {
		pthread_mutex_unlock(&sbxd.mu);
		free(st->sub);
		free(st);
		json_decref(p->config);
		free(p->tag);
		free(p);
		ret = stream_fail(r, "internal", "cannot fork");
		goto out;
	}
	p->box = b;
	b->refs++;
	p->pid = b->next_pid++;
	p->in_fd = o.tty ? master : use_stdin ? in[1] : -1;
	p->out_fd = o.tty ? dup(master) : out[0];
	p->err_fd = o.tty ? -1 : err[0];
	p->res_fd = res[0];
	if (o.tty)
		master = -1;
	else
		in[1] = out[0] = err[0] = -1;
	res[0] = -1;
	/* The table's ref, the pump's and the stream's. */
	p->refs = 3;
	p->next = b->procs;
	b->procs = p;
	p->subs = st->sub;
	st->p = p;
	pthread_mutex_unlock(&sbxd.mu);
	/* The start event once the command is in the sandbox (or its
	 * runner ended): envd's comes when the process runs, and a pause
	 * the client sends next must not keep it from starting. Bounded: a
	 * sandbox that does not answer gets its start event all the same. */
	close(go[1]);
	go[1] = -1;
	{
		struct pollfd gp = {go[0], POLLIN, 0};
		long long until = sbx_mono_ms() + 10000, left;

		while ((left = until - sbx_mono_ms()) > 0 &&
		    poll(&gp, 1, (int)left) < 0 && errno == EINTR)
			;
	}
	{
		json_t *start = json_pack("{s:{s:{s:I}}}", "event", "start",
		    "pid", (json_int_t)p->pid);

		sbx_e2b_frame_json(&st->io.out, 0, start);
		json_decref(start);
	}
	if (pthread_create(&th, NULL, pump, p) != 0) {
		sbxd_child_kill(&p->ch, SIGKILL);
		sbxd_log("cannot start a thread for process %u", p->pid);
		pthread_mutex_lock(&sbxd.mu);
		p->refs--;
		pthread_mutex_unlock(&sbxd.mu);
	} else {
		pthread_detach(th);
	}
	/* The process's life is the deadline: the exec ends it, and its
	 * end event comes before the stream's own deadline, a little
	 * later. */
	if (o.timeout_ms)
		st->io.deadline = sbx_mono_ms() + (long long)o.timeout_ms +
		    5000;
	ret = stream_reply(r, st);
out:
	for (i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
	sbxd_env_free(env);
	free(cwd);
	free(as);
	free(home);
	if (master >= 0)
		close(master);
	if (slave >= 0)
		close(slave);
	for (i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
		if (res[i] >= 0)
			close(res[i]);
		if (go[i] >= 0)
			close(go[i]);
	}
	json_decref(pargs);
	json_decref(j);
	return ret;
}

/* --- Connect, List and the unary ones ------------------------------------ */

static enum MHD_Result
h_connect(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = sbxd_stream_request(r, &ret), *start;
	struct sbxd_proc *p;
	struct stream *st;
	char msg[128];

	if (!j)
		return ret;
	pthread_mutex_lock(&sbxd.mu);
	if (!(p = proc_find(r->box, j))) {
		pthread_mutex_unlock(&sbxd.mu);
		sel_name(j, msg, sizeof msg);
		json_decref(j);
		return stream_fail(r, "not_found", msg);
	}
	st = sbx_xcalloc(1, sizeof *st);
	st->sub = sbx_xcalloc(1, sizeof *st->sub);
	st->sub->w = &st->io.w;
	st->sub->next = p->subs;
	p->subs = st->sub;
	st->p = p;
	p->refs++;
	start = json_pack("{s:{s:{s:I}}}", "event", "start", "pid",
	    (json_int_t)p->pid);
	pthread_mutex_unlock(&sbxd.mu);
	sbx_e2b_frame_json(&st->io.out, 0, start);
	json_decref(start);
	json_decref(j);
	return stream_reply(r, st);
}

static enum MHD_Result
h_list(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *arr, *o, *req = sbxd_unary_request(r, &ret);
	struct sbxd_proc *p;

	if (!req)
		return ret;
	json_decref(req);
	arr = json_array();
	pthread_mutex_lock(&sbxd.mu);
	for (p = r->box->procs; p; p = p->next) {
		if (p->done)
			continue;
		o = json_pack("{s:O,s:I}", "config", p->config, "pid",
		    (json_int_t)p->pid);
		if (p->tag)
			json_object_set_new(o, "tag", json_string(p->tag));
		json_array_append_new(arr, o);
	}
	pthread_mutex_unlock(&sbxd.mu);
	return sbxd_reply_json(r, 200, json_pack("{s:o}", "processes", arr));
}

/* The process of a unary request, with a ref; NULL after answering. */
static struct sbxd_proc *
unary_proc(struct sbxd_req *r, json_t **req, enum MHD_Result *ret)
{
	struct sbxd_proc *p;
	char msg[128];

	if (!(*req = sbxd_unary_request(r, ret)))
		return NULL;
	pthread_mutex_lock(&sbxd.mu);
	if ((p = proc_find(r->box, *req)))
		p->refs++;
	pthread_mutex_unlock(&sbxd.mu);
	if (!p) {
		sel_name(*req, msg, sizeof msg);
		*ret = sbxd_reply_connect(r, "not_found", "%s", msg);
		json_decref(*req);
	}
	return p;
}

static void
unary_done(struct sbxd_proc *p, json_t *req)
{
	pthread_mutex_lock(&sbxd.mu);
	proc_put(p);
	pthread_mutex_unlock(&sbxd.mu);
	json_decref(req);
}

static enum MHD_Result
h_send_input(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *req;
	struct sbxd_proc *p = unary_proc(r, &req, &ret);
	json_t *input;
	const char *data;
	struct sbx_buf bytes = {0};
	int fd;

	if (!p)
		return ret;
	input = json_object_get(req, "input");
	data = sbx_json_str(input, p->pty ? "pty" : "stdin");
	if (!data) {
		ret = sbxd_reply_connect(r, "invalid_argument", "input.%s is "
		    "required", p->pty ? "pty" : "stdin");
		goto out;
	}
	if (sbx_e2b_unb64(data, &bytes) < 0) {
		ret = sbxd_reply_connect(r, "invalid_argument",
		    "the input is not base64");
		goto out;
	}
	pthread_mutex_lock(&sbxd.mu);
	fd = p->in_fd >= 0 ? dup(p->in_fd) : -1;
	pthread_mutex_unlock(&sbxd.mu);
	if (fd < 0)
		ret = sbxd_reply_connect(r, "failed_precondition",
		    "stdin not enabled or closed");
	else if (sbx_write_all(fd, bytes.data, bytes.len) < 0)
		ret = sbxd_reply_connect(r, "failed_precondition",
		    "cannot write to the process's stdin: %s",
		    strerror(errno));
	else
		ret = sbxd_reply(r, 200, "application/json", "{}", 2);
	if (fd >= 0)
		close(fd);
out:
	sbx_buf_release(&bytes);
	unary_done(p, req);
	return ret;
}

static enum MHD_Result
h_send_signal(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *req;
	struct sbxd_proc *p = unary_proc(r, &req, &ret);
	const char *sig;
	json_t *v;
	int s = 0;

	if (!p)
		return ret;
	v = json_object_get(req, "signal");
	sig = json_string_value(v);
	if ((sig && !strcmp(sig, "SIGNAL_SIGKILL")) ||
	    (json_is_integer(v) && json_integer_value(v) == 9))
		s = SIGKILL;
	else if ((sig && !strcmp(sig, "SIGNAL_SIGTERM")) ||
	    (json_is_integer(v) && json_integer_value(v) == 15))
		s = SIGTERM;
	if (!s)
		ret = sbxd_reply_connect(r, "invalid_argument",
		    "unsupported signal");
	else {
		/* SIGTERM goes on to the command; SIGKILL ends the exec,
		 * and with it the command. */
		sbxd_child_kill(&p->ch, s);
		ret = sbxd_reply(r, 200, "application/json", "{}", 2);
	}
	unary_done(p, req);
	return ret;
}

static enum MHD_Result
h_close_stdin(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *req;
	struct sbxd_proc *p = unary_proc(r, &req, &ret);

	if (!p)
		return ret;
	pthread_mutex_lock(&sbxd.mu);
	if (p->pty) {
		pthread_mutex_unlock(&sbxd.mu);
		ret = sbxd_reply_connect(r, "failed_precondition", "a pty has "
		    "no stdin to close: send ^D");
	} else {
		if (p->in_fd >= 0)
			close(p->in_fd);
		p->in_fd = -1;
		pthread_mutex_unlock(&sbxd.mu);
		ret = sbxd_reply(r, 200, "application/json", "{}", 2);
	}
	unary_done(p, req);
	return ret;
}

static enum MHD_Result
h_update(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *req;
	struct sbxd_proc *p = unary_proc(r, &req, &ret);
	json_t *size;
	struct winsize ws = {0};

	if (!p)
		return ret;
	size = json_object_get(json_object_get(req, "pty"), "size");
	if (!p->pty) {
		ret = sbxd_reply_connect(r, "failed_precondition",
		    "the process has no pty");
	} else if (!size) {
		ret = sbxd_reply(r, 200, "application/json", "{}", 2);
	} else {
		ws.ws_col = (unsigned short)sbx_json_int(size, "cols", 80);
		ws.ws_row = (unsigned short)sbx_json_int(size, "rows", 24);
		pthread_mutex_lock(&sbxd.mu);
		if (p->in_fd >= 0)
			ioctl(p->in_fd, TIOCSWINSZ, &ws);
		pthread_mutex_unlock(&sbxd.mu);
		sbxd_child_kill(&p->ch, SIGWINCH);
		ret = sbxd_reply(r, 200, "application/json", "{}", 2);
	}
	unary_done(p, req);
	return ret;
}

static enum MHD_Result
h_stream_input(struct sbxd_req *r)
{
	return sbxd_reply_connect(r, "unimplemented", "StreamInput is not "
	    "supported by sbxd: use SendInput");
}

void
sbxd_proc_end_all(struct sbxd_box *b)
{
	struct sbxd_proc *p;

	sbxd_fs_end_all(b);
	sbxd_dt_sess_end_all(b);
	sbxd_dt_pty_end_all(b);

	pthread_mutex_lock(&sbxd.mu);
	for (p = b->procs; p; p = p->next)
		if (!p->done) {
			p->lost = 1;
			sbxd_child_kill(&p->ch, SIGKILL);
		}
	pthread_mutex_unlock(&sbxd.mu);
}

const struct sbxd_route sbxd_proc_routes[] = {
	{"POST", "/process.Process/Start", 1, h_start, NULL},
	{"POST", "/process.Process/Connect", 1, h_connect, NULL},
	{"POST", "/process.Process/List", 1, h_list, NULL},
	{"POST", "/process.Process/SendInput", 1, h_send_input, NULL},
	{"POST", "/process.Process/SendSignal", 1, h_send_signal, NULL},
	{"POST", "/process.Process/CloseStdin", 1, h_close_stdin, NULL},
	{"POST", "/process.Process/Update", 1, h_update, NULL},
	{"POST", "/process.Process/StreamInput", 1, h_stream_input, NULL},
	{NULL, NULL, 0, NULL, NULL},
};

int
sbxd_proc_user(struct sbxd_box *b, const char *name, char **as, char **home,
    json_t **fail)
{
	return run_as(b, name, as, home, fail);
}
