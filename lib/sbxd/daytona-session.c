/* daytona-session.c - Daytona's toolbox sessions (/process/session): a
 * shell per session that lives between requests, run in the box by the
 * backend's exec (proc.c's child) like the toolbox's other commands,
 * with stdout and stderr on pipes of their own. The shell reads each
 * command as one line (printf %b escapes, behind the session's token),
 * runs it with eval, so cd and export stay, and then writes the token and
 * the status on both streams: what came before it on a stream is that
 * command's. A session runs its commands one after the other, as
 * Daytona's daemon does; an async one queues behind the one running.
 *
 * sbx-shell's sessions (lib/shell.c) are not used: they run bash on a
 * pty, which mixes stdout and stderr, and live in sbx-init, out of sbxd's
 * reach; Daytona keeps the two streams apart. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbxd.h"

#define LOG_MAX (16u << 20)   /* bytes of a command's log kept */
#define CMD_MAX (1u << 20)    /* bytes of a command */
#define INPUT_MAX (64u << 10) /* bytes of one input */
#define SESS_MAX 64           /* sessions of a box */
#define CMDS_MAX 1000         /* commands a session remembers */
#define MARK 0x1e             /* starts and ends the token's mark */

/* The shell: $1 is the token. */
static const char script[] =
	"__sbx_t=$1; shift\n"
	"while IFS= read -r __sbx_l; do\n"
	"\tcase $__sbx_l in \"$__sbx_t \"*) ;; *) continue ;; esac\n"
	"\t__sbx_l=$(printf '%b' \"${__sbx_l#\"$__sbx_t \"}\")\n"
	"\tcommand eval \"$__sbx_l\"\n"
	"\t__sbx_r=$?\n"
	"\tprintf '\\036%s %d\\036' \"$__sbx_t\" \"$__sbx_r\"\n"
	"\tprintf '\\036%s %d\\036' \"$__sbx_t\" \"$__sbx_r\" >&2\n"
	"done\n";

struct cmd {
	struct cmd *next;
	char id[37];
	char *command;
	struct sbx_buf log;   /* chunks behind \1\1\1 (stdout), \2\2\2 */
	int sent, done, exit_code;
	int ends;             /* streams whose mark came: 1 out, 2 err */
	int followers;        /* log streams on it: it is not forgotten */
};

/* What came on one stream and may be the start of a mark. */
struct stream {
	int fd, eof, tag;
	struct sbx_buf acc;
};

struct sess {
	struct sess *next;
	struct sbxd_box *box;  /* a ref */
	char *id;
	char token[33];
	struct sbxd_child ch;
	int in_fd, res_fd;
	struct stream out, err;
	struct cmd *cmds, *last;
	size_t ncmds;
	struct cmd *cur;       /* sent and not done, or NULL */
	int dead, refs;
	pthread_mutex_t wmu;   /* writes to in_fd */
};

static pthread_mutex_t smu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t scv = PTHREAD_COND_INITIALIZER;
static struct sess *sessions;

static void
cmd_free(struct cmd *c)
{
	free(c->command);
	sbx_buf_release(&c->log);
	free(c);
}

static void
sess_put(struct sess *s)
{
	struct cmd *c;
	int last;

	pthread_mutex_lock(&smu);
	last = !--s->refs;
	pthread_mutex_unlock(&smu);
	if (!last)
		return;
	if (s->in_fd >= 0)
		close(s->in_fd);
	sbxd_child_release(&s->ch);
	sbx_buf_release(&s->out.acc);
	sbx_buf_release(&s->err.acc);
	while ((c = s->cmds)) {
		s->cmds = c->next;
		cmd_free(c);
	}
	pthread_mutex_destroy(&s->wmu);
	sbxd_box_put(s->box);
	free(s->id);
	free(s);
}

/* The box's session id with a ref (smu not held), or NULL. */
static struct sess *
sess_get(struct sbxd_box *b, const char *id)
{
	struct sess *s;

	pthread_mutex_lock(&smu);
	for (s = sessions; s; s = s->next)
		if (s->box == b && !strcmp(s->id, id)) {
			s->refs++;
			break;
		}
	pthread_mutex_unlock(&smu);
	return s;
}

