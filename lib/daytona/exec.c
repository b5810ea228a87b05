/* exec.c - sbx-exec on the daytona backend: a command of a toolbox session
 * of our own as the transport of the exec session (execio.h) */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "../execio.h"
#include "daytona.h"

/* The command runs async in a session of ours (POST .../exec), as a
 * fixed script, sh -c's, with the data as its arguments only (the
 * token, the workdir, stdin's way, the -e pairs, argv): it checks what
 * the other backends' engines check before they start a command (the
 * workdir, the command found and executable), says the outcome on the
 * first line of stdout ("TOKEN ok PID", or "TOKEN 127", ...: never the
 * user's), and execs the command, whose status is then the session's
 * exit code. Its output comes live from the command's log followed on
 * a WebSocket (binary frames, stdout and stderr behind Daytona's
 * markers); without one (a proxy that refuses it, a stream that
 * broke), from polling the command and its log.
 *
 * Daytona's /input has no end of file: with -i the script reads base64
 * lines from the session's stdin into a FIFO, the command's stdin,
 * until a line "." (our end). Every process of the command carries
 * SBX_EXEC_ID=TOKEN in its environment: --timeout, and a guard should
 * we die (SIGKILL included), kill them all by it, even those that left
 * the command's session (setsid). Forwarded signals go to the
 * command's own pid.
 *
 * -u is refused: the toolbox runs every command as the sandbox's user,
 * and its session's shell holds no capability to become another (sbxd's
 * drops them all; setpriv and su fail). */
static const char script[] =
    "exec 2>&3 3>&-\n"
    "if [ -n \"${SBX_EXEC_N:-}\" ]; then\n"
    "\tset --; k=0\n"
    "\twhile [ $k -lt \"$SBX_EXEC_N\" ]; do\n"
    "\t\teval \"set -- \\\"\\$@\\\" \\\"\\$SBX_EXEC_A$k\\\"; \"\n"
    "\t\tunset SBX_EXEC_A$k\n"
    "\t\tk=$((k + 1))\n"
    "\tdone\n"
    "\tunset SBX_EXEC_N SBX_EXEC_SCRIPT k\n"
    "fi\n"
    "t=$1 d=$2 i=$3 n=$4; shift 4\n"
    "while [ \"$n\" -gt 0 ]; do export \"$1\"; shift; n=$((n - 1)); done\n"
    "export SBX_EXEC_ID=\"$t\"\n"
    "if [ -n \"$d\" ] && ! cd -- \"$d\" 2>/dev/null; then\n"
    "\tprintf '%s cwd\\n' \"$t\"; exit 125; fi\n"
    "unset OLDPWD\n"
    "case $1 in\n"
    "*/*) if [ ! -e \"$1\" ]; then printf '%s 127\\n' \"$t\"; exit 127; fi\n"
    "\tif [ -d \"$1\" ] || [ ! -x \"$1\" ]; then\n"
    "\t\tprintf '%s 126\\n' \"$t\"; exit 126; fi ;;\n"
    "*) if ! command -v \"$1\" >/dev/null 2>&1; then\n"
    "\t\tprintf '%s 127\\n' \"$t\"; exit 127; fi ;;\n"
    "esac\n"
    "if [ \"$i\" = 1 ]; then\n"
    "\tf=$(mktemp -d) && mkfifo \"$f/in\" || {\n"
    "\t\tprintf '%s fifo\\n' \"$t\"; exit 125; }\n"
    "\texec 3<&0\n"
    "\t(while IFS= read -r l; do [ \"$l\" = . ] && break\n"
    "\t\tprintf '%s\\n' \"$l\" | base64 -d 2>/dev/null || break\n"
    "\tdone) <&3 >\"$f/in\" 2>/dev/null 3<&- &\n"
    "\texec <\"$f/in\" 3<&-\n"
    "\trm -rf \"$f\"\n"
    "fi\n"
    "printf '%s ok %s\\n' \"$t\" \"$$\"\n"
    "exec \"$@\"\n";

/* Every process tagged $1, killed with $2 (twice: one may fork). */
static const char kill_script[] =
    "for k in 1 2; do for p in /proc/[0-9]*; do q=${p#/proc/}\n"
    "[ \"$q\" = $$ ] && continue\n"
    "tr '\\0' '\\n' <\"$p/environ\" 2>/dev/null |\n"
    "grep -qx \"SBX_EXEC_ID=$1\" && kill -\"$2\" \"$q\" 2>/dev/null\n"
    "done; done; exit 0\n";

#define POLL_MS 200        /* polling, without a stream */
#define CHECK_MS 2000      /* the command still there, with one */
#define END_WAIT_MS 10000  /* its exit code, once its stream ended */
#define INPUT_CHUNK 36864  /* stdin's bytes a line of /input carries */
#define HEAD_MAX 128       /* the script's line */
#define WS_MAX (8u << 20)  /* a log frame */

