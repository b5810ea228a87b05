/* exec.c - sbx-exec on the e2b backend: envd's process stream as the
 * transport of the exec session (execio.h) */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../execio.h"
#include "e2b.h"

/* The process's stream is one Connect request, a blocking call: it runs
 * on a thread of its own, which writes the output as the envelopes come
 * and tells the session's loop (a byte on note) when the process has its
 * pid, and at the end (EOF). The loop makes the other calls: stdin
 * (SendInput, CloseStdin), resizes (Update), the forwarded signals
 * (SendSignal) and the keep-alive.
 *
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to sbx-exec go on to the
 * command, as the other backends forward them, and the command's status
 * is then sbx-exec's. envd's SendSignal knows SIGTERM and SIGKILL only:
 * each of them goes as SIGTERM. A guard, a child of ours in a session of
 * its own, kills the command should we die without saying it ended
 * (SIGKILL included): envd never ends a process whose stream's client is
 * gone. Both name the process by a tag of ours, given in its Start: no
 * wait for its pid. */
struct run {
	/* The stream's thread's own. */
	struct sbx_buf in;      /* what is not yet a whole envelope */
	struct sbx_buf bytes;   /* a decoded chunk */
	struct sbx_xs *xs;
	int started, ended, eos;
	long long exit_code;
	char status[128];
	char error_code[64];
	char error_msg[256];
	int bad;                /* what came was not Connect */
	struct envd v;          /* the stream's client */
	struct sbx_http_req rq;
	struct sbx_http_resp rs;
	struct sbx_err rerr;
	int rc;
	/* The loop's, once told. */
	long long pid;
	int note[2];            /* the thread's news; its end at EOF */
	pthread_t th;
	int th_running;
	const json_t *ref;
	const char *id;
	const json_t *sb;
	struct eb *e;           /* the API */
	char *const *argv;
	char tag[40];
	struct envd calls;      /* the loop's client */
	long long dur;          /* seconds each refresh asks for */
	long long every_ms;     /* between refreshes; 0: none */
	long long last_ms;      /* the last one (sbx_mono_ms) */
	int connect;            /* the first is the API's connect */
	int sig_pending;        /* a SIGTERM for the command, to send */
	long long sig_at;       /* when to try it again */
	int told;               /* the loop has the pid */
	int resize_pending;     /* asked before it had */
	struct sbx_xs_guard guard;
};

static const struct {
	const char *name;
	int sig;
} signames[] = {
	{"killed", SIGKILL}, {"terminated", SIGTERM}, {"interrupt", SIGINT},
	{"hangup", SIGHUP}, {"quit", SIGQUIT}, {"aborted", SIGABRT},
	{"segmentation fault", SIGSEGV}, {"broken pipe", SIGPIPE},
	{"alarm clock", SIGALRM}, {"user defined signal 1", SIGUSR1},
	{"user defined signal 2", SIGUSR2}, {"bus error", SIGBUS},
	{"floating point exception", SIGFPE}, {"illegal instruction", SIGILL},
};

/* "signal: killed" (Go's ProcessState.String()) into 9; 0 when not. */
static int
signal_of(const char *status)
{
	size_t i;

	if (strncmp(status, "signal: ", 8))
		return 0;
	for (i = 0; i < sizeof signames / sizeof signames[0]; i++)
		if (!strcmp(status + 8, signames[i].name))
			return signames[i].sig;
	return 0;
}

static int
output(struct run *r, int stream, const char *b64s)
{
	if (sbx_e2b_unb64(b64s, &r->bytes) < 0) {
		r->bad = 1;
		return -1;
	}
	sbx_xs_output(r->xs, stream, r->bytes.data, r->bytes.len);
	return 0;
}