static void
uuid(char out[37])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char u[16];
	size_t i, k = 0;

	if (getrandom(u, sizeof u, 0) != (ssize_t)sizeof u)
		sbxd_random_id((char *)u, sizeof u);
	u[6] = (u[6] & 0x0f) | 0x40;
	u[8] = (u[8] & 0x3f) | 0x80;
	for (i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[k++] = '-';
		out[k++] = hex[u[i] >> 4];
		out[k++] = hex[u[i] & 15];
	}
	out[k] = 0;
}

/* --- the pump: the shell's output to its commands ----------------------- */

static void
log_add(struct cmd *c, int tag, const char *p, size_t n)
{
	static const char tags[2][3] = {{1, 1, 1}, {2, 2, 2}};

	if (!n || !c || c->log.len + 3 + n > LOG_MAX)
		return;
	sbx_buf_add(&c->log, tags[tag - 1], 3);
	sbx_buf_add(&c->log, p, n);
	/* Its followers wake (follow_run). */
	pthread_cond_broadcast(&scv);
}

/* The next command, when none runs: sent (s->wmu held, smu not). */
static void
kick(struct sess *s)
{
	struct sbx_buf line = {0};
	struct cmd *c;
	const unsigned char *p;
	char o[6];

	pthread_mutex_lock(&smu);
	if (s->cur || s->dead) {
		pthread_mutex_unlock(&smu);
		return;
	}
	for (c = s->cmds; c && (c->sent || c->done); c = c->next)
		;
	if (c) {
		c->sent = 1;
		s->cur = c;
		/* A new line first: input a command left unread ends there. */
		sbx_buf_add(&line, "\n", 1);
		sbx_buf_add(&line, s->token, strlen(s->token));
		sbx_buf_add(&line, " ", 1);
		for (p = (const unsigned char *)c->command; *p; p++) {
			if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' &&
			    *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			    strchr(" _-./=:,+@", *p)) {
				sbx_buf_add(&line, (const char *)p, 1);
				continue;
			}
			o[0] = '\\';
			o[1] = '0';
			o[2] = (char)('0' + (*p >> 6));
			o[3] = (char)('0' + ((*p >> 3) & 7));
			o[4] = (char)('0' + (*p & 7));
			sbx_buf_add(&line, o, 5);
		}
		sbx_buf_add(&line, "\n", 1);
	}
	pthread_mutex_unlock(&smu);
	if (line.len && sbx_write_all(s->in_fd, line.data, line.len) < 0)
		sbxd_child_kill(&s->ch, SIGKILL);
	sbx_buf_release(&line);
}

/* Where in acc the token's mark starts, or could start once more comes
 * (*whole 0), or acc->len. */
static size_t
mark_at(const struct sess *s, const struct sbx_buf *acc, int *whole)
{
	size_t tl = strlen(s->token), i, k;

	*whole = 0;
	for (i = 0; i < acc->len; i++) {
		if (acc->data[i] != MARK)
			continue;
		for (k = 1; i + k < acc->len && k <= tl; k++)
			if (acc->data[i + k] != s->token[k - 1])
				break;
		if (i + k == acc->len && k <= tl + 1)
			return i;
		if (k <= tl || acc->data[i + k] != ' ')
			continue;
		for (k++; i + k < acc->len && ((acc->data[i + k] >= '0' &&
		    acc->data[i + k] <= '9') || acc->data[i + k] == '-'); k++)
			;
		if (i + k == acc->len)
			return i;
		if (acc->data[i + k] == MARK) {
			*whole = (int)(k + 1);
			return i;
		}
	}
	return acc->len;
}

/* What came on st: to the running command, up to its mark (smu held). */
static void
take(struct sess *s, struct stream *st)
{
	struct sbx_buf *a = &st->acc;
	size_t at, n;
	int whole;

	for (;;) {
		at = mark_at(s, a, &whole);
		log_add(s->cur, st->tag, a->data, at);
		n = at;
		if (whole) {
			if (s->cur) {
				s->cur->ends |= st->tag;
				if (st->tag == 1)
					s->cur->exit_code = (int)strtol(
					    a->data + at + 2 +
					    strlen(s->token), NULL, 10);
			}
			n += (size_t)whole;
		}
		memmove(a->data, a->data + n, a->len - n);
		a->len -= n;
		if (!whole)
			break;
	}
	if (s->cur && s->cur->ends == 3) {
		s->cur->done = 1;
		s->cur = NULL;
		pthread_cond_broadcast(&scv);
	}
}