struct run {
	struct sbx_xs *xs;
	struct dt d;
	struct dtb tb;
	json_t *sb;
	int fast;              /* sb made of the ref, not asked for yet */
	const char *id;
	char *const *argv;
	char tok[40];          /* the session's id and the processes' tag */
	char *cmd_id;
	/* The log stream, or polling without one. */
	struct sbx_http_conn *ws;
	struct sbx_ws_reader rd;
	int tag;               /* the stream of what comes now: 1, 2; 0 none */
	unsigned char held[2]; /* a marker's start at a frame's end */
	size_t nheld;
	unsigned long long seen[3]; /* bytes of stdout (line and all), stderr */
	long long next_ms;
	int first;             /* the stream just opened: read, not polled */
	/* The script's line. */
	char head[HEAD_MAX];
	size_t nhead;
	int head_done;
	char outcome[8];       /* "ok", "127", "126", "cwd", "fifo" */
	long long pid;
	int ended;             /* the command's exit code is known */
	long long exit_code;
	int lost;              /* the command's session went away */
	int sig_pending;
	/* -t: a PTY of the toolbox; what comes before the script's line
	 * (the shell's prompt, its echo) is dropped. */
	int pty;
	struct sbx_buf pre;
	struct sbx_xs_guard guard;
};

/* --- requests ------------------------------------------------------------- */

/* A JSON request to the toolbox: its answer in rs (release it). */
static int
tb_json(struct run *r, const char *method, json_t *body,
    struct sbx_http_resp *rs, struct sbx_err *err, const char *path)
{
	struct sbx_http_req rq = {.method = method, .in_fd = -1, .out_fd = -1,
	    .body = body, .idempotent = !strcmp(method, "GET")};

	memset(rs, 0, sizeof *rs);
	return sbx_dt_tb_do(&r->tb, &rq, rs, err, "%s", path);
}

/* "'a'\''b'": a word for the session's shell. */
static void
quote(struct sbx_buf *b, const char *s)
{
	sbx_buf_add(b, " '", 2);
	for (; *s; s++)
		if (*s == '\'')
			sbx_buf_add(b, "'\\''", 4);
		else
			sbx_buf_add(b, s, 1);
	sbx_buf_add(b, "'", 1);
}

/* The script's arguments after $0, as a JSON array. */
static json_t *
script_args(struct run *r, const struct sbx_exec_opts *o)
{
	json_t *a = json_array();
	char num[24];
	size_t n = 0;

	json_array_append_new(a, json_string(r->tok));
	json_array_append_new(a, json_string(o->cwd ? o->cwd : ""));
	json_array_append_new(a, json_string(o->interactive && !o->tty ?
	    "1" : "0"));
	while (o->env && o->env[n])
		n++;
	snprintf(num, sizeof num, "%zu", n);
	json_array_append_new(a, json_string(num));
	for (n = 0; o->env && o->env[n]; n++)
		json_array_append_new(a, json_string(o->env[n]));
	for (n = 0; r->argv[n]; n++)
		json_array_append_new(a, json_string(r->argv[n]));
	return a;
}

/* The strings of j zeroed (they hold the values of -e). */
static void
wipe_strings(json_t *j)
{
	json_t *v;
	const char *k;
	size_t i;

	if (json_is_string(j) && json_string_length(j))
		explicit_bzero((char *)json_string_value(j),
		    json_string_length(j));
	json_array_foreach(j, i, v)
		wipe_strings(v);
	json_object_foreach(j, k, v)
		wipe_strings(v);
}

static void
wipe_json(json_t *j)
{
	wipe_strings(j);
	json_decref(j);
}

/* The command line the session runs. */
static char *
command_line(struct run *r, const struct sbx_exec_opts *o)
{
	struct sbx_buf b = SBX_BUF_INIT;
	json_t *a = script_args(r, o), *v;
	size_t i;

	/* The session's shell waits with its stderr on /dev/null, and
	 * the script takes the real one from fd 3: what a shell says of
	 * a command killed ("Killed") goes nowhere, and the session's
	 * stderr is the command's alone. */
	sbx_buf_add(&b, "{ sh -c", 7);
	quote(&b, script);
	quote(&b, "sbx-exec");
	json_array_foreach(a, i, v)
		quote(&b, json_string_value(v));
	wipe_json(a);
	if (!o->interactive)
		sbx_buf_add(&b, " </dev/null", 11);
	sbx_buf_add(&b, "; } 3>&2 2>/dev/null", 20);
	sbx_buf_add(&b, "", 1);
	return b.data;
}

/* A shell command run to its end with /process/execute. */
static int
execute(struct dtb *tb, const char *cmd)
{
	struct sbx_http_req rq = {.method = "POST", .in_fd = -1, .out_fd = -1,
	    .timeout_ms = 30000};
	struct sbx_http_resp rs = {0};
	struct sbx_err err;
	int rc;

	rq.body = json_pack("{ss}", "command", cmd);
	rc = sbx_dt_tb_do(tb, &rq, &rs, &err, "/process/execute");
	if (rc == 0 && rs.status / 100 != 2)
		rc = -1;
	json_decref(rq.body);
	sbx_http_resp_release(&rs);
	return rc;
}

