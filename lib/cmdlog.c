/* cmdlog.c - the host's record of the commands run in a sandbox (sbx-logs),
 * and the detached commands' files inside the sandbox */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx.h"

/* The record lives on the host, written by the client: a sandbox can
 * never add to it or rewrite it. What the sandbox holds (a detached
 * command's output and status, under SBX_CMDLOG_DIR) fills in only the
 * end of a command the record already has. */

static char *
log_root(void)
{
	return sbx_config_dir("log.dir", "log", 1);
}

/* A backend's name or a sandbox's id as one file name. */
static int
name_ok(const char *s)
{
	size_t i;

	if (!s || !*s || *s == '.' || *s == '-')
		return 0;
	for (i = 0; s[i]; i++)
		if (i >= 128 || !(isalnum((unsigned char)s[i]) ||
		    strchr("_.-", s[i])))
			return 0;
	return 1;
}

char *
sbx_cmdlog_path(const char *backend, const char *id)
{
	char *root, *p;

	if (!name_ok(backend) || !name_ok(id))
		return NULL;
	root = log_root();
	p = sbx_xasprintf("%s/%s/%s.jsonl", root, backend, id);
	free(root);
	return p;
}

int
sbx_cmdlog_valid_cmd(const char *cid)
{
	size_t i;

	if (!cid)
		return 0;
	for (i = 0; cid[i]; i++)
		if (!isxdigit((unsigned char)cid[i]) ||
		    isupper((unsigned char)cid[i]))
			return 0;
	return i == SBX_CMDLOG_ID_LEN;
}

void
sbx_cmdlog_new_id(char cid[SBX_CMDLOG_ID_LEN + 1])
{
	unsigned char r[SBX_CMDLOG_ID_LEN / 2];
	size_t i;

	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		for (i = 0; i < sizeof r; i++)
			r[i] = (unsigned char)(rand() ^ getpid() ^
			    sbx_mono_ms());
	for (i = 0; i < sizeof r; i++)
		snprintf(cid + 2 * i, 3, "%02x", r[i]);
}

int
sbx_cmdlog_append(const char *backend, const char *id, const json_t *line,
    struct sbx_err *err)
{
	char *path, *dir, *s = NULL, *slash;
	size_t n;
	int fd = -1, rc = -1;

	if (!(path = sbx_cmdlog_path(backend, id)))
		return sbx_err_set(err, SBX_EX_FAIL, "no log for sandbox '%s' "
		    "of '%s': not a name for a file", id ? id : "", backend ?
		    backend : "");
	dir = sbx_xstrdup(path);
	slash = strrchr(dir, '/');
	*slash = '\0';
	if (sbx_mkdirs(dir, 0700, err) < 0)
		goto out;
	if (!(s = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER)))
		goto fail;
	n = strlen(s);
	s = sbx_xrealloc(s, n + 2);
	s[n++] = '\n';
	/* One O_APPEND write per line: concurrent execs never interleave. */
	if ((fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) < 0 || write(fd, s, n) != (ssize_t)n)
		goto fail;
	rc = 0;
	goto out;
fail:
	sbx_err_set(err, SBX_EX_FAIL, "cannot write '%s':", path);
out:
	if (fd >= 0)
		close(fd);
	free(s);
	free(dir);
	free(path);
	return rc;
}

int
sbx_cmdlog_remove(const char *backend, const char *id)
{
	char *path = sbx_cmdlog_path(backend, id);
	int rc = 0;

	if (path && unlink(path) < 0 && errno != ENOENT)
		rc = -1;
	free(path);
	return rc;
}