static void *
pump(void *arg)
{
	struct sess *s = arg;
	struct sbxd_proc_result res = {.rc = -1};
	struct stream *st[2] = {&s->out, &s->err};
	struct cmd *c;
	char buf[32768];
	size_t got = 0, i;
	ssize_t n;
	int k;

	while (!s->out.eof || !s->err.eof) {
		struct pollfd f[2] = {{s->out.eof ? -1 : s->out.fd, POLLIN, 0},
		    {s->err.eof ? -1 : s->err.fd, POLLIN, 0}};

		k = poll(f, 2, -1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		for (i = 0; i < 2; i++) {
			if (!f[i].revents)
				continue;
			n = read(st[i]->fd, buf, sizeof buf);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				st[i]->eof = 1;
				continue;
			}
			pthread_mutex_lock(&smu);
			sbx_buf_add(&st[i]->acc, buf, (size_t)n);
			take(s, st[i]);
			k = !s->cur;
			pthread_mutex_unlock(&smu);
			if (k) {
				pthread_mutex_lock(&s->wmu);
				kick(s);
				pthread_mutex_unlock(&s->wmu);
			}
		}
	}
	while ((n = read(s->res_fd, (char *)&res + got, sizeof res - got)) > 0)
		got += (size_t)n;
	sbxd_child_wait(&s->ch, -1);
	if (got != sizeof res && WIFSIGNALED(s->ch.status)) {
		/* Killed (its session deleted, its sandbox gone): so was
		 * the command. */
		memset(&res, 0, sizeof res);
		res.signal = WTERMSIG(s->ch.status);
		got = sizeof res;
	}
	close(s->out.fd);
	close(s->err.fd);
	close(s->res_fd);
	pthread_mutex_lock(&smu);
	/* The shell ended (exit, or killed): so did what it ran. */
	for (i = 0; i < 2; i++) {
		log_add(s->cur, st[i]->tag, st[i]->acc.data, st[i]->acc.len);
		st[i]->acc.len = 0;
	}
	for (c = s->cmds; c; c = c->next)
		if (!c->done) {
			c->done = 1;
			c->exit_code = c != s->cur ? -1 : got != sizeof res ||
			    res.rc < 0 ? -1 : res.signal ? 128 + res.signal :
			    res.exit_code;
		}
	s->cur = NULL;
	s->dead = 1;
	pthread_cond_broadcast(&scv);
	pthread_mutex_unlock(&smu);
	sess_put(s);
	return NULL;
}

/* --- the routes --------------------------------------------------------- */

/* The session the path's segment 4 names, with a ref; NULL after
 * answering 404. */
static struct sess *
sess_of(struct sbxd_req *r, enum MHD_Result *ret)
{
	char *id = sbxd_path_seg(r, 4);
	struct sess *s = id ? sess_get(r->box, id) : NULL;

	if (!s)
		*ret = sbxd_dt_tb_err(r, 404, "NOT_FOUND", "session not "
		    "found");
	free(id);
	return s;
}

/* The command the path's segment 6 names (smu held), or NULL. */
static struct cmd *
cmd_of(struct sbxd_req *r, struct sess *s)
{
	char *id = sbxd_path_seg(r, 6);
	struct cmd *c = NULL;

	if (id)
		for (c = s->cmds; c && strcmp(c->id, id); c = c->next)
			;
	free(id);
	return c;
}

static json_t *
cmd_json(const struct cmd *c)
{
	json_t *j = json_pack("{s:s,s:s}", "id", c->id, "command",
	    c->command);

	if (c->done)
		json_object_set_new(j, "exitCode", json_integer(c->exit_code));
	return j;
}

static json_t *
sess_json(const struct sess *s)
{
	json_t *a = json_array();
	const struct cmd *c;

	for (c = s->cmds; c; c = c->next)
		json_array_append_new(a, cmd_json(c));
	return json_pack("{s:s,s:o}", "sessionId", s->id, "commands", a);
}

