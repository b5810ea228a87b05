/* daytona-toolbox.c - Daytona's toolbox (/toolbox/ID/...): one-shot
 * commands and files, each path resolved inside the sandbox by the files
 * helper (files.c), each command run by the backend's exec (proc.c's
 * child) with argv arrays. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbxd.h"

#define DT_BOUNDARY "DAYTONA-FILE-BOUNDARY"
#define DT_OUT_MAX (64u << 20) /* bytes of a command's output kept */
#define DT_MAX_PATHS 1024
#define DT_CHUNK 65536

json_t *
sbxd_dt_tb_body(struct sbxd_req *r, enum MHD_Result *ret)
{
	json_error_t e;
	json_t *j = r->body.len ? json_loadb(r->body.data, r->body.len, 0,
	    &e) : NULL;

	if (!json_is_object(j)) {
		json_decref(j);
		*ret = sbxd_dt_tb_err(r, 400, "INVALID_REQUEST_BODY",
		    "invalid request body: %s", !r->body.len ? "it is empty" :
		    "not a JSON object");
		return NULL;
	}
	return j;
}

/* Who the box's Daytona user runs as (*as, NULL: the sandbox's root)
 * and its home (malloc'd). */
static char *
user_home(struct sbxd_box *b, char **as)
{
	char *user = sbxd_dt_user(b), *a = NULL, *home = NULL;
	json_t *fail = NULL;

	if (sbxd_proc_user(b, user, &a, &home, &fail) < 0) {
		json_decref(fail);
		home = sbx_xstrdup(strcmp(user, "root") ? "/home/user" :
		    "/root");
	}
	free(user);
	if (as)
		*as = a;
	else
		free(a);
	return home;
}

/* Where a box's commands start and its relative paths are (malloc'd). */
char *
sbxd_dt_work_dir(struct sbxd_box *b)
{
	if (b->workdir)
		return sbx_xstrdup(b->workdir);
	return user_home(b, NULL);
}

/* p in the sandbox, a relative one against the work dir (malloc'd). */
static char *
abs_path(struct sbxd_box *b, const char *p)
{
	char *w, *s;

	if (*p == '/')
		return sbx_xstrdup(p);
	w = sbxd_dt_work_dir(b);
	s = sbx_xasprintf("%s/%s", w, p);
	free(w);
	return s;
}

/* --- running a command -------------------------------------------------- */


struct run {
	const char *const *argv;
	const char *in;        /* its stdin, or NULL */
	size_t in_len;
	const char *cwd;
	const json_t *envs;    /* more of its environment, or NULL */
	uint64_t timeout_ms;   /* 0: none */
	struct sbx_buf out;    /* stdout and stderr as they came */
	int exit_code, timed_out;
};

static void
close_pair(int p[2])
{
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	p[0] = p[1] = -1;
}

int
sbxd_dt_spawn(struct sbxd_box *b, const char *const *argv, const char *cwd,
    const json_t *envs, uint64_t timeout_ms, int tty, const int fds[5],
    struct sbxd_child *ch, struct sbx_err *err)
{
	json_t *args, *a, *e;
	char **env, *as = NULL, *home;
	size_t i;
	int rc;

	env = sbxd_box_env(b, envs);
	home = user_home(b, &as);
	free(env[0]);
	env[0] = sbx_xasprintf("HOME=%s", home);
	free(home);
	a = json_array();
	e = json_array();
	for (i = 0; argv[i]; i++)
		json_array_append_new(a, json_string(argv[i]));
	for (i = 0; env[i]; i++)
		json_array_append_new(e, json_string(env[i]));
	sbxd_env_free(env);
	args = json_pack("{s:O,s:o,s:o,s:s?,s:I,s:b,s:b,s:s?}", "ref", b->ref,
	    "argv", a, "env", e, "cwd", cwd, "timeout_ms",
	    (json_int_t)timeout_ms, "tty", tty, "interactive", 1, "user", as);
	free(as);
	rc = sbxd_spawn("proc", args, fds, 5, ch, err);
	json_decref(args);
	return rc;
}

/* Run x->argv in the box, as its Daytona user with that one's HOME: 0,
 * or -1 with err when it could not be started. */