/* Every process of the command (tag tok), by signal sig. */
static int
kill_all(struct dtb *tb, const char *tok, int sig)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char num[16];
	int rc;

	snprintf(num, sizeof num, "%d", sig);
	sbx_buf_add(&b, "sh -c", 5);
	quote(&b, kill_script);
	quote(&b, "sbx-exec");
	quote(&b, tok);
	quote(&b, num);
	sbx_buf_add(&b, "", 1);
	rc = execute(tb, b.data);
	sbx_buf_release(&b);
	return rc;
}

/* The command's session, or its PTY (pty), deleted: what is left of
 * it ends. */
static void
session_delete(struct dtb *tb, const char *tok, int pty)
{
	struct sbx_http_req rq = {.method = "DELETE", .in_fd = -1,
	    .out_fd = -1, .idempotent = 1, .timeout_ms = 30000};
	struct sbx_http_resp rs = {0};
	struct sbx_err err;

	sbx_dt_tb_do(tb, &rq, &rs, &err, "/process/%s/%s", pty ? "pty" :
	    "session", tok);
	sbx_http_resp_release(&rs);
}

/* --- the output ----------------------------------------------------------- */

/* The script's line after the token: "ok PID", "127"... */
static void
outcome(struct run *r, const char *w)
{
	snprintf(r->outcome, sizeof r->outcome, "%.*s", (int)strcspn(w,
	    " \r"), w);
	if (!strcmp(r->outcome, "ok"))
		r->pid = strtoll(w + 2, NULL, 10);
}

/* A PTY's output: all before the script's line is the shell's. */
static void
pty_out(struct run *r, const char *p, size_t n)
{
	char *at, *nl;
	size_t tl = strlen(r->tok);

	if (r->head_done) {
		sbx_xs_output(r->xs, 1, p, n);
		return;
	}
	sbx_buf_add(&r->pre, p, n);
	sbx_buf_add(&r->pre, "", 1);
	r->pre.len--;
	for (at = r->pre.data; (at = strstr(at, r->tok)); at += tl)
		if (at[tl] == ' ' && (nl = strchr(at, '\n'))) {
			outcome(r, at + tl + 1);
			r->head_done = 1;
			nl++;
			if (nl < r->pre.data + r->pre.len)
				sbx_xs_output(r->xs, 1, nl, (size_t)(
				    r->pre.data + r->pre.len - nl));
			r->pre.len = 0;
			return;
		}
	/* A shell that says much before it: its last bytes are enough. */
	if (r->pre.len > 65536) {
		memmove(r->pre.data, r->pre.data + r->pre.len - 4096, 4096);
		r->pre.len = 4096;
	}
}

/* Bytes of stream s (1 stdout, 2 stderr): the script's line first. */
static void
emit(struct run *r, int s, const char *p, size_t n)
{
	char *nl;
	size_t k;

	r->seen[s] += n;
	if (s == 1 && !r->head_done) {
		nl = memchr(p, '\n', n);
		k = nl ? (size_t)(nl - p) : n;
		if (r->nhead + k >= sizeof r->head)
			k = sizeof r->head - 1 - r->nhead;
		memcpy(r->head + r->nhead, p, k);
		r->nhead += k;
		if (!nl)
			return;
		r->head[r->nhead] = '\0';
		r->head_done = 1;
		if (!strncmp(r->head, r->tok, strlen(r->tok)) &&
		    r->head[strlen(r->tok)] == ' ')
			outcome(r, r->head + strlen(r->tok) + 1);
		n -= (size_t)(nl + 1 - p);
		p = nl + 1;
	}
	if (n)
		sbx_xs_output(r->xs, s, p, n);
}

/* The followed log's bytes: split on the markers, across frames. */
static void
demux(struct run *r, const unsigned char *p, size_t n, int last)
{
	unsigned char buf[2];
	size_t i = 0, start = 0, k;

	if (r->nheld) {
		/* A marker cut in two: put together again. */
		struct sbx_buf b = SBX_BUF_INIT;

		sbx_buf_add(&b, r->held, r->nheld);
		sbx_buf_add(&b, p, n);
		r->nheld = 0;
		demux(r, (unsigned char *)b.data, b.len, last);
		sbx_buf_release(&b);
		return;
	}
	while (i < n) {
		if ((p[i] == 1 || p[i] == 2) && !last && n - i < 3 &&
		    (n - i == 1 || p[i + 1] == p[i])) {
			if (r->tag && i > start)
				emit(r, r->tag, (const char *)p + start,
				    i - start);
			for (k = 0; i + k < n; k++)
				buf[k] = p[i + k];
			memcpy(r->held, buf, k);
			r->nheld = k;
			return;
		}
		if ((p[i] == 1 || p[i] == 2) && n - i >= 3 &&
		    p[i + 1] == p[i] && p[i + 2] == p[i]) {
			if (r->tag && i > start)
				emit(r, r->tag, (const char *)p + start,
				    i - start);
			r->tag = p[i];
			i += 3;
			start = i;
			continue;
		}
		i++;
	}
	if (r->tag && n > start)
		emit(r, r->tag, (const char *)p + start, n - start);
}