static enum MHD_Result
h_create(struct sbxd_req *r)
{
	static const char *const sh[] = {"/bin/sh", "-c", script, "sh", NULL,
	    NULL};
	const char *argv[6];
	enum MHD_Result ret;
	json_t *j = sbxd_dt_tb_body(r, &ret);
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	int res[2] = {-1, -1}, go[2] = {-1, -1};
	const char *id;
	struct sess *s = NULL, *o;
	struct sbx_err e;
	char *dir = NULL;
	unsigned n = 0;
	pthread_t t;

	if (!j)
		return ret;
	id = sbx_json_str(j, "sessionId");
	if (!id || !*id || strlen(id) > 256 || strchr(id, '/')) {
		ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "sessionId is "
		    "required");
		goto out;
	}
	pthread_mutex_lock(&smu);
	for (o = sessions; o; o = o->next)
		if (o->box == r->box && (++n, !strcmp(o->id, id)))
			break;
	pthread_mutex_unlock(&smu);
	if (o) {
		ret = sbxd_dt_tb_err(r, 409, "CONFLICT", "session already "
		    "exists");
		goto out;
	}
	if (n >= SESS_MAX) {
		ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "too many "
		    "sessions (%d)", SESS_MAX);
		goto out;
	}
	s = sbx_xcalloc(1, sizeof *s);
	s->ch = (struct sbxd_child)SBXD_CHILD_NONE;
	s->in_fd = s->res_fd = s->out.fd = s->err.fd = -1;
	s->out.tag = 1;
	s->err.tag = 2;
	s->refs = 1;
	pthread_mutex_init(&s->wmu, NULL);
	{
		char u[37];
		size_t i, k = 0;

		uuid(u);
		for (i = 0; u[i]; i++)
			if (u[i] != '-')
				s->token[k++] = u[i];
		s->token[k] = 0;
	}
	s->id = sbx_xstrdup(id);
	if (!(s->box = sbxd_box_get(r->box->id))) {
		ret = sbxd_dt_tb_err(r, 404, "NOT_FOUND", "sandbox %s not "
		    "found", r->box->id);
		goto out;
	}
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
	    pipe2(err, O_CLOEXEC) < 0 || pipe2(res, O_CLOEXEC) < 0 ||
	    pipe2(go, O_CLOEXEC) < 0) {
		ret = sbxd_dt_tb_err(r, 500, "INTERNAL_SERVER_ERROR", "cannot "
		    "make pipes: %s", strerror(errno));
		goto out;
	}
	memcpy(argv, sh, sizeof argv);
	argv[4] = s->token;
	dir = sbxd_dt_work_dir(r->box);
	{
		int fds[5] = {in[0], out[1], err[1], res[1], go[1]};

		if (sbxd_dt_spawn(r->box, argv, dir, NULL, 0, 0, fds, &s->ch,
		    &e) < 0) {
			ret = sbxd_dt_tb_err(r, 500, "INTERNAL_SERVER_ERROR",
			    "%s", e.msg);
			goto out;
		}
	}
	s->in_fd = in[1];
	s->out.fd = out[0];
	s->err.fd = err[0];
	s->res_fd = res[0];
	in[1] = out[0] = err[0] = res[0] = -1;
	s->refs = 2; /* the list's and the pump's */
	if (pthread_create(&t, NULL, pump, s)) {
		s->refs = 1;
		ret = sbxd_dt_tb_err(r, 500, "INTERNAL_SERVER_ERROR", "cannot "
		    "start a thread");
		goto out;
	}
	pthread_detach(t);
	pthread_mutex_lock(&smu);
	s->next = sessions;
	sessions = s;
	pthread_mutex_unlock(&smu);
	s = NULL;
	ret = sbxd_reply_empty(r, 201);
out:
	if (s) {
		sbxd_child_kill(&s->ch, SIGKILL);
		if (s->out.fd >= 0)
			close(s->out.fd);
		if (s->err.fd >= 0)
			close(s->err.fd);
		if (s->res_fd >= 0)
			close(s->res_fd);
		sess_put(s);
	}
	{
		int *p[] = {in, out, err, res, go};
		size_t i;

		for (i = 0; i < 5; i++) {
			if (p[i][0] >= 0)
				close(p[i][0]);
			if (p[i][1] >= 0)
				close(p[i][1]);
		}
	}
	free(dir);
	json_decref(j);
	return ret;
}

static enum MHD_Result
h_list(struct sbxd_req *r)
{
	json_t *a = json_array();
	struct sess *s;

	pthread_mutex_lock(&smu);
	for (s = sessions; s; s = s->next)
		if (s->box == r->box)
			json_array_append_new(a, sess_json(s));
	pthread_mutex_unlock(&smu);
	return sbxd_reply_json(r, 200, a);
}