static int
run(struct sbxd_box *b, struct run *x, struct sbx_err *err)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, res[2] = {-1, -1};
	int go[2] = {-1, -1}, rc = -1, got = 0;
	struct sbxd_child ch = SBXD_CHILD_NONE;
	struct sbxd_proc_result pr = {0};
	size_t in_off = 0;
	char buf[DT_CHUNK];
	ssize_t n;

	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
	    pipe2(res, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make pipes:");
		goto out;
	}
	{
		int fds[5] = {in[0], out[1], out[1], res[1], go[1]};

		if (sbxd_dt_spawn(b, x->argv, x->cwd, x->envs, x->timeout_ms,
		    0, fds, &ch, err) < 0)
			goto out;
	}
	close(in[0]);
	close(out[1]);
	close(res[1]);
	close(go[1]);
	in[0] = out[1] = res[1] = go[1] = -1;
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	if (!x->in_len) {
		close(in[1]);
		in[1] = -1;
	}
	/* Its output until it ends; once its result is in, what is left
	 * in the pipe (a child it left behind may hold the pipe open). */
	for (;;) {
		struct pollfd p[3] = {{out[0], POLLIN, 0}, {res[0], POLLIN, 0},
		    {in[1], POLLOUT, 0}};
		int k = poll(p, 3, got ? 100 : -1);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		if (p[2].revents & (POLLOUT | POLLERR | POLLHUP)) {
			n = write(in[1], x->in + in_off, x->in_len - in_off);
			if (n > 0)
				in_off += (size_t)n;
			if (n < 0 && errno != EAGAIN) {
				close(in[1]);
				in[1] = -1;
			} else if (in_off == x->in_len) {
				close(in[1]);
				in[1] = -1;
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = read(out[0], buf, sizeof buf);
			if (n > 0) {
				if (x->out.len + (size_t)n <= DT_OUT_MAX)
					sbx_buf_add(&x->out, buf, (size_t)n);
			} else if (n == 0 || errno != EINTR) {
				close(out[0]);
				out[0] = -1;
				if (got)
					break;
			}
		}
		if (!got && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			n = read(res[0], &pr, sizeof pr);
			got = 1;
			if (n != (ssize_t)sizeof pr)
				pr.rc = -1;
			if (out[0] < 0)
				break;
		}
	}
	if (pr.rc < 0 && got && pr.msg[0]) {
		sbx_err_set(err, SBX_EX_FAIL, "%s", pr.msg);
		x->exit_code = -1;
	} else {
		x->exit_code = pr.signal ? 128 + pr.signal : pr.exit_code;
	}
	x->timed_out = pr.timed_out;
	rc = 0;
out:
	if (ch.pid > 0 && !got)
		sbxd_child_kill(&ch, SIGKILL);
	sbxd_child_release(&ch);
	close_pair(in);
	close_pair(out);
	close_pair(res);
	close_pair(go);
	return rc;
}

json_t *
sbxd_dt_text(const char *p, size_t n)
{
	json_t *v = json_stringn(p ? p : "", n);
	char *s;
	size_t i;

	if (v)
		return v;
	/* Not UTF-8: what is printable of it. */
	s = strndup(p, n);
	for (i = 0; s[i]; i++)
		if ((unsigned char)s[i] >= 0x80)
			s[i] = '?';
	v = json_string(s);
	free(s);
	return v ? v : json_string("");
}

static int
env_name_ok(const char *s)
{
	size_t i;

	if (!*s || (*s >= '0' && *s <= '9'))
		return 0;
	for (i = 0; s[i]; i++)
		if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' &&
		    s[i] <= '9')))
			return 0;
	return 1;
}

/* POST /process/execute: the command piped to a shell, as Daytona's
 * daemon does; stdout and stderr together. */
static enum MHD_Result
h_execute(struct sbxd_req *r)
{
	static const char *const sh[] = {"/bin/sh", NULL};
	enum MHD_Result ret;
	json_t *j = sbxd_dt_tb_body(r, &ret), *envs, *v;
	const char *cmd, *cwd, *k;
	struct run x = {0};
	struct sbx_err err;
	char *dir = NULL;
	json_int_t t = 0;

	if (!j)
		return ret;
	cmd = sbx_json_str(j, "command");
	cwd = sbx_json_str(j, "cwd");
	envs = json_object_get(j, "envs");
	v = json_object_get(j, "timeout");
	if (!cmd || !cmd[strspn(cmd, " \t\r\n")]) {
		ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "command is "
		    "required");
		goto out;
	}
	if (v && !json_is_null(v) && (!json_is_integer(v) ||
	    (t = json_integer_value(v)) < 0 || t > 86400 * 30)) {
		ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "timeout is a "
		    "number of seconds");
		goto out;
	}
	if (envs && !json_is_null(envs)) {
		if (!json_is_object(envs)) {
			ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "envs maps "
			    "names to values");
			goto out;
		}
		json_object_foreach(envs, k, v)
			if (!env_name_ok(k) || !json_is_string(v)) {
				ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST",
				    "invalid environment variable '%s'", k);
				goto out;
			}
	} else {
		envs = NULL;
	}
	dir = cwd && *cwd ? abs_path(r->box, cwd) : sbxd_dt_work_dir(r->box);
	x.argv = sh;
	x.in = cmd;
	x.in_len = strlen(cmd);
	x.cwd = dir;
	x.envs = envs;
	x.timeout_ms = (uint64_t)t * 1000;
	if (run(r->box, &x, &err) < 0) {
		ret = sbxd_reply_json(r, 200, json_pack("{s:i,s:s}", "exitCode",
		    -1, "result", err.msg));
		goto out;
	}
	if (x.timed_out) {
		ret = sbxd_dt_tb_err(r, 408, "REQUEST_TIMEOUT", "request "
		    "timeout: command execution timeout");
		goto out;
	}
	v = sbxd_dt_text(x.out.data, x.out.len);
	ret = sbxd_reply_json(r, 200, json_pack("{s:i,s:o}", "exitCode",
	    x.exit_code, "result", v));
out:
	sbx_buf_release(&x.out);
	free(dir);
	json_decref(j);
	return ret;
}

/* --- files ------------------------------------------------------------- */

static int
code_status(const char *code, const char **dt)
{
	if (!strcmp(code, "not_found"))
		return *dt = "NOT_FOUND", 404;
	if (!strcmp(code, "permission_denied"))
		return *dt = "FORBIDDEN", 403;
	if (!strcmp(code, "already_exists"))
		return *dt = "CONFLICT", 409;
	if (!strcmp(code, "invalid_argument") ||
	    !strcmp(code, "unauthenticated") ||
	    !strcmp(code, "failed_precondition"))
		return *dt = "BAD_REQUEST", 400;
	return *dt = "INTERNAL_SERVER_ERROR", 500;
}

/* q (op and its fields) as the box's user, to a files helper of its
 * own; the answer, or NULL after answering with its error. */