/* --- the command's state -------------------------------------------------- */

/* GET the command: 1 ended (exit code in r), 0 running, -1 gone or not
 * reachable. */
static int
command_state(struct run *r)
{
	struct sbx_http_resp rs;
	struct sbx_err err;
	json_t *ec;
	char *path;
	int rc = -1;

	if (r->pty) {
		/* Its end comes with the socket's close. */
		path = sbx_xasprintf("/process/pty/%s", r->tok);
		if (tb_json(r, "GET", NULL, &rs, &err, path) == 0 &&
		    rs.status == 200)
			rc = r->ended;
		sbx_http_resp_release(&rs);
		free(path);
		return rc;
	}
	path = sbx_xasprintf("/process/session/%s/command/%s", r->tok,
	    r->cmd_id);
	if (tb_json(r, "GET", NULL, &rs, &err, path) == 0 &&
	    rs.status == 200) {
		ec = json_object_get(rs.json, "exitCode");
		rc = 0;
		if (json_is_integer(ec)) {
			r->exit_code = json_integer_value(ec);
			r->ended = 1;
			rc = 1;
		}
	}
	sbx_http_resp_release(&rs);
	free(path);
	return rc;
}

/* The log so far ({stdout, stderr}): what was not seen yet goes out. */
static void
logs_fetch(struct run *r)
{
	struct sbx_http_resp rs;
	struct sbx_err err;
	const char *v;
	char *path;
	int s;
	size_t n;

	path = sbx_xasprintf("/process/session/%s/command/%s/logs", r->tok,
	    r->cmd_id);
	if (tb_json(r, "GET", NULL, &rs, &err, path) == 0 &&
	    rs.status == 200 && json_is_object(rs.json))
		for (s = 1; s <= 2; s++) {
			v = sbx_json_str(rs.json, s == 1 ? "stdout" : "stderr");
			n = v ? strlen(v) : 0;
			if (n > r->seen[s])
				emit(r, s, v + r->seen[s], n - r->seen[s]);
		}
	sbx_http_resp_release(&rs);
	free(path);
}

/* --- the stream ----------------------------------------------------------- */

static int
ws_open(struct run *r, const char *path)
{
	unsigned char key[16], k64[32];
	struct sbx_buf head = SBX_BUF_INIT, rest = SBX_BUF_INIT;
	struct sbx_http_req rq = {.in_fd = -1, .out_fd = -1};
	struct sbx_err err;
	const char *hdrs[8];
	char *kh;
	long status = 0;
	size_t i;

	if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key)
		memset(key, 7, sizeof key);
	EVP_EncodeBlock(k64, key, sizeof key);
	kh = sbx_xasprintf("Sec-WebSocket-Key: %s", k64);
	for (i = 0; r->tb.hdrs[i]; i++)
		hdrs[i] = r->tb.hdrs[i];
	hdrs[i++] = kh;
	hdrs[i++] = "Sec-WebSocket-Version: 13";
	hdrs[i] = NULL;
	rq.headers = hdrs;
	rq.path = path;
	if (sbx_http_upgrade(r->tb.h, &rq, "websocket", &r->ws, &status,
	    &head, &rest, &err) == 0 && status != 101) {
		sbx_http_conn_free(r->ws);
		r->ws = NULL;
	}
	if (r->ws) {
		r->rd.client = 1;
		r->rd.max = WS_MAX;
		r->rd.in.limit = WS_MAX + 16;
		if (rest.len)
			sbx_buf_add(&r->rd.in, rest.data, rest.len);
	}
	free(kh);
	sbx_buf_release(&head);
	sbx_buf_release(&rest);
	return r->ws ? 0 : -1;
}

static void
ws_send(struct run *r, int op, const void *p, size_t n)
{
	struct sbx_buf b = SBX_BUF_INIT;

	sbx_ws_frame_masked(&b, op, p, n);
	sbx_http_conn_write(r->ws, b.data, b.len);
	sbx_buf_release(&b);
}

/* The stream is over (closed, broken): polling takes over until the
 * command has its exit code. */
static void
ws_end(struct run *r)
{
	if (r->nheld)
		demux(r, (const unsigned char *)"", 0, 1);
	sbx_http_conn_free(r->ws);
	r->ws = NULL;
	sbx_ws_reader_release(&r->rd);
	r->next_ms = sbx_mono_ms();
}

/* A PTY's close: 1000 or 1011, the reason {"exitCode":N}. */
static void
pty_closed(struct run *r, const unsigned char *p, size_t n)
{
	json_t *j = n > 2 ? json_loadb((const char *)p + 2, n - 2, 0, NULL) :
	    NULL;
	json_t *ec = json_object_get(j, "exitCode");

	if (json_is_integer(ec)) {
		r->exit_code = json_integer_value(ec);
		r->ended = 1;
	} else if (n >= 2 && (p[0] << 8 | p[1]) == SBX_WS_NORMAL) {
		r->exit_code = 0;
		r->ended = 1;
	}
	json_decref(j);
}