static int
event(struct run *r, const json_t *msg)
{
	json_t *ev = json_object_get(msg, "event"), *x;
	const char *s;

	if ((x = json_object_get(ev, "start"))) {
		r->started = 1;
		r->pid = sbx_json_int(x, "pid", 0);
		/* Our pipe, and the loop reads it: it takes the byte. */
		return write(r->note[1], "s", 1) == 1 ? 0 : -1;
	}
	if ((x = json_object_get(ev, "data"))) {
		if ((s = sbx_json_str(x, "stdout")))
			return output(r, 1, s);
		if ((s = sbx_json_str(x, "stderr")))
			return output(r, 2, s);
		if ((s = sbx_json_str(x, "pty")))
			return output(r, 1, s);
		return 0;
	}
	if ((x = json_object_get(ev, "end"))) {
		r->ended = 1;
		r->exit_code = sbx_json_int(x, "exitCode", 0);
		snprintf(r->status, sizeof r->status, "%s", sbx_json_str(x,
		    "status") ? sbx_json_str(x, "status") : "");
		return 0;
	}
	return 0; /* keepalive, and what a later envd adds */
}

/* Take the whole envelopes out of what came. */
static int
on_body(const char *p, size_t n, void *arg)
{
	struct run *r = arg;
	const char *payload;
	size_t len, off = 0;
	long used;
	int flags;
	json_t *msg, *e;

	sbx_buf_add(&r->in, p, n);
	while ((used = sbx_e2b_unframe(r->in.data + off, r->in.len - off,
	    FRAME_MAX, &flags, &payload, &len)) > 0) {
		off += (size_t)used;
		msg = json_loadb(payload, len, 0, NULL);
		if (!json_is_object(msg)) {
			json_decref(msg);
			r->bad = 1;
			return -1;
		}
		if (flags & SBX_E2B_FRAME_END) {
			r->eos = 1;
			e = json_object_get(msg, "error");
			if (e) {
				snprintf(r->error_code, sizeof r->error_code,
				    "%s", sbx_json_str(e, "code") ?
				    sbx_json_str(e, "code") : "unknown");
				snprintf(r->error_msg, sizeof r->error_msg,
				    "%s", sbx_json_str(e, "message") ?
				    sbx_json_str(e, "message") : "");
			}
		} else if (event(r, msg) < 0) {
			json_decref(msg);
			return -1;
		}
		json_decref(msg);
	}
	if (used < 0) {
		r->bad = 1;
		return -1;
	}
	memmove(r->in.data, r->in.data + off, r->in.len - off);
	r->in.len -= off;
	return 0;
}

/* envd could not start the command: as env(1) says so. */
static int
start_error(const struct run *r, char *const argv[], struct sbx_err *err)
{
	const char *t = r->error_msg[0] ? r->error_msg : r->status;
	enum sbx_xs_why why = sbx_xs_start_why(t);
	char detail[400];

	/* envd's "invalid username: 'x'": nothing ran. */
	if (r->xs->o->user && !strcmp(r->error_code, "unauthenticated"))
		return sbx_err_set(err, SBX_EX_USAGE, "no user '%s' in the "
		    "sandbox (envd: %s)", r->xs->o->user, t);

	/* envd's "cwd '/x' does not exist" (sbxd's: "cannot change
	 * directory to '/x': ..."): the workdir, not the command; as
	 * envd says it. */
	if (why == SBX_XS_START_WORKDIR)
		return sbx_xs_start_fail(err, why, argv[0], t);
	snprintf(detail, sizeof detail, "%s%s%s", r->error_code[0] ?
	    r->error_code : "", r->error_code[0] ? ": " : "", t[0] ? t :
	    "no reason given");
	return sbx_xs_start_fail(err, why, argv[0], detail);
}

static json_t *
start_msg(char *const argv[], const struct sbx_exec_opts *o)
{
	json_t *args = json_array(), *envs = json_object(), *proc;
	char *k;
	size_t i;

	for (i = 1; argv[i]; i++)
		json_array_append_new(args, json_string(argv[i]));
	for (i = 0; o->env && o->env[i]; i++) {
		k = sbx_xstrdup(o->env[i]);
		k[strcspn(k, "=")] = '\0';
		json_object_set_new(envs, k, json_string(o->env[i] + strlen(k) +
		    (o->env[i][strlen(k)] == '=')));
		free(k);
	}
	proc = json_pack("{sssoso}", "cmd", argv[0], "args", args, "envs",
	    envs);
	if (o->cwd)
		json_object_set_new(proc, "cwd", json_string(o->cwd));
	return json_pack("{sosb}", "process", proc, "stdin", o->interactive);
}

/* --- signals: forwarded to the command, and a guard ---------------------- */