static json_t *
files_do(struct sbxd_req *r, json_t *q, int *fd, enum MHD_Result *ret)
{
	char *user = sbxd_dt_user(r->box);
	const char *code, *dt;
	json_t *a;
	int st;

	json_object_set_new(q, "user", json_string(user));
	free(user);
	a = sbxd_inbox_do(r->box, q, fd);
	if ((code = sbx_json_str(a, "error"))) {
		st = code_status(code, &dt);
		*ret = sbxd_dt_tb_err(r, st, dt, "%s", sbx_json_str(a,
		    "message") ? sbx_json_str(a, "message") : code);
		json_decref(a);
		return NULL;
	}
	return a;
}

/* The query's path, made absolute; NULL after answering 400. */
static char *
query_path(struct sbxd_req *r, const char *k, enum MHD_Result *ret)
{
	const char *p = sbxd_query(r, k);

	if (!p || !*p) {
		*ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "%s is required",
		    k);
		return NULL;
	}
	return abs_path(r->box, p);
}

/* Daytona's FileInfo of an entry of the files helper. */
static json_t *
file_info(const json_t *e)
{
	const char *t = sbx_json_str(e, "modifiedTime");
	const char *size = sbx_json_str(e, "size");
	char perm[8], mt[64];

	snprintf(perm, sizeof perm, "%04o", (unsigned)sbx_json_int(e, "mode",
	    0));
	/* Go's time.String(), the deprecated modTime */
	snprintf(mt, sizeof mt, "%.10s %.8s +0000 UTC", t ? t : "",
	    t && strlen(t) > 11 ? t + 11 : "");
	return json_pack("{s:s,s:s,s:b,s:I,s:s,s:s,s:s,s:s,s:s,s:s}",
	    "name", sbx_json_str(e, "name"), "path", sbx_json_str(e, "path"),
	    "isDir", !strcmp(sbx_json_str(e, "type") ? sbx_json_str(e,
	    "type") : "", "FILE_TYPE_DIRECTORY"), "size",
	    (json_int_t)(size ? strtoll(size, NULL, 10) : 0), "mode",
	    sbx_json_str(e, "permissions") ? sbx_json_str(e, "permissions") :
	    "", "permissions", perm, "owner", sbx_json_str(e, "owner") ?
	    sbx_json_str(e, "owner") : "", "group", sbx_json_str(e, "group") ?
	    sbx_json_str(e, "group") : "", "modifiedAt", t ? t : "",
	    "modTime", mt);
}

/* The entry of path, or NULL; *missing when there is none (no answer
 * then), else NULL after answering. */
static json_t *
stat_of(struct sbxd_req *r, const char *path, int *missing,
    enum MHD_Result *ret)
{
	char *user = sbxd_dt_user(r->box);
	json_t *a, *e;
	const char *code;

	a = sbxd_inbox_do(r->box, json_pack("{s:s,s:s,s:s}", "op", "stat",
	    "path", path, "user", user), NULL);
	free(user);
	*missing = 0;
	if ((code = sbx_json_str(a, "error"))) {
		if (!strcmp(code, "not_found")) {
			*missing = 1;
		} else {
			const char *dt;
			int st = code_status(code, &dt);

			*ret = sbxd_dt_tb_err(r, st, dt, "%s",
			    sbx_json_str(a, "message"));
		}
		json_decref(a);
		return NULL;
	}
	e = json_incref(json_object_get(a, "entry"));
	json_decref(a);
	return e;
}

/* The entry of path; NULL after answering (404 naming what when there
 * is none). */
static json_t *
stat_or_404(struct sbxd_req *r, const char *path, const char *what,
    enum MHD_Result *ret)
{
	json_t *e;
	int missing;

	if (!(e = stat_of(r, path, &missing, ret)) && missing)
		*ret = sbxd_dt_tb_err(r, 404, "NOT_FOUND", "%s not found: %s",
		    what, path);
	return e;
}

static enum MHD_Result
h_list(struct sbxd_req *r)
{
	enum MHD_Result ret;
	const char *p = sbxd_query(r, "path"), *d = sbxd_query(r, "depth");
	char *path = abs_path(r->box, p && *p ? p : ".");
	uint64_t depth = 1;
	json_t *a, *out, *e;
	size_t i;

	if (d && *d && sbx_parse_u64(d, 1, 64, &depth) < 0) {
		free(path);
		return sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "depth is a "
		    "number from 1 to 64");
	}
	a = files_do(r, json_pack("{s:s,s:s,s:I}", "op", "list", "path", path,
	    "depth", (json_int_t)depth), NULL, &ret);
	free(path);
	if (!a)
		return ret;
	out = json_array();
	json_array_foreach(json_object_get(a, "entries"), i, e)
		json_array_append_new(out, file_info(e));
	json_decref(a);
	return sbxd_reply_json(r, 200, out);
}

static enum MHD_Result
h_info(struct sbxd_req *r)
{
	enum MHD_Result ret;
	char *path = query_path(r, "path", &ret);
	json_t *e;

	if (!path)
		return ret;
	e = stat_or_404(r, path, "file", &ret);
	free(path);
	if (!e)
		return ret;
	ret = sbxd_reply_json(r, 200, file_info(e));
	json_decref(e);
	return ret;
}

static void
safe_name(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == '"' || *s == '\\' ||
		    *s == 0x7f)
			*s = '_';
}