/* What came on the stream: 1 at its end. */
static int
ws_read(struct run *r)
{
	struct sbx_ws_msg m;
	char buf[65536];
	ssize_t n;
	int k, end = 0;

	for (;;) {
		n = sbx_http_conn_read(r->ws, buf, sizeof buf);
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			end = 1;
			break;
		}
		sbx_buf_add(&r->rd.in, buf, (size_t)n);
	}
	while ((k = sbx_ws_next(&r->rd, &m)) > 0) {
		if (r->pty && m.op == SBX_WS_BINARY)
			pty_out(r, (const char *)m.data, m.len);
		else if (!r->pty && (m.op == SBX_WS_BINARY ||
		    m.op == SBX_WS_TEXT))
			demux(r, m.data, m.len, 0);
		else if (m.op == SBX_WS_PING)
			ws_send(r, SBX_WS_PONG, m.data, m.len);
		else if (m.op == SBX_WS_CLOSE) {
			if (r->pty)
				pty_closed(r, m.data, m.len);
			return 1;
		}
	}
	return k < 0 || end;
}

/* --- the transport -------------------------------------------------------- */

/* A Sandbox s that is not started: err says so (paused or stopped, 125,
 * or not running), -1; 0 when it is. */
static int
not_started(const char *id, const json_t *s, struct sbx_err *err)
{
	const char *st = sbx_json_str(s, "state");

	if (!strcmp(st ? st : "", "started"))
		return 0;
	if (!strcmp(sbx_dt_status(st ? st : ""), "paused") ||
	    !strcmp(sbx_dt_status(st ? st : ""), "stopped"))
		return sbx_xs_paused(err, id, st);
	return sbx_xs_not_running(err, id, st ? st : "in no state");
}

/* The first toolbox request of a run that took the toolbox from the ref
 * failed: the sandbox says why (stopped, gone, a key refused), or where
 * its toolbox is now. 0: try again; -1 with err. */
static int
refetch(struct run *r, struct sbx_err *err)
{
	json_t *s;

	r->fast = 0;
	if (sbx_dt_get(&r->d, r->id, &s, err) < 0)
		return -1;
	if (not_started(r->id, s, err) < 0) {
		json_decref(s);
		return -1;
	}
	json_decref(r->sb);
	r->sb = s;
	sbx_dt_tb_close(&r->tb);
	return sbx_dt_tb_open(&r->tb, &r->d, r->sb, err);
}

/* The guard's job, should we die: every process of the command
 * killed, its session (or PTY) deleted. */
static void
guard_kill(void *arg)
{
	struct run *r = arg;
	struct sbx_err err;
	struct dtb tb;

	if (sbx_dt_tb_open(&tb, &r->d, r->sb, &err) == 0) {
		kill_all(&tb, r->tok, SIGKILL);
		session_delete(&tb, r->tok, r->pty);
		sbx_dt_tb_close(&tb);
	}
}

/* The guard's job once the command ended: its session (or PTY) deleted
 * while sbx-exec has gone, one round trip less to wait for. */
static void
guard_leave(void *arg)
{
	struct run *r = arg;
	struct sbx_err err;
	struct dtb tb;

	if (sbx_dt_tb_open(&tb, &r->d, r->sb, &err) == 0) {
		session_delete(&tb, r->tok, r->pty);
		sbx_dt_tb_close(&tb);
	}
}

/* -t: a PTY of the toolbox, its shell given the script through its
 * environment (a terminal's line discipline would take what it likes of
 * a line typed): it types one fixed line. */
static int
pty_start(struct run *r, struct sbx_xs *xs, struct sbx_err *err)
{
	static const char line[] = " exec sh -c \"$SBX_EXEC_SCRIPT\" sbx-exec "
	    "3>&2\n";
	struct sbx_http_resp rs;
	struct winsize ws;
	json_t *b, *envs, *a, *v;
	char *path, name[32];
	size_t i;
	int rc;

	if (sbx_xs_winsize(&ws) < 0 || !ws.ws_col || !ws.ws_row) {
		ws.ws_row = 24;
		ws.ws_col = 80;
	}
	envs = json_pack("{ssss}", "TERM", sbx_xs_term(), "SBX_EXEC_SCRIPT",
	    script);
	a = script_args(r, xs->o);
	json_array_foreach(a, i, v) {
		snprintf(name, sizeof name, "SBX_EXEC_A%zu", i);
		json_object_set(envs, name, v);
	}
	snprintf(name, sizeof name, "%zu", json_array_size(a));
	json_object_set_new(envs, "SBX_EXEC_N", json_string(name));
	b = json_pack("{sssosisi}", "id", r->tok, "envs", envs, "cols",
	    (int)ws.ws_col, "rows", (int)ws.ws_row);
	for (;;) {
		sbx_xs_guard_start(&r->guard, &xs->old, guard_kill, r);
		rc = tb_json(r, "POST", b, &rs, err, "/process/pty");
		if (rc == 0 && rs.status / 100 != 2)
			rc = sbx_dt_tb_fail(&rs, "cannot make a terminal for "
			    "the command", err);
		sbx_http_resp_release(&rs);
		if (rc == 0 || !r->fast)
			break;
		/* The guard holds the old sandbox: a new one for the new. */
		sbx_xs_guard_stop(&r->guard);
		if ((rc = refetch(r, err)) < 0)
			break;
	}
	wipe_json(b);
	wipe_json(a);
	if (rc < 0)
		return -1;
	r->cmd_id = sbx_xstrdup(r->tok);
	path = sbx_xasprintf("/process/pty/%s/connect", r->tok);
	rc = ws_open(r, path);
	free(path);
	if (rc < 0)
		return sbx_err_set(err, SBX_EX_EXECFAIL, "cannot connect to "
		    "the terminal of sandbox '%s'", r->id);
	ws_send(r, SBX_WS_BINARY, line, sizeof line - 1);
	/* At once: TLS may hold frames already (dx_ready). */
	r->next_ms = sbx_mono_ms();
	r->first = 1;
	/* The user's keys wait for the command. */
	sbx_xs_hold_input(xs, 1);
	return 0;
}