/* SendSignal to the tagged process. */
static int
send_signal(struct envd *v, const char *tag, const char *sig)
{
	struct sbx_err err;
	json_t *m;
	int rc;

	m = json_pack("{s{ss}ss}", "process", "tag", tag, "signal", sig);
	rc = sbx_e2b_envd_call(v, "SendSignal", m, &err);
	json_decref(m);
	return rc;
}

/* The guard's job, should we die: the command killed. */
static void
guard_kill(void *arg)
{
	struct run *r = arg;
	struct sbx_err err;
	struct envd v;

	if (sbx_e2b_envd_open(&v, r->ref, r->id, r->sb, &err) == 0)
		send_signal(&v, r->tag, "SIGNAL_SIGKILL");
}

/* The API's refresh (extend only; a paused sandbox stays paused), on a
 * client of its own; a failure waits for the next one. */
static void
keep_alive(struct run *r)
{
	struct eb te = *r->e;
	struct sbx_http_resp rs;
	struct sbx_err err;
	json_t *b;

	if (!(te.h = sbx_http_new(r->e->endpoint, &err)))
		return;
	if (r->connect) {
		sbx_e2b_connect(&te, r->ref, r->id, NULL, &err);
		sbx_http_free(te.h);
		return;
	}
	b = json_pack("{sI}", "duration", (json_int_t)r->dur);
	if (sbx_e2b_req(&te, "POST", b, &rs, &err, "/sandboxes/%s/refreshes",
	    r->id) == 0)
		sbx_http_resp_release(&rs);
	json_decref(b);
	sbx_http_free(te.h);
}

/* --- exec: the session's transport -------------------------------------- */

static void *
stream_main(void *arg)
{
	struct run *r = arg;

	r->rc = sbx_http_do(r->v.h, &r->rq, &r->rs, &r->rerr);
	close(r->note[1]);
	r->note[1] = -1;
	return NULL;
}

static int
rx_start(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct run *r = t;

	/* No stdin before the process has its pid. */
	sbx_xs_hold_input(xs, 1);
	sbx_xs_guard_start(&r->guard, &xs->old, guard_kill, r);
	if (sbx_e2b_envd_open(&r->calls, r->ref, r->id, r->sb, err) < 0)
		return -1;
	if (pipe2(r->note, O_CLOEXEC) < 0)
		return sbx_err_set(err, SBX_EX_EXECFAIL, "pipe:");
	if (pthread_create(&r->th, NULL, stream_main, r)) {
		close(r->note[1]);
		r->note[1] = -1;
		return sbx_err_set(err, SBX_EX_EXECFAIL, "cannot start a "
		    "thread");
	}
	r->th_running = 1;
	return 0;
}

static int
rx_fds(void *t, struct pollfd *p, long long *wake)
{
	struct run *r = t;
	long long at = -1;

	p[0] = (struct pollfd){r->note[0], POLLIN, 0};
	if (r->connect)
		at = 0;
	else if (r->every_ms)
		at = r->last_ms + r->every_ms;
	/* Before the process is there, not_found: again in 20 ms. */
	if (r->sig_pending && (at < 0 || at > r->sig_at))
		at = r->sig_at;
	if (at >= 0 && (*wake < 0 || *wake > at))
		*wake = at;
	return 1;
}

static void
resize_send(struct run *r)
{
	struct sbx_err err;
	json_t *msg = json_pack("{s{sI}so}", "process", "pid",
	    (json_int_t)r->pid, "pty", sbx_e2b_pty_size());

	/* The process may have ended meanwhile: not our failure. */
	sbx_e2b_envd_call(&r->calls, "Update", msg, &err);
	json_decref(msg);
}

static int
rx_ready(void *t, struct sbx_xs *xs, const struct pollfd *p, int n,
    struct sbx_err *err)
{
	struct run *r = t;
	char c;
	ssize_t k;