json_t *
sbx_cmdlog_line(long long start, const char *cid, char *const argv[],
    char *const env[], int detached)
{
	char ts[32];
	json_t *o = json_object(), *a = json_array(), *e = json_array();
	size_t i;

	sbx_time_fmt(start, ts, sizeof ts);
	for (i = 0; argv[i]; i++)
		json_array_append_new(a, sbx_json_bytes(argv[i],
		    strlen(argv[i])));
	/* Names only: a value may be a credential. */
	for (i = 0; env && env[i]; i++)
		json_array_append_new(e, sbx_json_bytes(env[i],
		    strcspn(env[i], "=")));
	json_object_set_new(o, "time", json_string(ts));
	json_object_set_new(o, "id", json_string(cid));
	json_object_set_new(o, "argv", a);
	json_object_set_new(o, "env", e);
	json_object_set_new(o, "detached", json_boolean(detached));
	json_object_set_new(o, "ended", json_false());
	json_object_set_new(o, "exit_code", json_null());
	json_object_set_new(o, "signal", json_null());
	json_object_set_new(o, "timed_out", json_false());
	json_object_set_new(o, "duration_ms", json_null());
	json_object_set_new(o, "bytes_out", json_null());
	json_object_set_new(o, "bytes_err", json_null());
	return o;
}

void
sbx_cmdlog_ended(json_t *line, const struct sbx_exec_result *r)
{
	json_object_set_new(line, "ended", json_true());
	json_object_set_new(line, "exit_code", json_integer(r->exit_code));
	json_object_set_new(line, "signal", r->signal ?
	    json_integer(r->signal) : json_null());
	json_object_set_new(line, "timed_out", json_boolean(r->timed_out));
	json_object_set_new(line, "duration_ms", json_integer(r->duration_ms));
	if (!r->bytes_unknown) {
		json_object_set_new(line, "bytes_out",
		    json_integer((json_int_t)r->bytes_out));
		json_object_set_new(line, "bytes_err",
		    json_integer((json_int_t)r->bytes_err));
	}
}

/* --- inside the sandbox: a detached command's directory ----------------- */

/* $1 the command's id, then its argv. The command runs in a shell of its
 * own, its stdio on files of its own (the exec's pipes are not held
 * open, so the exec ends), in a session of its own where setsid exists
 * (what ends the exec's session, as Daytona's toolbox ends a session's
 * processes with it, leaves it be): the exec waits on a FIFO until that
 * shell has its session. Its status is "CODE EPOCH" in status, written
 * whole by a rename. */
static const char start_sh[] =
    "umask 077\n"
    "d=" SBX_CMDLOG_DIR "/$1\n"
    "shift\n"
    "mkdir -p " SBX_CMDLOG_DIR " && mkdir \"$d\" && mkfifo \"$d/go\" || "
    "exit 125\n"
    "s=\n"
    "command -v setsid >/dev/null 2>&1 && s=setsid\n"
    "$s sh -c ': >\"$0/go\"\n"
    "\"$@\" </dev/null >\"$0/out\" 2>&1\n"
    "c=$?\n"
    "echo \"$c $(date +%s)\" >\"$0/status.tmp\"\n"
    "mv -f \"$0/status.tmp\" \"$0/status\"' \"$d\" \"$@\" "
    "</dev/null >/dev/null 2>&1 &\n"
    "p=$!\n"
    "read -r x <\"$d/go\"\n"
    "rm -f \"$d/go\"\n"
    "echo $p\n";

/* The ids given whose status is there: "ID CODE EPOCH BYTES" a line; the
 * first line of a status file only, so one never speaks for another. */
static const char ended_sh[] =
    "for i; do\n"
    "\tf=" SBX_CMDLOG_DIR "/$i/status\n"
    "\t[ -f \"$f\" ] || continue\n"
    "\tl=\n"
    "\tIFS= read -r l <\"$f\"\n"
    "\tn=$(wc -c <" SBX_CMDLOG_DIR "/$i/out 2>/dev/null) || n=0\n"
    "\tprintf '%s %s %s\\n' \"$i\" \"$l\" \"$n\"\n"
    "done\n";

/* Output of $1 from byte $2 (1 the first), $3 bytes at most; "ended" on
 * stderr first when its status is there (then the rest is all there),
 * "none" when the command has no directory. */