static enum MHD_Result
h_get(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sess *s = sess_of(r, &ret);
	json_t *j;

	if (!s)
		return ret;
	pthread_mutex_lock(&smu);
	j = sess_json(s);
	pthread_mutex_unlock(&smu);
	sess_put(s);
	return sbxd_reply_json(r, 200, j);
}

/* Out of the list (smu held): 1, or 0 when it was not in it. */
static int
sess_unlink(struct sess *s)
{
	struct sess **pp;

	for (pp = &sessions; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			sbxd_child_kill(&s->ch, SIGKILL);
			return 1;
		}
	return 0;
}

static enum MHD_Result
h_delete(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sess *s = sess_of(r, &ret);
	int was;

	if (!s)
		return ret;
	pthread_mutex_lock(&smu);
	was = sess_unlink(s);
	pthread_mutex_unlock(&smu);
	if (was)
		sess_put(s); /* the list's */
	sess_put(s);
	return sbxd_reply_empty(r, 204);
}

void
sbxd_dt_sess_end_all(struct sbxd_box *b)
{
	struct sess *s, *gone[SESS_MAX * 2];
	size_t n = 0, i;

	pthread_mutex_lock(&smu);
	for (s = sessions; s && n < sizeof gone / sizeof *gone; s = s->next)
		if (s->box == b)
			gone[n++] = s;
	for (i = 0; i < n; i++)
		sess_unlink(gone[i]);
	pthread_mutex_unlock(&smu);
	for (i = 0; i < n; i++)
		sess_put(gone[i]);
}

/* SDK 0.167.0 and later (its header, or a WebSocket's protocol
 * X-Daytona-SDK-Version~V), or X-Daytona-Split-Output: stdout and stderr
 * apart, and output with the marks. */
static int
split_output(struct sbxd_req *r)
{
	const char *v = sbxd_header(r, "X-Daytona-SDK-Version");
	const char *so = sbxd_header(r, "X-Daytona-Split-Output");
	const char *pr = sbxd_header(r, "Sec-WebSocket-Protocol");
	long want[3] = {0, 167, 0}, got[3] = {0, 0, 0};
	char *e;
	int i;

	if (so && !strcasecmp(so, "true"))
		return 1;
	/* A browser's WebSocket says it as a protocol. */
	if ((!v || !*v) && pr && (v = strstr(pr, "X-Daytona-SDK-Version~")))
		v += strlen("X-Daytona-SDK-Version~");
	if (!v || !*v)
		return 0;
	if (*v == 'v')
		v++;
	for (i = 0; i < 3; i++) {
		got[i] = strtol(v, &e, 10);
		if (e == v)
			return 0;
		if (got[i] != want[i])
			return got[i] > want[i];
		if (*e != '.')
			return i == 2;
		v = e + 1;
	}
	return 1;
}

/* A command's log: out, err, and everything in order (the marks left
 * out). */
static void
demux(const struct sbx_buf *log, struct sbx_buf *out, struct sbx_buf *err,
    struct sbx_buf *all)
{
	size_t i = 0, j;
	int tag;

	while (i + 3 <= log->len) {
		tag = log->data[i];
		i += 3;
		for (j = i; j < log->len && !(j + 3 <= log->len &&
		    (log->data[j] == 1 || log->data[j] == 2) &&
		    log->data[j + 1] == log->data[j] &&
		    log->data[j + 2] == log->data[j]); j++)
			;
		sbx_buf_add(tag == 1 ? out : err, log->data + i, j - i);
		sbx_buf_add(all, log->data + i, j - i);
		i = j;
	}
}

/* {output,stdout?,stderr?} of c (smu held), with more in front. */
static json_t *
log_json(struct sbxd_req *r, const struct cmd *c, json_t *j)
{
	struct sbx_buf out = {0}, err = {0}, all = {0};

	demux(&c->log, &out, &err, &all);
	if (split_output(r)) {
		json_object_set_new(j, "output", sbxd_dt_text(c->log.data,
		    c->log.len));
		json_object_set_new(j, "stdout", sbxd_dt_text(out.data,
		    out.len));
		json_object_set_new(j, "stderr", sbxd_dt_text(err.data,
		    err.len));
	} else {
		json_object_set_new(j, "output", sbxd_dt_text(all.data,
		    all.len));
	}
	sbx_buf_release(&out);
	sbx_buf_release(&err);
	sbx_buf_release(&all);
	return j;
}