static enum MHD_Result
h_download(struct sbxd_req *r)
{
	enum MHD_Result ret;
	char *path = query_path(r, "path", &ret), *disp;
	struct MHD_Response *rs;
	const char *name;
	struct stat st;
	json_t *a;
	int fd = -1;

	if (!path)
		return ret;
	a = files_do(r, json_pack("{s:s,s:s}", "op", "open", "path", path),
	    &fd, &ret);
	free(path);
	if (!a) {
		if (fd >= 0)
			close(fd);
		return ret;
	}
	if (fd < 0 || fstat(fd, &st) < 0) {
		json_decref(a);
		if (fd >= 0)
			close(fd);
		return sbxd_dt_tb_err(r, 500, "INTERNAL_SERVER_ERROR", "the "
		    "file was not handed over");
	}
	rs = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
	if (!rs) {
		close(fd);
		json_decref(a);
		return MHD_NO;
	}
	name = sbx_json_str(json_object_get(a, "entry"), "name");
	disp = sbx_xasprintf("attachment; filename=\"%s\"", name ? name : "");
	safe_name(disp + strlen("attachment; filename=\""));
	disp[strlen(disp) - 1] = '"';
	MHD_add_response_header(rs, "Content-Type", "application/octet-stream");
	MHD_add_response_header(rs, "Content-Disposition", disp);
	free(disp);
	json_decref(a);
	r->status = 200;
	ret = MHD_queue_response(r->c, 200, rs);
	MHD_destroy_response(rs);
	return ret;
}

/* --- bulk download: a multipart answer ------------------------------------ */

struct dl {
	size_t n, i;
	int *fds;             /* -1: an error part */
	char **heads;         /* each part's head (and an error's body) */
	struct sbx_buf pend;
	size_t pend_off;
	int cur, ended;
};

static void
dl_free(void *cls)
{
	struct dl *d = cls;
	size_t i;

	for (i = 0; i < d->n; i++) {
		if (d->fds[i] >= 0)
			close(d->fds[i]);
		free(d->heads[i]);
	}
	if (d->cur >= 0)
		close(d->cur);
	free(d->fds);
	free(d->heads);
	sbx_buf_release(&d->pend);
	free(d);
}

static ssize_t
dl_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct dl *d = cls;
	ssize_t n;
	size_t k;

	(void)pos;
	for (;;) {
		if (d->pend_off < d->pend.len) {
			k = d->pend.len - d->pend_off;
			k = k < max ? k : max;
			memcpy(buf, d->pend.data + d->pend_off, k);
			d->pend_off += k;
			return (ssize_t)k;
		}
		d->pend.len = d->pend_off = 0;
		if (d->cur >= 0) {
			while ((n = read(d->cur, buf, max)) < 0 &&
			    errno == EINTR)
				;
			if (n > 0)
				return n;
			close(d->cur);
			d->cur = -1;
			if (n < 0)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			sbx_buf_add(&d->pend, "\r\n", 2);
			continue;
		}
		if (d->i < d->n) {
			sbx_buf_add(&d->pend, d->heads[d->i],
			    strlen(d->heads[d->i]));
			d->cur = d->fds[d->i];
			d->fds[d->i++] = -1;
			continue;
		}
		if (!d->ended) {
			d->ended = 1;
			sbx_buf_add(&d->pend, "--" DT_BOUNDARY "--\r\n",
			    strlen("--" DT_BOUNDARY "--\r\n"));
			continue;
		}
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
}

static int
path_printable(const char *p)
{
	for (; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == '"' || *p == 0x7f)
			return 0;
	return 1;
}

static enum MHD_Result
h_bulk_download(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = sbxd_dt_tb_body(r, &ret), *paths, *v, *a, *eb;
	struct MHD_Response *rs;
	const char *p, *code;
	struct stat st;
	struct dl *d;
	char *user, *full, *body;
	size_t i;
	int fd;

	if (!j)
		return ret;
	paths = json_object_get(j, "paths");
	if (!json_is_array(paths) || !json_array_size(paths) ||
	    json_array_size(paths) > DT_MAX_PATHS) {
		json_decref(j);
		return sbxd_dt_tb_err(r, 400, "INVALID_REQUEST_BODY", "paths "
		    "is a list of 1 to %d paths", DT_MAX_PATHS);
	}
	json_array_foreach(paths, i, v)
		if (!json_is_string(v) || !*json_string_value(v) ||
		    !path_printable(json_string_value(v))) {
			json_decref(j);
			return sbxd_dt_tb_err(r, 400, "INVALID_REQUEST_BODY",
			    "paths are printable strings without '\"'");
		}
	d = sbx_xcalloc(1, sizeof *d);
	d->cur = -1;
	d->n = json_array_size(paths);
	d->fds = sbx_xcalloc(d->n, sizeof *d->fds);
	d->heads = sbx_xcalloc(d->n, sizeof *d->heads);
	user = sbxd_dt_user(r->box);
	json_array_foreach(paths, i, v) {
		p = json_string_value(v);
		full = abs_path(r->box, p);
		fd = -1;
		a = sbxd_inbox_do(r->box, json_pack("{s:s,s:s,s:s}", "op",
		    "open", "path", full, "user", user), &fd);
		free(full);
		if (!(code = sbx_json_str(a, "error")) && fd >= 0 &&
		    fstat(fd, &st) == 0) {
			d->fds[i] = fd;
			d->heads[i] = sbx_xasprintf("--" DT_BOUNDARY "\r\n"
			    "Content-Disposition: form-data; name=\"file\"; "
			    "filename=\"%s\"\r\nContent-Type: application/"
			    "octet-stream\r\nContent-Length: %lld\r\n\r\n", p,
			    (long long)st.st_size);
		} else {
			if (fd >= 0)
				close(fd);
			d->fds[i] = -1;
			eb = json_pack("{s:i,s:s,s:s}", "statusCode",
			    code && !strcmp(code, "not_found") ? 404 : code &&
			    !strcmp(code, "permission_denied") ? 403 : 400,
			    "message", sbx_json_str(a, "message") ?
			    sbx_json_str(a, "message") : "cannot read the file",
			    "code", code && !strcmp(code, "not_found") ?
			    "FILE_NOT_FOUND" : code && !strcmp(code,
			    "permission_denied") ? "FILE_ACCESS_DENIED" :
			    "INVALID_FILE_PATH");
			body = json_dumps(eb, JSON_COMPACT);
			d->heads[i] = sbx_xasprintf("--" DT_BOUNDARY "\r\n"
			    "Content-Disposition: form-data; name=\"error\"; "
			    "filename=\"%s\"\r\nContent-Type: application/"
			    "json\r\n\r\n%s\r\n", p, body ? body : "{}");
			free(body);
			json_decref(eb);
		}
		json_decref(a);
	}
	free(user);
	json_decref(j);
	rs = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, DT_CHUNK,
	    dl_read, d, dl_free);
	if (!rs) {
		dl_free(d);
		return MHD_NO;
	}
	MHD_add_response_header(rs, "Content-Type", "multipart/form-data; "
	    "boundary=" DT_BOUNDARY);
	r->status = 200;
	ret = MHD_queue_response(r->c, 200, rs);
	MHD_destroy_response(rs);
	return ret;
}