static const char output_sh[] =
    "d=" SBX_CMDLOG_DIR "/$1\n"
    "[ -d \"$d\" ] || { echo none >&2; exit 0; }\n"
    "[ -f \"$d/status\" ] && echo ended >&2\n"
    "[ -f \"$d/out\" ] || exit 0\n"
    "tail -c +\"$2\" \"$d/out\" | head -c \"$3\"\n";

static int
run_sh(const struct sbx_backend *be, const json_t *ref, const char *script,
    char *const args[], const struct sbx_exec_opts *base, size_t max,
    struct sbx_exec_result *r, struct sbx_err *err)
{
	struct sbx_exec_opts o = {0};
	char **argv;
	size_t n, i;
	int rc;

	if (base)
		o = *base;
	o.capture = 1;
	o.interactive = o.tty = 0;
	o.timeout_ms = 0;
	o.max_output = max;
	for (n = 0; args[n]; n++)
		;
	argv = sbx_xcalloc(n + 5, sizeof *argv);
	argv[0] = "sh";
	argv[1] = "-c";
	argv[2] = (char *)script;
	argv[3] = "sbx";
	for (i = 0; i < n; i++)
		argv[4 + i] = args[i];
	rc = be->ops->exec(ref, argv, &o, r, err);
	free(argv);
	return rc;
}

int
sbx_cmdlog_detach(const struct sbx_backend *be, const json_t *ref,
    const char *cid, char *const argv[], const struct sbx_exec_opts *o,
    struct sbx_err *err)
{
	struct sbx_exec_result r;
	char **args;
	size_t n;
	int rc = -1;

	for (n = 0; argv[n]; n++)
		;
	args = sbx_xcalloc(n + 2, sizeof *args);
	args[0] = (char *)cid;
	memcpy(args + 1, argv, n * sizeof *argv);
	if (run_sh(be, ref, start_sh, args, o, 4096, &r, err) < 0)
		goto out;
	if (r.exit_code != 0) {
		sbx_err_set(err, SBX_EX_EXECFAIL, "cannot start a detached "
		    "command in the sandbox (sh exited %d%s%.*s)", r.exit_code,
		    r.err.len ? ": " : "", (int)strcspn(r.err.data ? r.err.data :
		    "", "\n"), r.err.data ? r.err.data : "");
		goto out;
	}
	rc = 0;
out:
	sbx_buf_release(&r.out);
	sbx_buf_release(&r.err);
	free(args);
	return rc;
}

/* A detached command whose end the record has not got. */
static int
pending(const json_t *l)
{
	return json_is_true(json_object_get(l, "detached")) &&
	    !json_is_true(json_object_get(l, "ended"));
}

/* Fill line (a detached command's, not ended) from "CODE EPOCH BYTES". */
static void
fill_end(json_t *line, const char *s)
{
	long long code, end, bytes;
	char *e;
	struct tm tm = {0};
	const char *t = sbx_json_str(line, "time");
	long long start;

	errno = 0;
	code = strtoll(s, &e, 10);
	if (e == s || *e != ' ' || code < 0 || code > 255)
		return;
	s = e + 1;
	end = strtoll(s, &e, 10);
	if (e == s || *e != ' ' || end < 0)
		return;
	s = e + 1;
	while (*s == ' ')
		s++;
	bytes = strtoll(s, &e, 10);
	if (e == s || *e || bytes < 0 || errno)
		return;
	json_object_set_new(line, "ended", json_true());
	json_object_set_new(line, "exit_code", json_integer(code));
	json_object_set_new(line, "bytes_out", json_integer(bytes));
	/* Seconds, from the sandbox's clock: a duration to the second. */
	if (t && strptime(t, "%Y-%m-%dT%H:%M:%SZ", &tm)) {
		start = (long long)timegm(&tm);
		json_object_set_new(line, "duration_ms", json_integer(
		    end >= start ? (end - start) * 1000 : 0));
	}
}