static enum MHD_Result
h_exec(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sess *s = sess_of(r, &ret);
	json_t *j = NULL, *v;
	const char *cmd;
	struct cmd *c;
	int async;

	if (!s)
		return ret;
	if (!(j = sbxd_dt_tb_body(r, &ret)))
		goto out;
	cmd = sbx_json_str(j, "command");
	v = json_object_get(j, "command");
	async = json_is_true(json_object_get(j, "runAsync")) ||
	    json_is_true(json_object_get(j, "async"));
	if (!cmd || !cmd[strspn(cmd, " \t\r\n")] ||
	    json_string_length(v) != strlen(cmd) ||
	    strlen(cmd) > CMD_MAX) {
		ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "command is "
		    "required");
		goto out;
	}
	c = sbx_xcalloc(1, sizeof *c);
	uuid(c->id);
	c->command = sbx_xstrdup(cmd);
	pthread_mutex_lock(&smu);
	if (s->dead) {
		pthread_mutex_unlock(&smu);
		cmd_free(c);
		ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "session %s has "
		    "ended", s->id);
		goto out;
	}
	if (s->last)
		s->last->next = c;
	else
		s->cmds = c;
	s->last = c;
	/* Forget the oldest that are done. */
	while (++s->ncmds > CMDS_MAX && s->cmds->done &&
	    !s->cmds->followers) {
		struct cmd *o = s->cmds;

		s->cmds = o->next;
		cmd_free(o);
		s->ncmds--;
	}
	pthread_mutex_unlock(&smu);
	pthread_mutex_lock(&s->wmu);
	kick(s);
	pthread_mutex_unlock(&s->wmu);
	pthread_mutex_lock(&smu);
	if (async) {
		v = json_pack("{s:s}", "cmdId", c->id);
		pthread_mutex_unlock(&smu);
		ret = sbxd_reply_json(r, 202, v);
		goto out;
	}
	while (!c->done)
		pthread_cond_wait(&scv, &smu);
	v = log_json(r, c, json_pack("{s:s}", "cmdId", c->id));
	json_object_set_new(v, "exitCode", json_integer(c->exit_code));
	pthread_mutex_unlock(&smu);
	ret = sbxd_reply_json(r, 200, v);
out:
	json_decref(j);
	sess_put(s);
	return ret;
}

static enum MHD_Result
h_command(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sess *s = sess_of(r, &ret);
	struct cmd *c;
	json_t *j = NULL;

	if (!s)
		return ret;
	pthread_mutex_lock(&smu);
	if ((c = cmd_of(r, s)))
		j = cmd_json(c);
	pthread_mutex_unlock(&smu);
	sess_put(s);
	if (!j)
		return sbxd_dt_tb_err(r, 404, "NOT_FOUND", "command not "
		    "found");
	return sbxd_reply_json(r, 200, j);
}

struct follow {
	struct sess *s;
	struct cmd *c;
	int split;
};

static void
follow_free(void *cls)
{
	struct follow *f = cls;

	pthread_mutex_lock(&smu);
	f->c->followers--;
	pthread_mutex_unlock(&smu);
	sess_put(f->s);
	free(f);
}

/* logs?follow=true: the log as it comes, in binary frames (with the
 * marks when split, else without), then 1000 once the command ended
 * and all of it is sent. What the client sends is not read, but pings
 * are answered. */
static void
follow_run(struct sbxd_ws *w, void *cls)
{
	struct follow *f = cls;
	struct sbx_buf out = {0}, err = {0}, all = {0}, part;
	struct sbx_ws_msg m;
	size_t off = 0;
	int done;

	for (;;) {
		out.len = err.len = all.len = 0;
		pthread_mutex_lock(&smu);
		/* Until the log grows or the command ends (log_add and the
		 * end broadcast scv), 100 ms at most: then the socket's
		 * pings and close are read. */
		if (!f->c->done && f->c->log.len == off) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&scv, &smu, &ts);
		}
		done = f->c->done;
		part.data = f->c->log.data + off;
		part.len = f->c->log.len - off;
		if (f->split)
			sbx_buf_add(&all, part.data, part.len);
		else
			demux(&part, &out, &err, &all);
		off = f->c->log.len;
		pthread_mutex_unlock(&smu);
		if (all.len && sbxd_ws_send(w, SBX_WS_BINARY, all.data,
		    all.len) < 0)
			break;
		if (done) {
			sbxd_ws_close(w, SBX_WS_NORMAL, "");
			break;
		}
		if (sbxd_ws_read(w, 0, &m) < 0)
			break;
	}
	sbx_buf_release(&out);
	sbx_buf_release(&err);
	sbx_buf_release(&all);
	follow_free(f);
}