/* --- uploads: multipart bodies through MHD's post processor ---------------- */

struct up {
	struct sbxd_inbox ib;
	struct MHD_PostProcessor *pp;
	int started, bulk, fd;
	char *key;            /* the part being written */
	json_t *paths;        /* bulk: "N" -> files[N].path as it came */
	json_t *files;        /* [{"path","bytes","created"}] */
	uint64_t total;
	int status;
	char code[32], msg[512];
	char *user;
};

static void
up_fail(struct up *u, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
up_fail(struct up *u, int status, const char *code, const char *fmt, ...)
{
	va_list ap;

	if (u->status)
		return;
	u->status = status;
	snprintf(u->code, sizeof u->code, "%s", code);
	va_start(ap, fmt);
	vsnprintf(u->msg, sizeof u->msg, fmt, ap);
	va_end(ap);
}

/* "files[N].what" -> N, and what in *what; -1 when key is not one. */
static long
bulk_key(const char *key, const char **what)
{
	char *end;
	long n;

	if (strncmp(key, "files[", 6))
		return -1;
	n = strtol(key + 6, &end, 10);
	if (end == key + 6 || n < 0 || n >= DT_MAX_PATHS ||
	    strncmp(end, "].", 2))
		return -1;
	*what = end + 2;
	return n;
}

static int
up_open(struct up *u, struct sbxd_box *b, const char *path)
{
	char *full = abs_path(b, path);
	json_t *a;

	if (u->fd >= 0) {
		close(u->fd);
		u->fd = -1;
	}
	a = sbxd_inbox_call(&u->ib, json_pack("{s:s,s:s,s:s}", "op",
	    "create", "path", full, "user", u->user), &u->fd);
	free(full);
	if (sbx_json_str(a, "error") || u->fd < 0) {
		const char *dt;
		int st = code_status(sbx_json_str(a, "error") ?
		    sbx_json_str(a, "error") : "internal", &dt);

		up_fail(u, st, dt, "%s", sbx_json_str(a, "message") ?
		    sbx_json_str(a, "message") : "the file was not handed over");
		json_decref(a);
		return -1;
	}
	json_array_append_new(u->files, json_pack("{s:s,s:s,s:I,s:O}",
	    "path", path, "real", sbx_json_str(a, "path"), "bytes",
	    (json_int_t)0, "created", json_object_get(a, "created")));
	json_decref(a);
	return 0;
}

static enum MHD_Result
up_part(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *filename, const char *type, const char *enc,
    const char *data, uint64_t off, size_t size)
{
	struct sbxd_req *r = cls;
	struct up *u = r->up;
	const char *what = NULL, *have;
	char idx[24], *s;
	json_t *last;
	long n;

	(void)kind;
	(void)filename;
	(void)type;
	(void)enc;
	(void)off;
	if (u->status || !key)
		return u->status ? MHD_NO : MHD_YES;
	n = u->bulk ? bulk_key(key, &what) : -1;
	if (u->bulk && n >= 0 && !strcmp(what, "path")) {
		snprintf(idx, sizeof idx, "%ld", n);
		have = sbx_json_str(u->paths, idx);
		s = sbx_xasprintf("%s%.*s", have ? have : "", (int)size, data);
		json_object_set_new(u->paths, idx, json_string(s));
		free(s);
		return MHD_YES;
	}
	if (!(u->bulk ? n >= 0 && !strcmp(what, "file") : !strcmp(key,
	    "file")))
		return MHD_YES;
	if (!u->key || strcmp(u->key, key)) {
		free(u->key);
		u->key = sbx_xstrdup(key);
		snprintf(idx, sizeof idx, "%ld", n);
		have = u->bulk ? sbx_json_str(u->paths, idx) :
		    sbxd_query(r, "path");
		if (!have || !*have) {
			up_fail(u, 400, "BAD_REQUEST", u->bulk ? "files[%ld]."
			    "path must come before files[%ld].file" : "path is "
			    "required", n, n);
			return MHD_NO;
		}
		if (up_open(u, r->box, have) < 0)
			return MHD_NO;
	}
	if (!size)
		return MHD_YES;
	if (sbx_write_all(u->fd, data, size) < 0) {
		up_fail(u, 500, "INTERNAL_SERVER_ERROR", "error writing file: "
		    "%s", strerror(errno));
		return MHD_NO;
	}
	last = json_array_get(u->files, json_array_size(u->files) - 1);
	json_object_set_new(last, "bytes", json_integer(sbx_json_int(last,
	    "bytes", 0) + (json_int_t)size));
	return MHD_YES;
}

static void
up_free(struct sbxd_req *r)
{
	struct up *u = r->up;
	json_t *v;
	size_t i;

	if (u->pp)
		MHD_destroy_post_processor(u->pp);
	if (u->fd >= 0)
		close(u->fd);
	/* A file a failed upload made goes. */
	if (u->status)
		json_array_foreach(u->files, i, v)
			if (u->ib.sock >= 0 && json_is_true(json_object_get(v,
			    "created")))
				json_decref(sbxd_inbox_call(&u->ib, json_pack(
				    "{s:s,s:s,s:s}", "op", "abort", "path",
				    sbx_json_str(v, "real"), "user", u->user),
				    NULL));
	sbxd_inbox_end(&u->ib, 0);
	json_decref(u->paths);
	json_decref(u->files);
	free(u->key);
	free(u->user);
	free(u);
	r->up = NULL;
}

static struct up *
up_get(struct sbxd_req *r, int bulk)
{
	struct up *u = r->up;

	if (u)
		return u;
	u = sbx_xcalloc(1, sizeof *u);
	u->fd = -1;
	u->bulk = bulk;
	u->ib.ch = (struct sbxd_child)SBXD_CHILD_NONE;
	u->ib.sock = -1;
	u->paths = json_object();
	u->files = json_array();
	u->user = sbxd_dt_user(r->box);
	r->up = u;
	r->up_free = up_free;
	return u;
}

static int
up_begin(struct sbxd_req *r, struct up *u)
{
	const char *ct = sbxd_header(r, "Content-Type");
	struct sbx_err err;

	u->started = 1;
	if (!ct || strncasecmp(ct, "multipart/form-data", 19)) {
		up_fail(u, 400, "BAD_REQUEST", "the body must be "
		    "multipart/form-data");
		return -1;
	}
	if (!(u->pp = MHD_create_post_processor(r->c, DT_CHUNK, up_part, r))) {
		up_fail(u, 400, "BAD_REQUEST", "bad multipart/form-data body");
		return -1;
	}
	if (sbxd_inbox_start(r->box, &u->ib, &err) < 0) {
		up_fail(u, 501, "INTERNAL_SERVER_ERROR", "%s", err.msg);
		return -1;
	}
	return 0;
}

static int
up_data(struct sbxd_req *r, const char *p, size_t n, int bulk)
{
	struct up *u = up_get(r, bulk);

	if (u->status)
		return -1;
	if (!u->started && up_begin(r, u) < 0)
		return -1;
	u->total += n;
	if (sbxd.o.max_upload && u->total > sbxd.o.max_upload) {
		up_fail(u, 413, "BAD_REQUEST", "the upload is over %llu bytes",
		    (unsigned long long)sbxd.o.max_upload);
		return -1;
	}
	if (MHD_post_process(u->pp, p, n) != MHD_YES && !u->status)
		up_fail(u, 400, "BAD_REQUEST", "bad multipart/form-data body");
	return u->status ? -1 : 0;
}

static int
h_upload_data(struct sbxd_req *r, const char *p, size_t n)
{
	return up_data(r, p, n, 0);
}

static int
h_bulk_upload_data(struct sbxd_req *r, const char *p, size_t n)
{
	return up_data(r, p, n, 1);
}

static enum MHD_Result
up_end(struct sbxd_req *r, int bulk)
{
	struct up *u = up_get(r, bulk);
	json_t *out, *v;
	size_t i;

	if (!u->started)
		up_begin(r, u);
	if (!u->status && !json_array_size(u->files))
		up_fail(u, 400, "BAD_REQUEST", bulk ? "no files[i].file part "
		    "in the form" : "no part named 'file' in the form");
	if (u->fd >= 0 && close(u->fd) < 0)
		up_fail(u, 500, "INTERNAL_SERVER_ERROR", "error writing file: "
		    "%s", strerror(errno));
	u->fd = -1;
	if (u->status)
		return sbxd_dt_tb_err(r, u->status, u->code, "%s", u->msg);
	if (!bulk)
		return sbxd_reply_empty(r, 200);
	out = json_array();
	json_array_foreach(u->files, i, v)
		json_array_append_new(out, json_pack("{s:s,s:I}", "path",
		    sbx_json_str(v, "path"), "bytes", (json_int_t)sbx_json_int(v,
		    "bytes", 0)));
	return sbxd_reply_json(r, 200, json_pack("{s:o}", "files", out));
}

static enum MHD_Result
h_upload(struct sbxd_req *r)
{
	return up_end(r, 0);
}

static enum MHD_Result
h_bulk_upload(struct sbxd_req *r)
{
	return up_end(r, 1);
}

/* --- the rest of the files ------------------------------------------------ */

/* Run argv in the box for a file operation: 0, or -1 after answering
 * with its output. */
static int
file_cmd(struct sbxd_req *r, const char *const *argv, enum MHD_Result *ret)
{
	struct run x = {0};
	struct sbx_err err;
	char *dir = sbxd_dt_work_dir(r->box);
	int rc = 0;

	x.argv = argv;
	x.cwd = dir;
	x.timeout_ms = 60000;
	if (run(r->box, &x, &err) < 0) {
		*ret = sbxd_dt_tb_err(r, 500, "INTERNAL_SERVER_ERROR", "%s",
		    err.msg);
		rc = -1;
	} else if (x.exit_code) {
		*ret = sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "%s: %.*s",
		    argv[0], (int)(x.out.len > 300 ? 300 : x.out.len),
		    x.out.data ? x.out.data : "");
		rc = -1;
	}
	sbx_buf_release(&x.out);
	free(dir);
	return rc;
}