	(void)n;
	(void)err;
	if (r->sig_pending && sbx_mono_ms() >= r->sig_at) {
		if (send_signal(&r->calls, r->tag, "SIGNAL_SIGTERM") == 0)
			r->sig_pending = 0;
		r->sig_at = sbx_mono_ms() + 20;
	}
	if (r->connect) {
		keep_alive(r);
		r->connect = 0;
		r->last_ms = sbx_mono_ms();
	} else if (r->every_ms && sbx_mono_ms() >= r->last_ms + r->every_ms) {
		/* The sandbox is not idle while a command runs. */
		keep_alive(r);
		r->last_ms = sbx_mono_ms();
	}
	if (!p[0].revents)
		return 0;
	if ((k = read(r->note[0], &c, 1)) == 1) {
		/* The pid: stdin, and a resize asked before, go to it. */
		r->told = 1;
		sbx_xs_hold_input(xs, 0);
		if (r->resize_pending)
			resize_send(r);
		r->resize_pending = 0;
	} else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
		pthread_join(r->th, NULL);
		r->th_running = 0;
		sbx_xs_done(xs);
	}
	return 0;
}

/* Stdin, chunk by chunk (SendInput), and CloseStdin at its end. */
static int
rx_input(void *t, struct sbx_xs *xs, const char *p, size_t n)
{
	struct run *r = t;
	struct sbx_err err;
	json_t *msg;
	char *s;
	int rc;

	if (!n) {
		msg = json_pack("{s{sI}}", "process", "pid",
		    (json_int_t)r->pid);
		sbx_e2b_envd_call(&r->calls, "CloseStdin", msg, &err);
		json_decref(msg);
		return 0;
	}
	s = sbx_e2b_b64(p, n);
	msg = json_pack("{s{sI}s{ss}}", "process", "pid", (json_int_t)r->pid,
	    "input", xs->o->tty ? "pty" : "stdin", s);
	free(s);
	/* The process may have ended meanwhile: not our failure. */
	rc = sbx_e2b_envd_call(&r->calls, "SendInput", msg, &err);
	json_decref(msg);
	return rc;
}

static void
rx_signal(void *t, int sig)
{
	struct run *r = t;

	(void)sig;
	r->sig_pending = 1;
	r->sig_at = 0;
}

static void
rx_resize(void *t)
{
	struct run *r = t;

	if (r->told)
		resize_send(r);
	else
		r->resize_pending = 1;
}

/* The stream broke before the end: is the sandbox still there? */
static int
vanished(struct run *r, struct sbx_err *err)
{
	struct sbx_err gerr = {0};
	json_t *s2 = NULL;
	int rc;

	if (sbx_e2b_get(r->e, r->id, &s2, &gerr) < 0 && gerr.code ==
	    SBX_EX_NOSANDBOX)
		rc = sbx_xs_vanished(err, r->id, r->argv[0]);
	else
		rc = sbx_err_set(err, SBX_EX_FAIL, "the stream of '%s' broke "
		    "before its end", r->argv[0]);
	json_decref(s2);
	return rc;
}

static int
rx_finish(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct run *r = t;
	const struct sbx_exec_opts *o = xs->o;
	int sig;

	sbx_xs_guard_stop(&r->guard);
	/* Idle from now on: its timeout counts from the command's end. */
	if (r->rc == 0 && r->rs.status == 200 && r->ended &&
	    sbx_mono_ms() - r->last_ms >= 1000) {
		struct sbx_err cerr;

		sbx_e2b_connect(r->e, r->ref, r->id, NULL, &cerr);
	}
	if (r->rc < 0 && r->rs.timed_out && o->timeout_ms && r->started) {
		struct sbx_err kerr;
		json_t *k = json_pack("{s{sI}ss}", "process", "pid",
		    (json_int_t)r->pid, "signal", "SIGNAL_SIGKILL");

		/* Gone already (envd's own deadline) is as good. */
		sbx_e2b_envd_call(&r->calls, "SendSignal", k, &kerr);
		json_decref(k);
		sbx_xs_end(xs->res, SBX_XS_TIMEDOUT, 0);
		return 0;
	}
	if (r->rc < 0) {
		if (r->bad)
			return sbx_err_set(err, SBX_EX_FAIL,
			    "envd at '%s' sent "
			    "what is not a process's stream",
			    sbx_http_endpoint(r->v.h));
		if (r->started && !r->ended)
			return vanished(r, err);
		*err = r->rerr;
		return -1;
	}
	if (r->rs.status != 200) {
		if (r->rs.status == 401 || r->rs.status == 403)
			return sbx_err_set(err, SBX_EX_CRED, "envd refused the "
			    "sandbox's access token (status %ld)",
			    r->rs.status);
		if (r->rs.status == 502)
			/* E2B's edge: the sandbox is no more. */
			return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox "
			    "'%s': it is gone", r->id);
		return sbx_e2b_fail(&r->rs, "cannot start the command", NULL,
		    err);
	}
	if (!strcmp(r->error_code, "deadline_exceeded") && o->timeout_ms) {
		sbx_xs_end(xs->res, SBX_XS_TIMEDOUT, 0);
		return 0;
	}
	if (!r->ended) {
		if (!r->eos || r->started)
			return vanished(r, err);
		return start_error(r, r->argv, err);
	}
	/* Ended, not by a signal, without a status: it never ran. */
	if (r->exit_code < 0 && !signal_of(r->status))
		return start_error(r, r->argv, err);
	if ((sig = signal_of(r->status))) {
		struct sbx_err gerr = {0};
		json_t *s2 = NULL;

		/* A sandbox killed under it kills the command too: that
		 * is the sandbox's end, not the command's. */
		if (sig == SIGKILL && sbx_e2b_get(r->e, r->id, &s2,
		    &gerr) < 0 && gerr.code == SBX_EX_NOSANDBOX)
			return sbx_xs_vanished(err, r->id, r->argv[0]);
		json_decref(s2);
		sbx_xs_end(xs->res, SBX_XS_KILLED, sig);
	} else {
		sbx_xs_end(xs->res, SBX_XS_EXITED, (int)(r->exit_code & 0xff));
	}
	return 0;
}