/* The log so far: JSON, or the text for a client that did not ask for
 * them apart. follow=true on a WebSocket: the log as it comes. */
static enum MHD_Result
h_logs(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sess *s = sess_of(r, &ret);
	struct sbx_buf out = {0}, err = {0}, all = {0};
	struct cmd *c;
	json_t *j = NULL;
	const char *fw = sbxd_query(r, "follow");
	int found, split = split_output(r);

	if (!s)
		return ret;
	pthread_mutex_lock(&smu);
	if ((c = cmd_of(r, s)) && fw && !strcmp(fw, "true") &&
	    sbxd_ws_asked(r)) {
		struct follow *f = sbx_xcalloc(1, sizeof *f);

		c->followers++;
		pthread_mutex_unlock(&smu);
		f->s = s;
		f->c = c;
		f->split = split;
		return sbxd_ws_upgrade(r, NULL, follow_run, follow_free,
		    f);
	}
	if (c) {
		if (split)
			j = log_json(r, c, json_object());
		else
			demux(&c->log, &out, &err, &all);
	}
	found = !!c;
	pthread_mutex_unlock(&smu);
	sess_put(s);
	if (!found)
		ret = sbxd_dt_tb_err(r, 404, "NOT_FOUND", "command not "
		    "found");
	else if (j)
		ret = sbxd_reply_json(r, 200, j);
	else
		ret = sbxd_reply(r, 200, "text/plain; charset=utf-8",
		    all.data ? all.data : "", all.len);
	sbx_buf_release(&out);
	sbx_buf_release(&err);
	sbx_buf_release(&all);
	return ret;
}

static enum MHD_Result
h_input(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sess *s = sess_of(r, &ret);
	json_t *j = NULL, *d;
	struct cmd *c;
	int running = 0, found;

	if (!s)
		return ret;
	if (!(j = sbxd_dt_tb_body(r, &ret)))
		goto out;
	d = json_object_get(j, "data");
	if (!json_is_string(d) || json_string_length(d) > INPUT_MAX) {
		ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "data is "
		    "required (at most %u bytes)", INPUT_MAX);
		goto out;
	}
	pthread_mutex_lock(&s->wmu);
	pthread_mutex_lock(&smu);
	c = cmd_of(r, s);
	found = !!c;
	running = c && c == s->cur;
	pthread_mutex_unlock(&smu);
	if (running && sbx_write_all(s->in_fd, json_string_value(d),
	    json_string_length(d)) < 0)
		running = 0;
	pthread_mutex_unlock(&s->wmu);
	if (!found)
		ret = sbxd_dt_tb_err(r, 404, "NOT_FOUND", "command not "
		    "found");
	else if (!running)
		ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "command is not "
		    "running");
	else
		ret = sbxd_reply_empty(r, 204);
out:
	json_decref(j);
	sess_put(s);
	return ret;
}

const struct sbxd_route sbxd_dt_sess_routes[] = {
	{"POST", "/toolbox/*/process/session", 0, h_create, NULL},
	{"GET", "/toolbox/*/process/session", 0, h_list, NULL},
	{"GET", "/toolbox/*/process/session/*", 0, h_get, NULL},
	{"DELETE", "/toolbox/*/process/session/*", 0, h_delete, NULL},
	{"POST", "/toolbox/*/process/session/*/exec", 0, h_exec, NULL},
	{"GET", "/toolbox/*/process/session/*/command/*", 0, h_command, NULL},
	{"GET", "/toolbox/*/process/session/*/command/*/logs", 0, h_logs,
	    NULL},
	{"POST", "/toolbox/*/process/session/*/command/*/input", 0, h_input,
	    NULL},
	{NULL, NULL, 0, NULL, NULL},
};