int
sbx_cmdlog_resolve(const struct sbx_backend *be, const json_t *ref,
    json_t *lines, struct sbx_err *err)
{
	struct sbx_exec_result r;
	char **args, *p, *nl, *sp;
	size_t i, n = 0;
	json_t *l;
	int rc = -1;

	args = sbx_xcalloc(json_array_size(lines) + 1, sizeof *args);
	json_array_foreach(lines, i, l)
		if (pending(l) && sbx_cmdlog_valid_cmd(sbx_json_str(l, "id")))
			args[n++] = (char *)sbx_json_str(l, "id");
	if (!n) {
		free(args);
		return 0;
	}
	if (run_sh(be, ref, ended_sh, args, NULL, 1u << 20, &r, err) < 0)
		goto out;
	for (p = r.out.data; p && p < r.out.data + r.out.len; p = nl + 1) {
		if (!(nl = memchr(p, '\n', r.out.data + r.out.len - p)))
			break;
		*nl = '\0';
		if (!(sp = strchr(p, ' ')))
			continue;
		*sp = '\0';
		/* Only a command of the record, and the first word: an id. */
		json_array_foreach(lines, i, l)
			if (pending(l) && sbx_json_str(l, "id") &&
			    !strcmp(sbx_json_str(l, "id"), p))
				fill_end(l, sp + 1);
	}
	rc = 0;
out:
	sbx_buf_release(&r.out);
	sbx_buf_release(&r.err);
	free(args);
	return rc;
}

int
sbx_cmdlog_output(const struct sbx_backend *be, const json_t *ref,
    const char *cid, uint64_t *off, int *ended, struct sbx_buf *to,
    struct sbx_err *err)
{
	struct sbx_exec_result r;
	char from[32], max[32];
	char *args[] = {(char *)cid, from, max, NULL};
	const size_t chunk = 1u << 20;
	int rc = -1, more;

	do {
		snprintf(from, sizeof from, "%llu",
		    (unsigned long long)*off + 1);
		snprintf(max, sizeof max, "%zu", chunk);
		if (run_sh(be, ref, output_sh, args, NULL, chunk, &r, err) < 0)
			return -1;
		if (r.err.len >= 4 && !memcmp(r.err.data, "none", 4)) {
			sbx_err_set(err, SBX_EX_FAIL, "command '%s' left no "
			    "output in the sandbox", cid);
			goto out;
		}
		*ended = r.err.len >= 5 && !memcmp(r.err.data, "ended", 5);
		if (to && r.out.len)
			sbx_buf_add(to, r.out.data, r.out.len);
		else if (r.out.len && sbx_write_all(1, r.out.data,
		    r.out.len) < 0) {
			sbx_err_set(err, errno == EPIPE ? SBX_EX_OK :
			    SBX_EX_FAIL, "stdout:");
			goto out;
		}
		*off += r.out.len;
		more = r.out.len >= chunk && (!to || to->len < chunk);
		sbx_buf_release(&r.out);
		sbx_buf_release(&r.err);
	} while (more);
	return 0;
out:
	sbx_buf_release(&r.out);
	sbx_buf_release(&r.err);
	return rc;
}

int
sbx_cmdlog_sweep(const char *backend, const json_t *keep, long long before)
{
	char *path = sbx_cmdlog_path(backend, "x"), *id;
	struct dirent *e;
	struct stat st;
	size_t n;
	DIR *d;
	int fd, removed = 0;

	if (!path)
		return 0;
	*strrchr(path, '/') = '\0';
	if (!(d = opendir(path))) {
		free(path);
		return 0;
	}
	fd = dirfd(d);
	while ((e = readdir(d))) {
		n = strlen(e->d_name);
		if (n <= 6 || strcmp(e->d_name + n - 6, ".jsonl"))
			continue;
		id = sbx_xstrdup(e->d_name);
		id[n - 6] = '\0';
		/* One written since the listing may be of a sandbox made
		 * since. */
		if (!json_object_get(keep, id) && fstatat(fd, e->d_name, &st,
		    AT_SYMLINK_NOFOLLOW) == 0 && st.st_mtime < before &&
		    unlinkat(fd, e->d_name, 0) == 0)
			removed++;
		free(id);
	}
	closedir(d);
	free(path);
	return removed;
}