static int
dx_start(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct run *r = t;
	struct sbx_http_resp rs;
	json_t *b;
	char *line, *path;
	int rc;

	if (r->pty)
		return pty_start(r, xs, err);
	b = json_pack("{ss}", "sessionId", r->tok);
	for (;;) {
		rc = tb_json(r, "POST", b, &rs, err, "/process/session");
		if (rc == 0 && rs.status / 100 != 2)
			rc = sbx_dt_tb_fail(&rs, "cannot make a session for "
			    "the command", err);
		sbx_http_resp_release(&rs);
		if (rc == 0 || !r->fast || (rc = refetch(r, err)) < 0)
			break;
	}
	json_decref(b);
	if (rc < 0)
		return -1;
	line = command_line(r, xs->o);
	b = json_pack("{sssb}", "command", line, "runAsync", 1);
	explicit_bzero(line, strlen(line));
	free(line);
	path = sbx_xasprintf("/process/session/%s/exec", r->tok);
	sbx_xs_guard_start(&r->guard, &xs->old, guard_kill, r);
	rc = tb_json(r, "POST", b, &rs, err, path);
	free(path);
	/* It holds the values of -e. */
	json_object_clear(b);
	json_decref(b);
	if (rc == 0 && (rs.status / 100 != 2 ||
	    !sbx_json_str(rs.json, "cmdId")))
		rc = sbx_dt_tb_fail(&rs, "cannot start the command", err);
	if (rc == 0)
		r->cmd_id = sbx_xstrdup(sbx_json_str(rs.json, "cmdId"));
	sbx_http_resp_release(&rs);
	if (rc < 0)
		return -1;
	path = sbx_xasprintf("/process/session/%s/command/%s/logs?follow=true",
	    r->tok, r->cmd_id);
	/* Best effort: without it, polling. */
	ws_open(r, path);
	free(path);
	/* At once: polling, or what TLS may hold already (dx_ready). */
	r->next_ms = sbx_mono_ms();
	r->first = 1;
	return 0;
}

static int
dx_fds(void *t, struct pollfd *p, long long *wake)
{
	struct run *r = t;
	long long at = r->next_ms;

	if (*wake < 0 || *wake > at)
		*wake = at;
	if (!r->ws)
		return 0;
	p[0] = (struct pollfd){sbx_http_conn_fd(r->ws), POLLIN, 0};
	return 1;
}

static void
forward(struct run *r)
{
	char cmd[64];

	if (r->pid <= 0)
		return;
	snprintf(cmd, sizeof cmd, "kill -%d %lld", r->sig_pending, r->pid);
	r->sig_pending = 0;
	execute(&r->tb, cmd);
}

static int
dx_ready(void *t, struct sbx_xs *xs, const struct pollfd *p, int n,
    struct sbx_err *err)
{
	struct run *r = t;
	int st, end;

	(void)err;
	/* Read whatever the poll said: TLS may hold what came with the
	 * upgrade's answer, which no poll tells. */
	(void)p;
	(void)n;
	end = r->ws && ws_read(r);

	if (r->pty && r->head_done)
		sbx_xs_hold_input(xs, 0);
	if (end && r->pty) {
		ws_end(r);
		sbx_xs_done(xs);
		return 0;
	}
	if (end) {
		ws_end(r);
		/* Ended as it should: its exit code is there, or soon. */
		if (command_state(r) != 0 || r->ended) {
			sbx_xs_done(xs);
			return 0;
		}
	}
	if (r->sig_pending)
		forward(r);
	/* The stream's first read done: no round trip to ask about the
	 * command while it brings its news. */
	if (r->ws && r->first) {
		r->first = 0;
		r->next_ms = sbx_mono_ms() + CHECK_MS;
		return 0;
	}
	if (sbx_mono_ms() < r->next_ms)
		return 0;
	st = command_state(r);
	if (r->ws) {
		/* The session still there (a sandbox stopped under it ends
		 * no stream). */
		if (st < 0) {
			r->lost = 1;
			sbx_xs_done(xs);
		}
		r->next_ms = sbx_mono_ms() + CHECK_MS;
		return 0;
	}
	if (st < 0) {
		r->lost = 1;
		sbx_xs_done(xs);
		return 0;
	}
	logs_fetch(r);
	if (st == 1)
		sbx_xs_done(xs);
	r->next_ms = sbx_mono_ms() + POLL_MS;
	return 0;
}