static int
mode_ok(const char *m)
{
	uint64_t v;
	char *end;

	if (!*m || strlen(m) > 5 || strspn(m, "01234567") != strlen(m))
		return 0;
	v = strtoull(m, &end, 8);
	return v <= 07777;
}

static int
name_ok(const char *s)
{
	size_t i;

	if (!*s || *s == '-' || strlen(s) > 64)
		return 0;
	for (i = 0; s[i]; i++)
		if (!(s[i] == '_' || s[i] == '-' || s[i] == '.' ||
		    (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

static enum MHD_Result
h_folder(struct sbxd_req *r)
{
	enum MHD_Result ret;
	char *path = query_path(r, "path", &ret);
	const char *mode = sbxd_query(r, "mode");
	json_t *a, *e;
	int missing;

	if (!path)
		return ret;
	if (mode && *mode && !mode_ok(mode)) {
		free(path);
		return sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "mode is an octal "
		    "string such as 0755");
	}
	/* mkdir -p: a directory that is there already is fine. */
	e = stat_of(r, path, &missing, &ret);
	if (!e && !missing) {
		free(path);
		return ret;
	}
	if (e && strcmp(sbx_json_str(e, "type") ? sbx_json_str(e, "type") :
	    "", "FILE_TYPE_DIRECTORY")) {
		json_decref(e);
		free(path);
		return sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "path exists and "
		    "is not a directory");
	}
	if (!e) {
		a = files_do(r, json_pack("{s:s,s:s}", "op", "mkdir", "path",
		    path), NULL, &ret);
		if (!a) {
			free(path);
			return ret;
		}
		json_decref(a);
	}
	json_decref(e);
	if (mode && *mode) {
		const char *argv[] = {"chmod", mode, "--", path, NULL};

		if (file_cmd(r, argv, &ret) < 0) {
			free(path);
			return ret;
		}
	}
	free(path);
	return sbxd_reply_empty(r, 201);
}

static enum MHD_Result
h_move(struct sbxd_req *r)
{
	enum MHD_Result ret;
	char *src = query_path(r, "source", &ret), *dst = NULL, *dir, *sl;
	json_t *e, *a;
	int missing;

	if (!src || !(dst = query_path(r, "destination", &ret)))
		goto out;
	if ((e = stat_of(r, dst, &missing, &ret)) || !missing) {
		if (e)
			ret = sbxd_dt_tb_err(r, 409, "CONFLICT", "destination "
			    "already exists: %s", dst);
		json_decref(e);
		goto out;
	}
	if (!(e = stat_or_404(r, src, "source", &ret)))
		goto out;
	json_decref(e);
	dir = sbx_xstrdup(dst);
	sl = strrchr(dir, '/');
	sl[sl == dir] = 0;
	e = stat_of(r, dir, &missing, &ret);
	free(dir);
	if (!e) {
		if (missing)
			ret = sbxd_dt_tb_err(r, 404, "NOT_FOUND", "the "
			    "destination's directory does not exist: %s", dst);
		goto out;
	}
	json_decref(e);
	a = files_do(r, json_pack("{s:s,s:s,s:s}", "op", "move", "path", src,
	    "to", dst), NULL, &ret);
	if (a)
		ret = sbxd_reply_empty(r, 200);
	json_decref(a);
out:
	free(src);
	free(dst);
	return ret;
}

static enum MHD_Result
h_delete(struct sbxd_req *r)
{
	enum MHD_Result ret;
	char *path = query_path(r, "path", &ret);
	const char *rec = sbxd_query(r, "recursive");
	json_t *e, *a;

	if (!path)
		return ret;
	if (!(e = stat_or_404(r, path, "file", &ret))) {
		free(path);
		return ret;
	}
	if (!strcmp(sbx_json_str(e, "type") ? sbx_json_str(e, "type") : "",
	    "FILE_TYPE_DIRECTORY") && !(rec && !strcmp(rec, "true"))) {
		json_decref(e);
		free(path);
		return sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "cannot delete "
		    "directory without recursive flag");
	}
	json_decref(e);
	a = files_do(r, json_pack("{s:s,s:s}", "op", "remove", "path", path),
	    NULL, &ret);
	free(path);
	if (!a)
		return ret;
	json_decref(a);
	return sbxd_reply_empty(r, 204);
}

static enum MHD_Result
h_permissions(struct sbxd_req *r)
{
	enum MHD_Result ret;
	char *path = query_path(r, "path", &ret), *who = NULL;
	const char *mode = sbxd_query(r, "mode");
	const char *owner = sbxd_query(r, "owner");
	const char *group = sbxd_query(r, "group");
	json_t *e;

	if (!path)
		return ret;
	if ((mode && *mode && !mode_ok(mode)) || (owner && *owner &&
	    !name_ok(owner)) || (group && *group && !name_ok(group))) {
		free(path);
		return sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "mode is octal, "
		    "owner and group are names");
	}
	if (!(e = stat_or_404(r, path, "file", &ret))) {
		free(path);
		return ret;
	}
	json_decref(e);
	if (mode && *mode) {
		const char *argv[] = {"chmod", mode, "--", path, NULL};

		if (file_cmd(r, argv, &ret) < 0)
			goto out;
	}
	if ((owner && *owner) || (group && *group)) {
		const char *argv[] = {"chown", NULL, "--", path, NULL};

		who = sbx_xasprintf("%s%s%s", owner ? owner : "", group &&
		    *group ? ":" : "", group ? group : "");
		argv[1] = who;
		if (file_cmd(r, argv, &ret) < 0)
			goto out;
	}
	ret = sbxd_reply_empty(r, 200);
out:
	free(who);
	free(path);
	return ret;
}