static const struct sbx_xs_transport rx_transport = {
	.signals = SBX_XS_SIGS_END, /* each goes as SIGTERM */
	.start = rx_start,
	.fds = rx_fds,
	.ready = rx_ready,
	.input = rx_input,
	.signal = rx_signal,
	.resize = rx_resize,
	.finish = rx_finish,
};

static int
exec_once(const json_t *ref, char *const argv[], const struct sbx_exec_opts *o,
    struct sbx_exec_result *res, struct sbx_err *err, int detail,
    int *from_detail)
{
	struct sbx_buf frame = SBX_BUF_INIT;
	struct sbx_exec_opts wo = *o;
	unsigned char rnd[16];
	char *wdir = NULL;
	const char *wd;
	struct sbx_xs xs;
	struct run r;
	struct eb e;
	json_t *sb = NULL, *msg = NULL;
	const char *hdrs[10];
	char tmo[64], *auth = NULL;
	const char *id;
	size_t i, n;
	int rc = -1;

	memset(&r, 0, sizeof r);
	r.note[0] = r.note[1] = r.guard.fd = -1;
	r.guard.pid = -1;
	sbx_xs_init(&xs, &wo, res, &rx_transport, &r);
	if (!argv[0])
		return sbx_err_set(err, SBX_EX_USAGE, "no command to run");
	/* envd looks a user up by name, and takes no group. */
	if (o->user && (strchr(o->user, ':') || strspn(o->user,
	    "0123456789") == strlen(o->user)))
		return sbx_err_set(err, SBX_EX_USAGE, "the e2b backend takes a "
		    "user's name alone, not '%s' (envd has no uid or group)",
		    o->user);
	if (sbx_e2b_ref_id(ref, &id, err) < 0 ||
	    sbx_e2b_open(&e, sbx_json_str(ref, "endpoint"), err) < 0)
		return -1;
	/* Only one of ours, and connect would resume a paused one. */
	if (sbx_e2b_get(&e, id, &sb, err) < 0)
		goto out;
	if (!strcmp(sbx_json_str(sb, "state") ? sbx_json_str(sb, "state") :
	    "", "paused")) {
		sbx_xs_paused(err, id, "paused");
		goto out;
	}
	/* The sandbox's workdir, kept in its metadata, by default. */
	if (!wo.cwd && (wd = sbx_json_str(json_object_get(sb, "metadata"),
	    WORKDIR)))
		wo.cwd = wdir = sbx_xstrdup(wd);
	/* Connect refreshes the sandbox's TTL and gives envd's token. The
	 * detail has the token too on E2B and sbxd: then connect goes
	 * beside the command's start, first thing in the session's loop. */
	if (detail && sbx_json_str(sb, "envdAccessToken")) {
		r.connect = 1;
		*from_detail = 1;
	} else {
		json_decref(sb);
		sb = NULL;
		if (sbx_e2b_connect(&e, ref, id, &sb, err) < 0)
			goto out;
	}
	/* Then again while the command runs (E2B takes at most an hour
	 * a time, and makes less 15 s), and once more at its end. */
	r.last_ms = sbx_mono_ms();
	r.dur = sbx_json_int(ref, "timeout", DEFAULT_TIMEOUT);
	if (r.dur <= 0)
		r.dur = DEFAULT_TIMEOUT;
	if (r.dur > 3600)
		r.dur = 3600;
	r.every_ms = r.dur * 1000 / 3 < 1000 ? 1000 : r.dur * 1000 / 3;
	r.e = &e;
	if (sbx_e2b_envd_open(&r.v, ref, id, sb, err) < 0)
		goto out;
	/* -u: envd's user, as the SDKs name it, in place of root. */
	if (o->user) {
		char *up = sbx_xasprintf("%s:", o->user), *b = sbx_e2b_b64(up,
		    strlen(up));

		auth = sbx_xasprintf("Authorization: Basic %s", b);
		free(up);
		free(b);
	}
	for (n = 0; r.v.hdrs[n]; n++)
		hdrs[n] = auth && !strcmp(r.v.hdrs[n], AS_ROOT) ? auth :
		    r.v.hdrs[n];
	hdrs[n++] = "Keepalive-Ping-Interval: 50";
	/* envd ends the process at its deadline too, should our signal
	 * not reach it. */
	if (o->timeout_ms) {
		snprintf(tmo, sizeof tmo, "Connect-Timeout-Ms: %llu",
		    (unsigned long long)o->timeout_ms);
		hdrs[n++] = tmo;
	}
	hdrs[n] = NULL;
	msg = start_msg(argv, &wo);
	if (o->tty)
		sbx_e2b_pty_start_msg(msg);
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		memset(rnd, 0, sizeof rnd);
	memcpy(r.tag, "sbx-", 4);
	for (i = 0; i < sizeof rnd; i++)
		snprintf(r.tag + 4 + 2 * i, 3, "%02x", rnd[i]);
	json_object_set_new(msg, "tag", json_string(r.tag));
	sbx_e2b_frame_json(&frame, 0, msg);
	r.rq = (struct sbx_http_req){.method = "POST", .in_fd = -1,
	    .out_fd = -1, .path = "/process.Process/Start", .in_type =
	    "application/connect+json", .data = frame.data, .data_len =
	    frame.len, .headers = hdrs, .timeout_ms = (long)o->timeout_ms,
	    .on_body = on_body, .on_body_arg = &r};
	r.ref = ref;
	r.id = id;
	r.sb = sb;
	r.argv = argv;
	r.xs = &xs;
	r.in.limit = FRAME_MAX + 16;
	rc = sbx_xs_run(&xs, err);
out:
	if (r.th_running)
		pthread_join(r.th, NULL);
	sbx_xs_guard_stop(&r.guard);
	for (i = 0; i < 2; i++)
		if (r.note[i] >= 0)
			close(r.note[i]);
	for (i = 0; i < frame.len; i++)
		frame.data[i] = 0;
	sbx_buf_release(&frame);
	sbx_buf_release(&r.in);
	sbx_buf_release(&r.bytes);
	if (r.rq.path)
		sbx_http_resp_release(&r.rs);
	if (msg) {
		/* It holds the values of --env. */
		json_object_clear(msg);
		json_decref(msg);
	}
	sbx_e2b_envd_close(&r.calls);
	sbx_e2b_envd_close(&r.v);
	if (sb) {
		json_object_clear(sb);
		json_decref(sb);
	}
	free(wdir);
	free(auth);
	sbx_e2b_close(&e);
	return rc;
}

int
sbx_e2b_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o,
    struct sbx_exec_result *res, struct sbx_err *err)
{
	int from_detail = 0;

	if (exec_once(ref, argv, o, res, err, 1, &from_detail) == 0)
		return 0;
	if (!from_detail || err->code != SBX_EX_CRED)
		return -1;
	/* envd refused the detail's token (before anything ran): the
	 * one connect gives, as the SDKs take it. */
	return exec_once(ref, argv, o, res, err, 0, &from_detail);
}