/* One line of /input: -1 when the command takes no more. */
static int
input_line(struct run *r, const char *line, size_t n)
{
	struct sbx_http_resp rs;
	struct sbx_err err;
	char *path;
	json_t *b;
	int rc = 0;

	b = json_pack("{ss%}", "data", line, n);
	path = sbx_xasprintf("/process/session/%s/command/%s/input", r->tok,
	    r->cmd_id);
	if (tb_json(r, "POST", b, &rs, &err, path) < 0 ||
	    rs.status / 100 != 2)
		rc = -1;
	sbx_http_resp_release(&rs);
	json_decref(b);
	free(path);
	return rc;
}

/* Stdin as base64 lines; its end, a line ".". */
static int
dx_input(void *t, struct sbx_xs *xs, const char *p, size_t n)
{
	struct run *r = t;
	char *enc;
	size_t k;
	int rc = 0, len;

	(void)xs;
	if (r->pty) {
		if (!r->ws || !n)
			return r->ws ? 0 : -1;
		ws_send(r, SBX_WS_BINARY, p, n);
		return 0;
	}
	if (!n)
		return input_line(r, ".\n", 2);
	enc = sbx_xmalloc(4 * ((INPUT_CHUNK + 2) / 3) + 2);
	while (n && rc == 0) {
		k = n > INPUT_CHUNK ? INPUT_CHUNK : n;
		len = EVP_EncodeBlock((unsigned char *)enc,
		    (const unsigned char *)p, (int)k);
		enc[len] = '\n';
		rc = input_line(r, enc, (size_t)len + 1);
		p += k;
		n -= k;
	}
	free(enc);
	return rc;
}

static void
dx_resize(void *t)
{
	struct run *r = t;
	struct sbx_http_resp rs;
	struct sbx_err err;
	struct winsize ws;
	json_t *b;
	char *path;

	if (sbx_xs_winsize(&ws) < 0 || !ws.ws_col || !ws.ws_row)
		return;
	b = json_pack("{sisi}", "cols", (int)ws.ws_col, "rows",
	    (int)ws.ws_row);
	path = sbx_xasprintf("/process/pty/%s/resize", r->tok);
	/* Ended meanwhile: not our failure. */
	tb_json(r, "POST", b, &rs, &err, path);
	sbx_http_resp_release(&rs);
	json_decref(b);
	free(path);
}

static void
dx_signal(void *t, int sig)
{
	struct run *r = t;

	r->sig_pending = sig;
	forward(r);
}

static int
dx_expire(void *t, struct sbx_err *err)
{
	struct run *r = t;

	(void)err;
	kill_all(&r->tb, r->tok, SIGKILL);
	return 0;
}

/* Whether the sandbox is gone or no longer started. */
static int
sandbox_ended(struct run *r)
{
	struct sbx_err gerr = {0};
	json_t *s2 = NULL;
	int gone;

	gone = (sbx_dt_get(&r->d, r->id, &s2, &gerr) < 0 && gerr.code ==
	    SBX_EX_NOSANDBOX) || (s2 && strcmp(sbx_json_str(s2, "state") ?
	    sbx_json_str(s2, "state") : "", "started"));
	json_decref(s2);
	return gone;
}

/* The command is gone without its status: the sandbox's end? */
static int
vanished(struct run *r, struct sbx_err *err)
{
	if (sandbox_ended(r))
		return sbx_xs_vanished(err, r->id, r->argv[0]);
	return sbx_err_set(err, SBX_EX_FAIL, "the command '%s' went away "
	    "from its session in sandbox '%s'", r->argv[0], r->id);
}