/* find (grep -F in files) and search (names matching a glob): a
 * command in the box; its NUL-separated output. */
static enum MHD_Result
find_run(struct sbxd_req *r, int grep)
{
	enum MHD_Result ret;
	char *path = query_path(r, "path", &ret);
	const char *pat = sbxd_query(r, "pattern");
	struct run x = {0};
	struct sbx_err err;
	char *dir = NULL, *p, *end, *nul, *colon, *nl;
	json_t *out, *e;

	if (!path)
		return ret;
	if (!pat || !*pat) {
		free(path);
		return sbxd_dt_tb_err(r, 400, "BAD_REQUEST", "pattern is "
		    "required");
	}
	if (!(e = stat_or_404(r, path, "path", &ret))) {
		free(path);
		return ret;
	}
	json_decref(e);
	{
		const char *g[] = {"grep", "-rnIZF", "-e", pat, "--", path,
		    NULL};
		const char *f[] = {"find", path, "-name", pat, "-print0",
		    NULL};

		dir = sbxd_dt_work_dir(r->box);
		x.argv = grep ? g : f;
		x.cwd = dir;
		x.timeout_ms = 120000;
		if (run(r->box, &x, &err) < 0) {
			ret = sbxd_dt_tb_err(r, 500, "INTERNAL_SERVER_ERROR",
			    "%s", err.msg);
			goto out;
		}
	}
	out = json_array();
	p = x.out.data;
	end = p ? p + x.out.len : p;
	/* grep -Z: "file\0line:content\n"; find -print0: "file\0". */
	while (p && p < end && (nul = memchr(p, 0, (size_t)(end - p)))) {
		if (!grep) {
			if ((e = json_stringn(p, (size_t)(nul - p))))
				json_array_append_new(out, e);
			p = nul + 1;
			continue;
		}
		nl = memchr(nul + 1, '\n', (size_t)(end - nul - 1));
		if (!nl)
			nl = end;
		colon = memchr(nul + 1, ':', (size_t)(nl - nul - 1));
		if (colon) {
			e = json_pack("{s:s%,s:I,s:s%}", "file", p,
			    (size_t)(nul - p), "line", (json_int_t)strtoll(nul + 1,
			    NULL, 10), "content", colon + 1,
			    (size_t)(nl - colon - 1));
			if (e)
				json_array_append_new(out, e);
		}
		p = nl + 1;
	}
	ret = sbxd_reply_json(r, 200, grep ? out : json_pack("{s:o}", "files",
	    out));
out:
	sbx_buf_release(&x.out);
	free(dir);
	free(path);
	return ret;
}

static enum MHD_Result
h_find(struct sbxd_req *r)
{
	return find_run(r, 1);
}

static enum MHD_Result
h_search(struct sbxd_req *r)
{
	return find_run(r, 0);
}

static enum MHD_Result
h_work_dir(struct sbxd_req *r)
{
	char *d = sbxd_dt_work_dir(r->box);
	enum MHD_Result ret = sbxd_reply_json(r, 200, json_pack("{s:s}", "dir",
	    d));

	free(d);
	return ret;
}

static enum MHD_Result
h_home_dir(struct sbxd_req *r)
{
	char *d = user_home(r->box, NULL);
	enum MHD_Result ret = sbxd_reply_json(r, 200, json_pack("{s:s}", "dir",
	    d));

	free(d);
	return ret;
}

static enum MHD_Result
h_version(struct sbxd_req *r)
{
	return sbxd_reply_json(r, 200, json_pack("{s:s}", "version",
	    SBX_VERSION));
}

const struct sbxd_route sbxd_dt_tb_routes[] = {
	{"POST", "/toolbox/*/process/execute", 0, h_execute, NULL},
	{"GET", "/toolbox/*/files", 0, h_list, NULL},
	{"DELETE", "/toolbox/*/files", 0, h_delete, NULL},
	{"GET", "/toolbox/*/files/info", 0, h_info, NULL},
	{"GET", "/toolbox/*/files/download", 0, h_download, NULL},
	{"POST", "/toolbox/*/files/bulk-download", 0, h_bulk_download, NULL},
	{"POST", "/toolbox/*/files/upload", 0, h_upload, h_upload_data},
	{"POST", "/toolbox/*/files/bulk-upload", 0, h_bulk_upload,
	    h_bulk_upload_data},
	{"POST", "/toolbox/*/files/folder", 0, h_folder, NULL},
	{"POST", "/toolbox/*/files/move", 0, h_move, NULL},
	{"POST", "/toolbox/*/files/permissions", 0, h_permissions, NULL},
	{"GET", "/toolbox/*/files/find", 0, h_find, NULL},
	{"GET", "/toolbox/*/files/search", 0, h_search, NULL},
	{"GET", "/toolbox/*/work-dir", 0, h_work_dir, NULL},
	{"GET", "/toolbox/*/user-home-dir", 0, h_home_dir, NULL},
	{"GET", "/toolbox/*/version", 0, h_version, NULL},
	{NULL, NULL, 0, NULL, NULL},
};