static int
dx_finish(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct run *r = t;
	long long until = sbx_mono_ms() + END_WAIT_MS;
	int st = r->ended;

	/* A PTY's close, should it come just after the loop's end. */
	while (r->pty && r->ws && !r->ended && !xs->res->timed_out &&
	    sbx_mono_ms() < until - END_WAIT_MS + 2000) {
		struct pollfd f = {sbx_http_conn_fd(r->ws), POLLIN, 0};

		if (ws_read(r))
			break;
		poll(&f, 1, 100);
	}
	st = r->ended;
	if (r->ws)
		ws_end(r);
	while (!r->pty && !r->lost && !st && sbx_mono_ms() < until) {
		if ((st = command_state(r)) < 0)
			break;
		if (!st)
			usleep(50000);
	}
	if (xs->res->timed_out) {
		sbx_xs_end(xs->res, SBX_XS_TIMEDOUT, 0);
		return 0;
	}
	if (st <= 0)
		return vanished(r, err);
	/* What the stream did not bring (a broken one). */
	if (!r->head_done)
		logs_fetch(r);
	if (!strcmp(r->outcome, "cwd")) {
		char why[PATH_MAX + 64];

		snprintf(why, sizeof why, "cannot change directory to '%s'",
		    xs->o->cwd ? xs->o->cwd : "?");
		return sbx_xs_start_fail(err, SBX_XS_START_WORKDIR,
		    r->argv[0], why);
	}
	if (!strcmp(r->outcome, "127"))
		return sbx_xs_start_fail(err, SBX_XS_START_NOTFOUND,
		    r->argv[0], NULL);
	if (!strcmp(r->outcome, "126"))
		return sbx_xs_start_fail(err, SBX_XS_START_NOEXEC,
		    r->argv[0], NULL);
	if (strcmp(r->outcome, "ok"))
		return sbx_xs_start_fail(err, SBX_XS_START_OTHER, r->argv[0],
		    r->outcome[0] ? "no FIFO for its stdin" : "the session's "
		    "shell did not run it");
	/* Killed (or its shell with it) as the sandbox stopped or went:
	 * that is the sandbox's end, not the command's. */
	if ((r->exit_code > 128 || r->exit_code < 0) && sandbox_ended(r))
		return sbx_xs_vanished(err, r->id, r->argv[0]);
	/* No status at all (-1): its session's shell was killed. The
	 * sandbox may say it is stopping only a moment later. */
	if (r->exit_code < 0) {
		for (int i = 0; i < 20 && !sandbox_ended(r); i++)
			usleep(100000);
		return vanished(r, err);
	}
	sbx_xs_end_status(xs->res, r->exit_code);
	return 0;
}

static const struct sbx_xs_transport dx_transport = {
	.signals = SBX_XS_SIGS_END,
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

int
sbx_dt_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err)
{
	struct sbx_exec_opts wo = *o;
	unsigned char rnd[12];
	struct sbx_xs xs;
	struct run r;
	const char *wd, *tbu;
	char *wdir = NULL;
	size_t i;
	int rc = -1;

	memset(&r, 0, sizeof r);
	r.guard.fd = r.guard.pid = -1;
	r.guard.job = guard_leave;
	sbx_xs_init(&xs, &wo, res, &dx_transport, &r);
	if (!argv[0])
		return sbx_err_set(err, SBX_EX_USAGE, "no command to run");
	if (o->user)
		return sbx_err_set(err, SBX_EX_USAGE, "the daytona backend "
		    "cannot run a command as another user (-u '%s')",
		    o->user);
	/* Made by sbx-create, the ref says where its toolbox is: no
	 * round trip to ask (refetch, should that fail). */
	if ((tbu = sbx_json_str(ref, "toolbox")) &&
	    sbx_dt_valid_id(sbx_json_str(ref, "id"))) {
		if (sbx_dt_open(&r.d, sbx_json_str(ref, "endpoint"), err) < 0)
			return -1;
		r.id = sbx_json_str(ref, "id");
		r.fast = 1;
		/* As much of a Sandbox as the toolbox's client needs. */
		r.sb = json_pack("{ssssss}", "id", r.id, "state", "started",
		    "toolboxProxyUrl", tbu);
		wd = sbx_json_str(ref, "workdir");
	} else if (sbx_dt_ref_open(&r.d, ref, &r.id, &r.sb, err) < 0) {
		return -1;
	} else if (not_started(r.id, r.sb, err) < 0) {
		goto out;
	} else {
		wd = sbx_json_str(json_object_get(r.sb, "labels"), DT_WORKDIR);
	}
	/* The sandbox's workdir by default. */
	if (!wo.cwd && wd && *wd)
		wo.cwd = wdir = sbx_xstrdup(wd);
	if (sbx_dt_tb_open(&r.tb, &r.d, r.sb, err) < 0 &&
	    (!r.fast || refetch(&r, err) < 0))
		goto out;
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		memset(rnd, 0, sizeof rnd);
	memcpy(r.tok, "sbx-", 4);
	for (i = 0; i < sizeof rnd; i++)
		snprintf(r.tok + 4 + 2 * i, 3, "%02x", rnd[i]);
	r.xs = &xs;
	r.argv = argv;
	r.pty = o->tty;
	rc = sbx_xs_run(&xs, err);
	/* Ends what is left of it: the guard's job, or ours. */
	if (sbx_xs_guard_leave(&r.guard) < 0)
		session_delete(&r.tb, r.tok, r.pty);
out:
	sbx_xs_guard_stop(&r.guard);
	if (r.ws)
		sbx_http_conn_free(r.ws);
	sbx_ws_reader_release(&r.rd);
	sbx_buf_release(&r.pre);
	free(r.cmd_id);
	free(wdir);
	json_decref(r.sb);
	if (r.tb.h)
		sbx_dt_tb_close(&r.tb);
	sbx_dt_close(&r.d);
	return rc;
}
