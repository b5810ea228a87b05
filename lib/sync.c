/* sync.c - sbx-sync's work: which files go up, what changed in the sandbox,
 * and writing it back on the host file by file, at least once */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

/* --- what never travels, and the user's patterns ------------------------- */

static int
is_conflict_copy(const char *p)
{
	size_t n = strlen(p), k = strlen(".sbx-conflict");

	return n > k && !strcmp(p + n - k, ".sbx-conflict");
}

/* For a walk, which asks about each directory before going into it. */
static int
skip1(const char *path, int is_dir, void *arg)
{
	const struct sbx_sync_opts *o = arg;
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	if (!strcmp(base, ".git"))
		return 1;
	if (is_dir && (!strcmp(path, ".sbx") || (o->statedir &&
	    !strcmp(path, o->statedir))))
		return 1;
	if (!is_dir && is_conflict_copy(path))
		return 1;
	if (!is_dir && o->statefile && !strncmp(path, o->statefile, n = strlen(
	    o->statefile)) && (!path[n] || path[n] == '.'))
		return 1;
	if (o->exclude && sbx_ignore_match1(o->exclude, path, is_dir) == 1)
		return 1;
	if (o->sbxignore && sbx_ignore_match1(o->sbxignore, path, is_dir) == 1)
		return 1;
	return 0;
}

/* For a path met on its own: its parents are asked too. */
static int
skip_path(const struct sbx_sync_opts *o, const char *path)
{
	struct sbx_scan_opts so = {.skip = skip1, .arg = (void *)o};

	return sbx_scan_skipped(&so, path);
}

/* --- running git ------------------------------------------------------------ */

/* Run argv with input on stdin; its stdout into out. The exit status, or
 * -1 when it could not run. */
static int
run(char *const argv[], const char *in, size_t inlen, struct sbx_buf *out)
{
	int ip[2], op[2], status;
	pid_t pid;
	char buf[65536];
	ssize_t n;
	size_t off = 0;

	if (pipe2(ip, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(op, O_CLOEXEC) < 0) {
		close(ip[0]);
		close(ip[1]);
		return -1;
	}
	fflush(NULL);
	if ((pid = fork()) == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(ip[0], 0);
		dup2(op[1], 1);
		if (null >= 0)
			dup2(null, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(ip[0]);
	close(op[1]);
	if (pid < 0) {
		close(ip[1]);
		close(op[0]);
		return -1;
	}
	/* git reads all of stdin before it answers (check-ignore buffers
	 * its output unless told otherwise), so write first, then read. */
	while (off < inlen && (n = write(ip[1], in + off, inlen - off)) > 0)
		off += (size_t)n;
	close(ip[1]);
	while ((n = read(op[0], buf, sizeof buf)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		sbx_buf_add(out, buf, (size_t)n);
	}
	close(op[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Whether the project lies in a git work tree: a .git here or above.
 * Asked first so that a project without one never waits for git. */
static int
in_git_tree(void)
{
	static int known = -1;
	char path[PATH_MAX], *slash;
	struct stat st;

	if (known >= 0)
		return known;
	known = 0;
	if (!getcwd(path, sizeof path - 8))
		return known = 1; /* let git decide */
	for (;;) {
		size_t n = strlen(path);

		snprintf(path + n, sizeof path - n, "%s.git",
		    n && path[n - 1] == '/' ? "" : "/");
		if (lstat(path, &st) == 0)
			return known = 1;
		path[n] = '\0';
		if (!(slash = strrchr(path, '/')) || slash == path)
			break;
		*slash = '\0';
	}
	return known = lstat("/.git", &st) == 0;
}

/* The files of a git work tree: tracked, and untracked but not ignored.
 * 1 when the project is one, 0 when not. */
static int
git_files(struct sbx_buf *out)
{
	char *argv[] = {"git", "ls-files", "-coz", "--exclude-standard", NULL};

	return in_git_tree() && run(argv, NULL, 0, out) == 0;
}

/* Drop from m the paths git ignores (in a git work tree; tracked files
 * are never ignored). */
static void
git_unignored(struct sbx_manifest *m, int *flags)
{
	char *argv[] = {"git", "check-ignore", "-z", "--stdin", NULL};
	struct sbx_buf in = SBX_BUF_INIT, out = SBX_BUF_INIT;
	struct sbx_fentry *e;
	size_t i;
	char *p;

	for (i = 0; i < m->n; i++)
		sbx_buf_add(&in, m->e[i].path, strlen(m->e[i].path) + 1);
	if (m->n && in_git_tree() && run(argv, in.data, in.len, &out) == 0) {
		for (p = out.data; p && p < out.data + out.len;
		    p += strlen(p) + 1)
			if ((e = sbx_manifest_find(m, p)))
				flags[e - m->e] = 1;
	}
	sbx_buf_release(&in);
	sbx_buf_release(&out);
}

/* --- the host side ----------------------------------------------------------- */

static void
add_entry(const struct sbx_fentry *e, void *arg)
{
	struct sbx_manifest *m = arg;
	struct sbx_fentry *x = sbx_manifest_add(m, e->path);
	char *p = x->path;

	*x = *e;
	x->path = p;
}

static void
human(uint64_t n, char *buf, size_t len)
{
	if (n < 1024)
		snprintf(buf, len, "%lluB", (unsigned long long)n);
	else if (n < 1024 * 1024)
		snprintf(buf, len, "%.1fKiB", n / 1024.0);
	else if (n < 1024ull * 1024 * 1024)
		snprintf(buf, len, "%.1fMiB", n / 1048576.0);
	else
		snprintf(buf, len, "%.1fGiB", n / 1073741824.0);
}

/* What push sends: git's list or a walk, then the patterns, then the
 * size policy. */
static int
select_files(const struct sbx_sync_opts *o, struct sbx_manifest *sel,
    struct sbx_err *err)
{
	struct sbx_scan_opts so = {.skip = skip1, .arg = (void *)o};
	struct sbx_manifest all = {0};
	struct sbx_buf b = SBX_BUF_INIT;
	struct stat st;
	char *p, h1[32], h2[32];
	size_t i;
	int dfd;

	if (git_files(&b)) {
		for (p = b.data; p && p < b.data + b.len; p += strlen(p) + 1) {
			struct sbx_fentry e = {.path = p};

			if (!skip_path(o, p) && lstat(p, &st) == 0 &&
			    sbx_fentry_stat(&e, &st))
				add_entry(&e, &all);
		}
	} else {
		if ((dfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
			sbx_buf_release(&b);
			return sbx_err_set(err, SBX_EX_FAIL,
			    "cannot read the project:");
		}
		sbx_walk(dfd, &so, 0, 1, add_entry, &all);
	}
	sbx_buf_release(&b);
	for (i = 0; i < all.n; i++) {
		struct sbx_fentry *e = &all.e[i];

		if (o->include && sbx_ignore_count(o->include) &&
		    sbx_ignore_match(o->include, e->path, 0) != 1)
			continue;
		if (o->max_size && e->type == 'f' && e->size > o->max_size) {
			human(e->size, h1, sizeof h1);
			human(o->max_size, h2, sizeof h2);
			sbx_warn("%s large file '%s' (%s > %s)", o->large_skip ?
			    "skipping" : "pushing", e->path, h1, h2);
			if (o->large_skip)
				continue;
		}
		add_entry(e, sel);
	}
	sbx_manifest_release(&all);
	sbx_manifest_sort(sel);
	return 0;
}

static int
host_matches(const struct sbx_fentry *b, const struct stat *st)
{
	struct sbx_fentry h = {0};

	return sbx_fentry_stat(&h, st) && h.type == b->type &&
	    h.size == b->size && h.mode == b->mode &&
	    h.mtime == (b->hmtime ? b->hmtime : b->mtime);
}

/* --- the baseline: the manifest of the last acknowledged sync ------------ */

static char *
baseline_path(const struct sbx_sync_opts *o)
{
	return o->state_path ? sbx_xasprintf("%s.baseline", o->state_path) :
	    NULL;
}

/* The baseline is a text file, as quick to read and write as we can make
 * it (pull reads and writes it whole each time; 10,000 lines of JSON
 * cost more than the rest of a pull):
 *   sbx-baseline 1 TAB sandbox TAB workdir TAB acked_epoch TAB count
 *       [TAB listing_token TAB selection_digest(hex)]
 *   type TAB size TAB mtime_ns TAB mode(octal) TAB host_mtime_ns TAB path
 * with backslash, tab, newline and CR in text written as \\ \t \n \r.
 * The token names the sandbox's listing the files are from, so that the
 * next pull lists only what changed since (sbx_scan_opts.since), if the
 * same files are selected (the digest). */
struct bl_meta {
	char *token;
	uint64_t digest;
};
static void
put_escaped(struct sbx_buf *b, const char *s)
{
	const char *run = s;

	for (; *s; s++)
		if (*s == '\\' || *s == '\t' || *s == '\n' || *s == '\r') {
			sbx_buf_add(b, run, (size_t)(s - run));
			sbx_buf_add(b, *s == '\\' ? "\\\\" : *s == '\t' ? "\\t" :
			    *s == '\n' ? "\\n" : "\\r", 2);
			run = s + 1;
		}
	sbx_buf_add(b, run, (size_t)(s - run));
}

/* Unescape the field at p (up to a tab or the line's end) in place. */
static char *
get_escaped(char **p)
{
	char *in = *p, *out = *p, *start = *p;

	for (; *in && *in != '\t'; in++) {
		if (*in != '\\') {
			*out++ = *in;
			continue;
		}
		in++;
		*out++ = *in == 't' ? '\t' : *in == 'n' ? '\n' : *in == 'r' ?
		    '\r' : *in;
		if (!*in)
			return NULL;
	}
	*p = *in ? in + 1 : in;
	*out = '\0';
	return start;
}

/* A number and a tab at q; snprintf is slow enough to show here. */
static char *
put_num(char *q, long long v, int base)
{
	char tmp[24];
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v :
	    (unsigned long long)v;
	int n = 0;

	do
		tmp[n++] = (char)('0' + u % (unsigned)base);
	while ((u /= (unsigned)base));
	if (v < 0)
		*q++ = '-';
	while (n)
		*q++ = tmp[--n];
	*q++ = '\t';
	return q;
}

/* A number and its tab at *q, as put_num wrote it (strtoll would cost
 * more than all the rest of a line). */
static int
get_num(char **q, int base, long long *v)
{
	char *p = *q;
	int neg = *p == '-';
	unsigned long long u = 0;

	p += neg;
	if (*p < '0' || *p >= '0' + base)
		return -1;
	for (; *p >= '0' && *p < '0' + base; p++) {
		if (u > (ULLONG_MAX >> 4))
			return -1;
		u = u * (unsigned)base + (unsigned)(*p - '0');
	}
	if (*p != '\t' || u > LLONG_MAX)
		return -1;
	*v = neg ? -(long long)u : (long long)u;
	*q = p + 1;
	return 0;
}

/* A baseline of another sandbox, or none at all, is an empty one. */
static int
baseline_load(const struct sbx_sync_opts *o, struct sbx_manifest *m,
    struct bl_meta *meta, struct sbx_err *err)
{
	char *path = baseline_path(o), *text = NULL, *line, *nl, *q, *f;
	const char *id = sbx_json_str(o->ref, "id");
	long long size, mode, mt, ht, epoch;
	unsigned long long count;
	struct sbx_fentry *e;
	struct stat st;
	size_t len = 0;
	ssize_t n;
	int fd, rc = 0, unsorted = 0;

	if (!path || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		free(path);
		return 0;
	}
	/* In one piece: it is read whole and parsed in place. */
	if (fstat(fd, &st) < 0 || st.st_size > (off_t)1 << 32)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':", path);
	else
		text = sbx_xmalloc((size_t)st.st_size + 1);
	while (rc == 0 && (n = read(fd, text + len, (size_t)st.st_size -
	    len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':",
			    path);
		else
			len += (size_t)n;
	}
	close(fd);
	if (text)
		text[len] = '\0';
	line = text;
	if (rc == 0 && line) {
		if ((nl = strchr(line, '\n')))
			*nl++ = '\0';
		q = line;
		if (strncmp(line, "sbx-baseline 1\t", 15) || (q += 15,
		    !(f = get_escaped(&q))) || !id || strcmp(f, id))
			line = NULL; /* another sandbox's, or another format */
		else
			line = nl;
		/* workdir, epoch, count, then maybe the token and digest */
		if (line && get_escaped(&q) && get_num(&q, 10, &epoch) == 0) {
			count = strtoull(q, &q, 10);
			if (count < ((size_t)st.st_size / 12) + 1)
				sbx_manifest_reserve(m, (size_t)count);
			if (*q == '\t' && (q++, f = get_escaped(&q)) && *f &&
			    *q) {
				meta->token = sbx_xstrdup(f);
				meta->digest = strtoull(q, NULL, 16);
			}
		}
	}
	for (; rc == 0 && line && *line; line = nl) {
		if ((nl = strchr(line, '\n')))
			*nl++ = '\0';
		q = line + 2;
		f = NULL;
		if ((line[0] == 'f' || line[0] == 'l') && line[1] == '\t' &&
		    get_num(&q, 10, &size) == 0 && get_num(&q, 10, &mt) == 0 &&
		    get_num(&q, 8, &mode) == 0 && get_num(&q, 10, &ht) == 0)
			f = get_escaped(&q);
		if (!f || !sbx_path_valid(f)) {
			rc = sbx_err_set(err, SBX_EX_DATA, "'%s' is malformed",
			    path);
			break;
		}
		if (m->n && strcmp(m->e[m->n - 1].path, f) >= 0)
			unsorted = 1;
		e = sbx_manifest_add(m, f);
		e->type = line[0];
		e->size = size;
		e->mtime = mt;
		e->hmtime = ht;
		e->mode = (uint32_t)mode & 07777;
	}
	free(text);
	free(path);
	if (rc < 0)
		sbx_manifest_release(m);
	/* We write it sorted; sorting 10,000 names again costs. */
	if (unsorted)
		sbx_manifest_sort(m);
	else
		m->sorted = 1;
	return rc;
}

/* Writing the baseline is the acknowledgement; the state's "sync" object
 * only tells people about it. No fsync: losing an acknowledgement only
 * means delivering again, which is harmless. */
static int
baseline_save(const struct sbx_sync_opts *o, struct sbx_manifest *m,
    const struct bl_meta *meta, struct sbx_err *err)
{
	char *path = baseline_path(o), *s, num[128], ts[32];
	struct sbx_buf b = SBX_BUF_INIT;
	long long now = sbx_now();
	const char *wd = o->remote_dir;
	json_t *sync;
	size_t i;
	int rc;

	if (!path)
		return 0;
	/* Our directory in the project is git's business no more than the
	 * baseline in it: a .gitignore of "*", as sbx-create makes. */
	if (o->statedir && !strcmp(o->statedir, ".sbx") &&
	    access(".sbx/.gitignore", F_OK) < 0 && errno == ENOENT &&
	    sbx_file_write_atomic(".sbx/.gitignore", "*\n", 2, 0644, 0,
	    err) < 0) {
		free(path);
		return -1;
	}
	if (!wd && o->state)
		wd = sbx_json_str(o->state->root, "workdir");
	if (!m->sorted)
		sbx_manifest_sort(m);
	sbx_buf_add(&b, "sbx-baseline 1\t", 15);
	put_escaped(&b, sbx_json_str(o->ref, "id"));
	sbx_buf_add(&b, "\t", 1);
	put_escaped(&b, wd ? wd : "");
	snprintf(num, sizeof num, "\t%lld\t%zu", now, m->n);
	sbx_buf_add(&b, num, strlen(num));
	if (meta->token) {
		sbx_buf_add(&b, "\t", 1);
		put_escaped(&b, meta->token);
		snprintf(num, sizeof num, "\t%016llx",
		    (unsigned long long)meta->digest);
		sbx_buf_add(&b, num, strlen(num));
	}
	sbx_buf_add(&b, "\n", 1);
	for (i = 0; i < m->n; i++) {
		const struct sbx_fentry *e = &m->e[i];

		char *q = num;

		*q++ = e->type;
		*q++ = '\t';
		q = put_num(q, (long long)e->size, 10);
		q = put_num(q, (long long)e->mtime, 10);
		q = put_num(q, (long long)e->mode, 8);
		q = put_num(q, e->hmtime && e->hmtime != e->mtime ?
		    (long long)e->hmtime : 0LL, 10);
		sbx_buf_add(&b, num, (size_t)(q - num));
		put_escaped(&b, e->path);
		sbx_buf_add(&b, "\n", 1);
	}
	rc = o->state && o->state->lockfd >= 0 ? sbx_state_write(o->state,
	    path, b.data, b.len, 0, err) : sbx_file_write_atomic(path, b.data,
	    b.len, 0600, 0, err);
	sbx_buf_release(&b);
	if (rc == 0 && o->state) {
		s = strrchr(path, '/');
		sbx_time_fmt(now, ts, sizeof ts);
		sync = json_pack("{sssssssIsssI}", "baseline", s ? s + 1 : path,
		    "sandbox", sbx_json_str(o->ref, "id"), "workdir", wd ? wd :
		    "", "files", (json_int_t)m->n, "acked_at", ts,
		    "acked_at_epoch", (json_int_t)now);
		json_object_set_new(o->state->root, "sync", sync);
		/* It only reports the baseline, which is not flushed either. */
		o->state->lazy = 1;
		rc = sbx_state_save(o->state, err);
		o->state->lazy = 0;
	}
	free(path);
	return rc;
}

/* --- push -------------------------------------------------------------------- */

/* The staging directories of pulls that were killed: whichever sync runs
 * next in the project takes them, whether or not it fetches anything. */
static void
stale_stages(void)
{
	DIR *d = opendir(".sbx");
	struct dirent *de;
	char *path;
	long pid;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (sscanf(de->d_name, "pull-%ld-", &pid) == 1 && pid > 0 &&
		    kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
			path = sbx_xasprintf(".sbx/%s", de->d_name);
			sbx_rmtree(path);
			free(path);
		}
	closedir(d);
}

/* Replace path's entry, or add it to adds (sorted in once, at the end:
 * adding one by one to a sorted list would sort it each time). */
static void
set_entry(struct sbx_manifest *m, struct sbx_manifest *adds,
    const struct sbx_fentry *e)
{
	struct sbx_fentry *x = sbx_manifest_find(m, e->path);
	char *p;

	if (!x) {
		add_entry(e, adds);
		return;
	}
	p = x->path;
	*x = *e;
	x->path = p;
}

static void
drop_entry(struct sbx_manifest *m, const char *path)
{
	struct sbx_fentry *x = sbx_manifest_find(m, path);

	if (x)
		x->type = 0; /* left out when saved */
}

/* Drop the dropped entries, take in the added ones. */
static void
compact(struct sbx_manifest *m, struct sbx_manifest *adds)
{
	size_t i, j;

	for (i = j = 0; i < m->n; i++) {
		if (!m->e[i].type) {
			free(m->e[i].path);
			continue;
		}
		if (j != i)
			m->e[j] = m->e[i];
		j++;
	}
	m->n = j;
	for (i = 0; i < adds->n; i++)
		add_entry(&adds->e[i], m);
	if (adds->n)
		sbx_manifest_sort(m);
	else
		m->sorted = 1;
}

/* What a transfer of m will be, for the progress line. */
static void
progress_total(const struct sbx_manifest *m)
{
	uint64_t bytes = 0;
	size_t i;

	for (i = 0; i < m->n; i++)
		if (m->e[i].type == 'f')
			bytes += m->e[i].size;
	sbx_progress_total(m->n, bytes);
}

int
sbx_sync_push(const struct sbx_sync_opts *o, struct sbx_sync_result *r,
    struct sbx_err *err)
{
	const struct sbx_files *f = sbx_files_of(o->ref, err);
	struct sbx_manifest sel = {0}, base = {0}, send = {0}, dels = {0};
	struct sbx_manifest adds = {0};
	struct sbx_job job = {.pid = -1, .errfd = -1};
	struct sbx_fentry *b;
	struct sbx_err werr = {0};
	struct bl_meta meta = {0};
	size_t i;
	int fd = -1, rc = -1, wrc;

	memset(r, 0, sizeof *r);
	if (!f || select_files(o, &sel, err) < 0 ||
	    baseline_load(o, &base, &meta, err) < 0)
		goto out;
	for (i = 0; i < sel.n; i++) {
		b = sbx_manifest_find(&base, sel.e[i].path);
		if (b && b->type == sel.e[i].type && b->size == sel.e[i].size &&
		    b->mode == sel.e[i].mode && (b->hmtime ? b->hmtime :
		    b->mtime) == sel.e[i].mtime)
			continue;
		add_entry(&sel.e[i], &send);
		if (!o->dry_run)
			sbx_note("%s '%s'", b ? "update" : "add", sel.e[i].path);
		r->files++;
		r->bytes += sel.e[i].size;
		if (o->plan)
			o->plan(sel.e[i].path, b ? "update" : "add", NULL,
			    sel.e[i].size, o->arg);
	}
	if (o->delete)
		for (i = 0; i < base.n; i++)
			if (!sbx_manifest_find(&sel, base.e[i].path)) {
				add_entry(&base.e[i], &dels);
				if (!o->dry_run)
					sbx_note("delete '%s'", base.e[i].path);
				r->deleted++;
				if (o->plan)
					o->plan(base.e[i].path, "delete", NULL,
					    base.e[i].size, o->arg);
			}
	if (o->dry_run) {
		rc = 0;
		goto out;
	}
	stale_stages();
	/* Sent when empty too: a push reaches the sandbox whether or not
	 * anything changed, so one that is gone fails it (exit 3) either
	 * way, and a loop's `push || exit` notices. */
	if (f->put_archive(o->ref, o->remote_dir, &fd, &job, err) < 0)
		goto out;
	if (send.n)
		progress_total(&send);
	/* A compression asked of a put that takes a plain tar alone (one
	 * that never leaves this machine): none. */
	wrc = sbx_tar_write(fd, &send, f->plain ? SBX_COMPRESS_NONE : o->z,
	    &werr);
	close(fd);
	/* The receiver's error explains a broken pipe better. */
	if (sbx_job_wait(&job, err) < 0)
		goto out;
	if (wrc < 0) {
		*err = werr;
		goto out;
	}
	/* Where the sandbox's tar keeps whole seconds: the next status
	 * compares its mtimes with the host's. */
	if (f->set_times && send.n && f->set_times(o->ref, o->remote_dir,
	    &send, err) < 0)
		goto out;
	if (dels.n && f->remove(o->ref, o->remote_dir, &dels, err) < 0)
		goto out;
	for (i = 0; i < send.n; i++)
		set_entry(&base, &adds, &send.e[i]);
	for (i = 0; i < dels.n; i++)
		drop_entry(&base, dels.e[i].path);
	compact(&base, &adds);
	/* What the push wrote changed directories in the sandbox: the next
	 * pull lists them again, against this baseline. */
	rc = baseline_save(o, &base, &meta, err);
out:
	free(meta.token);
	sbx_manifest_release(&sel);
	sbx_manifest_release(&base);
	sbx_manifest_release(&send);
	sbx_manifest_release(&dels);
	sbx_manifest_release(&adds);
	return rc;
}

/* --- pull -------------------------------------------------------------------- */

/* A_CONFIG: host-executed configuration the sandbox changed, a conflict
 * until trusted; A_HELD: a link that leads out of the project. Neither
 * writes anything, nor enters the baseline. */
enum act { A_NONE, A_ADD, A_UPDATE, A_DELETE, A_CONFLICT, A_MAYBE, A_CONFIG,
	A_HELD };

struct item {
	char *path;
	enum act act;
	struct sbx_fentry s;  /* the sandbox's (scan, then archive) */
	int staged;           /* its content is in the stage, as name i */
	char *target;         /* A_HELD: the link's target */
	int have_host;
	struct stat host;
};

struct pull {
	const struct sbx_sync_opts *o;
	struct sbx_manifest base, scan, fetch, adds;
	struct bl_meta meta;
	struct sbx_scan_delta delta;
	struct item *it;
	size_t n, cap;
	char *stage;          /* the staging directory */
	int stage_fd;
};

/* What decides which files a pull looks at: when it differs from the
 * baseline's, the sandbox lists everything again. Nested .gitignore
 * files count by their size and mtime. */
static uint64_t
selection_digest(const struct sbx_sync_opts *o, const struct sbx_manifest *base)
{
	static const char *const files[] = {".gitignore", ".git/info/exclude"};
	const char *strs[] = {o->statedir, o->statefile, o->remote_dir};
	uint64_t h = sbx_fnv1a(0, NULL, 0), v[3];
	char buf[65536];
	struct stat st;
	const char *b;
	ssize_t got;
	size_t i, n;
	int fd;

	v[0] = sbx_ignore_digest(o->exclude);
	v[1] = sbx_ignore_digest(o->sbxignore);
	h = sbx_fnv1a(h, v, 2 * sizeof v[0]);
	for (i = 0; i < sizeof strs / sizeof strs[0]; i++)
		h = sbx_fnv1a(h, strs[i] ? strs[i] : "", strs[i] ?
		    strlen(strs[i]) + 1 : 0);
	for (i = 0; i < sizeof files / sizeof files[0]; i++) {
		if ((fd = open(files[i], O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		while ((got = read(fd, buf, sizeof buf)) > 0)
			h = sbx_fnv1a(h, buf, (size_t)got);
		close(fd);
	}
	for (i = 0; i < base->n; i++) {
		b = base->e[i].path;
		n = strlen(b);
		if (n < 10 || memcmp(b + n - 10, ".gitignore", 10) ||
		    (n > 10 && b[n - 11] != '/') || lstat(b, &st) < 0)
			continue;
		v[0] = (uint64_t)st.st_size;
		v[1] = (uint64_t)sbx_ns(st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
		v[2] = (uint64_t)st.st_ino;
		h = sbx_fnv1a(sbx_fnv1a(h, base->e[i].path,
		    strlen(base->e[i].path)), v, sizeof v);
	}
	return h;
}

/* Whether the sandbox listed where path lies. A partial listing leaves
 * out directories in which nothing changed since the listing the
 * baseline is from: a file there is as the baseline says. */
static int
listed(const struct pull *p, char *path)
{
	const struct sbx_manifest *dirs = &p->delta.dirs;
	const struct sbx_fentry *x;
	char *slash = strrchr(path, '/');
	const char *dir = slash ? path : "";
	int r;

	if (!p->delta.partial)
		return 1;
	if (slash)
		*slash = '\0';
	r = ((x = sbx_manifest_find(dirs, dir)) && x->mode & (SBX_SCAN_FLAT |
	    SBX_SCAN_TREE)) || sbx_dirs_cover(dirs, dir, SBX_SCAN_TREE |
	    SBX_SCAN_GONE, 1);
	if (slash)
		*slash = '/';
	return r;
}

/* Same size, other mtime: only the content can tell, and the sandbox
 * hashes it where it is. */
static int
hash_touched(struct pull *p, const struct sbx_files *f, struct sbx_err *err)
{
	struct sbx_manifest h = {0};
	struct sbx_fentry *b, *s;
	size_t i, j;
	int rc;

	/* One walk down both sorted lists. */
	for (i = j = 0; i < p->scan.n && j < p->base.n;) {
		int c = strcmp(p->scan.e[i].path, p->base.e[j].path);

		if (c) {
			c < 0 ? i++ : j++;
			continue;
		}
		s = &p->scan.e[i++];
		b = &p->base.e[j++];
		if (s->type == 'f' && b->type == 'f' && b->size == s->size &&
		    b->mtime != s->mtime)
			add_entry(s, &h);
	}
	rc = f->hash(p->o->ref, p->o->remote_dir, &h, err);
	for (i = 0; rc == 0 && i < h.n; i++)
		if (h.e[i].has_hash &&
		    (s = sbx_manifest_find(&p->scan, h.e[i].path))) {
			memcpy(s->hash, h.e[i].hash, sizeof s->hash);
			s->has_hash = 1;
		}
	sbx_manifest_release(&h);
	return rc;
}

static int
scan_skip(const char *path, int is_dir, void *arg)
{
	return skip1(path, is_dir, (void *)((struct pull *)arg)->o);
}

static struct item *
add_item(struct pull *p, const char *path, enum act a)
{
	struct item *it;

	/* Doubling: one realloc per item copied the whole array each time
	 * under ASan (20,000 items took minutes). */
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 64;
		p->it = sbx_xrealloc(p->it, p->cap * sizeof *p->it);
	}
	it = &p->it[p->n++];
	memset(it, 0, sizeof *it);
	it->path = sbx_xstrdup(path);
	it->act = a;
	it->have_host = lstat(path, &it->host) == 0;
	return it;
}

static int
same_host_hash(const char *path, const unsigned char hash[32])
{
	unsigned char h[32];
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY), rc;

	if (fd < 0)
		return 0;
	rc = sbx_sha256_fd(fd, h) == 0 && !memcmp(h, hash, 32);
	close(fd);
	return rc;
}

/* Decide, path by path, from the scan and the baseline. */
static void
plan_pull(struct pull *p, struct sbx_manifest *refresh)
{
	struct sbx_manifest cand = {0};
	struct sbx_fentry *b, *s;
	struct stat st;
	int *ign;
	size_t i, j;

	/* The candidates first, so that git is asked about them once: one
	 * walk down both sorted lists. */
	for (i = j = 0; i < p->scan.n || j < p->base.n;) {
		int c = i == p->scan.n ? 1 : j == p->base.n ? -1 :
		    strcmp(p->scan.e[i].path, p->base.e[j].path);

		s = c <= 0 ? &p->scan.e[i++] : NULL;
		b = c >= 0 ? &p->base.e[j++] : NULL;
		if (s && b && b->type == s->type && b->size == s->size &&
		    b->mtime == s->mtime && b->mode == s->mode)
			continue;
		if (!s && !listed(p, b->path))
			continue; /* unchanged since the last listing */
		add_entry(s ? s : b, &cand);
	}
	cand.sorted = 1;
	ign = sbx_xcalloc(cand.n + 1, sizeof *ign);
	git_unignored(&cand, ign);
	for (i = 0; i < cand.n; i++) {
		const char *path = cand.e[i].path;
		int have;

		if (ign[i] || skip_path(p->o, path))
			continue;
		b = sbx_manifest_find(&p->base, path);
		s = sbx_manifest_find(&p->scan, path);
		have = lstat(path, &st) == 0;
		if (!s) { /* deleted in the sandbox */
			if (!have || !S_ISREG(st.st_mode) || b->type != 'f') {
				drop_entry(refresh, path);
				continue;
			}
			add_item(p, path, host_matches(b, &st) ? A_DELETE :
			    A_CONFLICT)->s = *b;
			continue;
		}
		if (b && s->has_hash && b->type == s->type &&
		    b->size == s->size && b->mode == s->mode && have &&
		    host_matches(b, &st) && same_host_hash(path, s->hash)) {
			/* Touched, not changed: remember the new mtime. */
			struct sbx_fentry e = *s;

			e.hmtime = b->hmtime ? b->hmtime : b->mtime;
			set_entry(refresh, &p->adds, &e);
			continue;
		}
		if (b ? (have && host_matches(b, &st)) : !have)
			add_item(p, path, have ? A_UPDATE : A_ADD)->s = *s;
		else
			add_item(p, path, have ? A_MAYBE : A_CONFLICT)->s = *s;
	}
	free(ign);
	for (i = 0; i < p->n; i++) {
		/* The sandbox's entries outlive cand. */
		p->it[i].s.path = p->it[i].path;
		if (p->it[i].act != A_DELETE && p->it[i].s.type &&
		    sbx_manifest_find(&p->scan, p->it[i].path))
			add_entry(&p->it[i].s, &p->fetch);
	}
	sbx_manifest_release(&cand);
	sbx_manifest_sort(&p->fetch);
}

static struct item *
find_item(struct pull *p, const char *path)
{
	size_t i;

	/* Items are made in path order. */
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		i = (lo + hi) / 2;
		int c = strcmp(p->it[i].path, path);

		if (!c)
			return &p->it[i];
		if (c < 0)
			lo = i + 1;
		else
			hi = i;
	}
	return NULL;
}

static long
want_member(const char *name, void *arg)
{
	struct pull *p = arg;
	struct item *it = find_item(p, name);

	if (!it || it->staged || !sbx_manifest_find(&p->fetch, name))
		return -1;
	return (long)(it - p->it);
}

static void
got_member(long slot, const struct sbx_fentry *e, void *arg)
{
	struct pull *p = arg;
	struct item *it = &p->it[slot];
	struct timespec times[2] = {{0, UTIME_OMIT}, {0, 0}};
	char name[32];

	/* A tar of whole seconds (busybox's): the listing's mtime, of that
	 * second, is the exact one, or the next pull would fetch it again. */
	if (e->type == it->s.type && e->mtime % 1000000000 == 0 &&
	    it->s.mtime - e->mtime > 0 && it->s.mtime - e->mtime < 1000000000) {
		snprintf(name, sizeof name, "%ld", slot);
		times[1] = sbx_ts(it->s.mtime);
		if (utimensat(p->stage_fd, name, times,
		    AT_SYMLINK_NOFOLLOW) < 0)
			it->s.mtime = e->mtime;
	} else
		it->s.mtime = e->mtime;
	it->s.type = e->type;
	it->s.mode = e->mode;
	it->s.size = e->size;
	it->s.has_hash = 0;
	it->staged = 1;
}

/* Open the directory that holds path, never through a symlink; create
 * the missing ones when asked. The fd, or -1 (err says why). */
static int
open_parent(const char *path, int create, const char **base,
    struct sbx_err *err)
{
	char buf[4096], *s, *slash;
	int dfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC), sub;

	snprintf(buf, sizeof buf, "%s", path);
	for (s = buf; (slash = strchr(s, '/')); s = slash + 1) {
		*slash = '\0';
		sub = openat(dfd, s, O_PATH | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (sub < 0 && errno == ENOENT && create &&
		    mkdirat(dfd, s, 0755) == 0)
			sub = openat(dfd, s, O_PATH | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
		if (sub < 0) {
			int e = errno;
			struct stat st;

			*slash = '\0';
			if (fstatat(dfd, s, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(st.st_mode))
				sbx_err_set(err, SBX_EX_DATA, "refused archive "
				    "member '%s': path through a symlink",
				    path);
			else if (e == ENOENT && !create)
				sbx_err_set(err, 0, "absent");
			else {
				errno = e;
				sbx_err_set(err, SBX_EX_FAIL, "cannot write "
				    "'%s': '%s':", path, buf);
			}
			close(dfd);
			return -1;
		}
		close(dfd);
		dfd = sub;
	}
	*base = path + (s - buf);
	return dfd;
}

/* Before anything moves: every path must be writable as a plain path. */
static int
check_target(const char *path, struct sbx_err *err)
{
	const char *base;
	struct stat st;
	int dfd = open_parent(path, 0, &base, err);

	if (dfd < 0)
		return err->code == 0 ? 0 : -1; /* parents to be made */
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISDIR(st.st_mode)) {
		close(dfd);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot write '%s': a "
		    "directory is in the way", path);
	}
	close(dfd);
	return 0;
}

static int
commit_one(struct pull *p, struct item *it, const char *dest,
    struct sbx_err *err)
{
	char tmp[32];
	const char *base;
	int dfd = open_parent(dest, 1, &base, err);

	if (dfd < 0)
		return -1;
	snprintf(tmp, sizeof tmp, "%zu", (size_t)(it - p->it));
	if (renameat(p->stage_fd, tmp, dfd, base) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot write '%s':", dest);
		close(dfd);
		return -1;
	}
	close(dfd);
	return 0;
}

static int
delete_one(const char *path, struct sbx_err *err)
{
	const char *base;
	struct stat st;
	int dfd = open_parent(path, 0, &base, err), rc = 0;

	if (dfd < 0)
		return err->code == 0 ? 0 : -1;
	/* Only a regular file is ever deleted. */
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode) && unlinkat(dfd, base, 0) < 0 &&
	    errno != ENOENT)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot delete '%s':", path);
	close(dfd);
	return rc;
}

/* Same content: the staged copy of it against the host's file. */
static int
same_as_host(struct pull *p, struct item *it)
{
	char tmp[32], a[PATH_MAX], b[PATH_MAX];
	unsigned char h1[32];
	ssize_t n1, n2;
	int fd;

	snprintf(tmp, sizeof tmp, "%zu", (size_t)(it - p->it));
	if (it->s.type == 'l') {
		if (!S_ISLNK(it->host.st_mode))
			return 0;
		n1 = readlinkat(p->stage_fd, tmp, a, sizeof a);
		n2 = readlink(it->path, b, sizeof b);
		return n1 >= 0 && n1 == n2 && !memcmp(a, b, (size_t)n1);
	}
	if (!S_ISREG(it->host.st_mode) ||
	    (uint64_t)it->host.st_size != it->s.size)
		return 0;
	if ((fd = openat(p->stage_fd, tmp, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n1 = sbx_sha256_fd(fd, h1);
	close(fd);
	return n1 == 0 && same_host_hash(it->path, h1);
}

/* --- what a pull holds back: the host runs it, or it leads out ---------- */

/* Configuration that tools on the host act on without being asked to run
 * anything of the project's: entering the directory (direnv), opening it
 * in an editor, git's own commands, package managers' settings, and our
 * own ignore file. At any depth, since a subdirectory can be entered or
 * opened on its own; a directory's name counts for what is below it and
 * for a link or file in its place (a link .vscode -> cfg would make
 * cfg's plain files the editor's). The man page's list is this one. */
static const char *const config_dirs[] = {
	".devcontainer", ".idea", ".vscode",
};
static const char *const config_files[] = {
	".dir-locals.el", ".envrc", ".exrc", ".gitattributes", ".gitmodules",
	".lfsconfig", ".npmrc", ".nvim.lua", ".nvimrc",
	".pre-commit-config.yaml", ".sbxignore", ".yarnrc", ".yarnrc.yml",
};

static int
is_config(const char *path)
{
	const char *s = path, *slash;
	size_t i, n;

	for (;; s = slash + 1) {
		slash = strchr(s, '/');
		n = slash ? (size_t)(slash - s) : strlen(s);
		for (i = 0; i < sizeof config_dirs / sizeof config_dirs[0];
		    i++)
			if (strlen(config_dirs[i]) == n &&
			    !memcmp(config_dirs[i], s, n))
				return 1;
		if (!slash)
			break;
	}
	for (i = 0; i < sizeof config_files / sizeof config_files[0]; i++)
		if (!strcmp(config_files[i], s))
			return 1;
	return 0;
}

/* The target of the link at path once the pull is done: the staged one
 * where the pull writes that path (or would, but holds it back), else
 * the host's. -1: not a link. */
static ssize_t
final_link(struct pull *p, const char *path, char *buf, size_t len)
{
	struct item *it = find_item(p, path);
	char slot[32];
	ssize_t n;

	if (it && it->staged && (it->act == A_ADD || it->act == A_UPDATE ||
	    it->act == A_HELD)) {
		if (it->s.type != 'l')
			return -1;
		snprintf(slot, sizeof slot, "%zu", (size_t)(it - p->it));
		n = readlinkat(p->stage_fd, slot, buf, len);
	} else
		n = readlink(path, buf, len);
	return n >= 0 && (size_t)n < len ? n : -1;
}

/* Whether a link at path to target leads out of the project: absolute,
 * or resolved from the link's directory one name at a time, with ".."
 * going above the top, or through a link (of the pull or the host's)
 * that does. Too many links on the way count as leaving. */
static int
link_leaves(struct pull *p, const char *path, const char *target)
{
	char cur[PATH_MAX], rest[2 * PATH_MAX], t[PATH_MAX], *r, *slash;
	size_t n, k;
	ssize_t tl;
	int hops = 0;

	n = (slash = strrchr(path, '/')) ? (size_t)(slash - path) : 0;
	if (*target == '/' || n >= sizeof cur || strlen(target) >= sizeof rest)
		return 1;
	memcpy(cur, path, n);
	cur[n] = '\0';
	snprintf(rest, sizeof rest, "%s", target);
	for (r = rest; *r;) {
		if (*r == '/') {
			r++;
			continue;
		}
		k = (slash = strchr(r, '/')) ? (size_t)(slash - r) : strlen(r);
		if (k == 1 && r[0] == '.') {
			r += k + !!slash;
			continue;
		}
		if (k == 2 && r[0] == '.' && r[1] == '.') {
			if (!n)
				return 1;
			while (n && cur[n - 1] != '/')
				n--;
			n -= !!n;
			cur[n] = '\0';
			r += k + !!slash;
			continue;
		}
		if (n + 1 + k >= sizeof cur)
			return 1;
		if (n)
			cur[n++] = '/';
		memcpy(cur + n, r, k);
		cur[n + k] = '\0';
		r += k + !!slash;
		if ((tl = final_link(p, cur, t, sizeof t)) < 0) {
			n += k;
			continue;
		}
		/* A link: its target, then what was left of ours. */
		if (++hops > 40 || !tl || *t == '/' ||
		    (size_t)tl + 1 + strlen(r) >= sizeof rest)
			return 1;
		cur[n -= !!n] = '\0';
		memmove(rest + tl + 1, r, strlen(r) + 1);
		memcpy(rest, t, (size_t)tl);
		rest[tl] = '/';
		r = rest;
	}
	return 0;
}

static const char *const act_name[] = {
	[A_ADD] = "add", [A_UPDATE] = "update", [A_DELETE] = "delete",
	[A_CONFLICT] = "conflict", [A_MAYBE] = "conflict",
	[A_CONFIG] = "conflict", [A_HELD] = "held",
};

/* Why the pull exits 1 after doing the rest: what it left, and how to
 * take it. */
static int
held_message(const struct pull *p, int conflicts, uint64_t held,
    struct sbx_err *err)
{
	char msg[512] = "";
	size_t i, len;
	int config = 0;

	for (i = 0; i < p->n; i++)
		config += p->it[i].act == A_CONFIG;
	conflicts -= config;
	if (conflicts)
		snprintf(msg, sizeof msg, "%d conflict%s: keep yours with "
		    "--ours or take the sandbox's with --theirs", conflicts,
		    conflicts == 1 ? "" : "s");
	if (config) {
		len = strlen(msg);
		snprintf(msg + len, sizeof msg - len, "%s%d configuration "
		    "file%s not pulled: take %s with --trust-config",
		    len ? "; " : "", config, config == 1 ? "" : "s",
		    config == 1 ? "it" : "them");
	}
	if (held) {
		len = strlen(msg);
		snprintf(msg + len, sizeof msg - len, "%s%llu link%s held "
		    "back: take %s with --links keep", len ? "; " : "",
		    (unsigned long long)held, held == 1 ? "" : "s",
		    held == 1 ? "it" : "them");
	}
	return sbx_err_set(err, SBX_EX_FAIL, "%s", msg);
}

int
sbx_sync_pull(const struct sbx_sync_opts *o, int status_only,
    struct sbx_sync_result *r, struct sbx_err *err)
{
	const struct sbx_files *f = sbx_files_of(o->ref, err);
	struct pull p = {.o = o, .stage_fd = -1};
	struct sbx_scan_opts so = {.dir = o->remote_dir, .skip = scan_skip,
	    .arg = &p, .delta = &p.delta};
	uint64_t digest = 0;
	struct sbx_job job = {.pid = -1, .errfd = -1};
	struct sbx_err jerr = {0};
	size_t i;
	int fd, rc = -1, src, conflicts = 0, made_sbx = 0;
	char *dest;

	memset(r, 0, sizeof *r);
	if (!f || baseline_load(o, &p.base, &p.meta, err) < 0)
		goto out;
	digest = selection_digest(o, &p.base);
	if (!o->full && p.meta.token && p.meta.digest == digest)
		so.since = p.meta.token;
	if (f->scan(o->ref, &so, &p.scan, err) < 0)
		goto out;
	r->partial = p.delta.partial;
	if (p.delta.partial)
		sbx_note("the sandbox listed %zu changed director%s",
		    p.delta.dirs.n, p.delta.dirs.n == 1 ? "y" : "ies");
	if (hash_touched(&p, f, err) < 0)
		goto out;
	/* The next baseline is this one, changed in place: each path is
	 * looked at once, before it is changed. */
	plan_pull(&p, &p.base);
	if (!status_only && !o->dry_run)
		stale_stages();
	if (p.fetch.n) {
		int tmp = status_only || o->dry_run;

		if (tmp) {
			p.stage = sbx_xasprintf("%s/sbx-sync.XXXXXX",
			    getenv("TMPDIR") && *getenv("TMPDIR") ?
			    getenv("TMPDIR") : "/tmp");
		} else {
			if (mkdir(".sbx", 0700) == 0)
				made_sbx = 1;
			else if (errno != EEXIST) {
				sbx_err_set(err, SBX_EX_FAIL, "cannot make "
				    "'.sbx':");
				goto out;
			}
			p.stage = sbx_xasprintf(".sbx/pull-%ld-XXXXXX",
			    (long)getpid());
		}
		if (!mkdtemp(p.stage)) {
			sbx_err_set(err, SBX_EX_FAIL, tmp ? "cannot make a "
			    "directory in '%s':" : "cannot make '%s':",
			    p.stage);
			free(p.stage);
			p.stage = NULL;
			goto out;
		}
		p.stage_fd = open(p.stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (p.stage_fd < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':",
			    p.stage);
			goto out;
		}
		if (!tmp)
			progress_total(&p.fetch);
		if (f->get_archive(o->ref, o->remote_dir, &p.fetch, &fd, &job,
		    err) < 0)
			goto out;
		src = sbx_tar_stage(fd, p.stage_fd, want_member, got_member,
		    &p, err);
		close(fd);
		if (sbx_job_wait(&job, &jerr) < 0 && src == 0) {
			*err = jerr;
			goto out;
		}
		if (src < 0)
			goto out;
	}
	/* Conflicts on paper may be equal files; vanished ones wait. */
	for (i = 0; i < p.n; i++) {
		struct item *it = &p.it[i];

		if (it->act != A_DELETE && sbx_manifest_find(&p.fetch,
		    it->path) && !it->staged) {
			it->act = A_NONE;
			continue;
		}
		if (it->act == A_MAYBE) {
			if (same_as_host(&p, it)) {
				struct sbx_fentry e = it->s;

				e.hmtime = (int64_t)it->host.st_mtim.tv_sec *
				    1000000000 + it->host.st_mtim.tv_nsec;
				set_entry(&p.base, &p.adds, &e);
				it->act = A_NONE;
			} else
				it->act = A_CONFLICT;
		}
		if (it->act == A_CONFLICT && o->theirs)
			it->act = it->staged ? A_UPDATE : A_DELETE;
		else if (it->act == A_CONFLICT && o->ours) {
			if (it->staged)
				set_entry(&p.base, &p.adds, &it->s);
			else
				drop_entry(&p.base, it->path);
			it->act = A_NONE;
		}
		if (it->act != A_NONE && !o->trust_config && is_config(it->path))
			it->act = A_CONFIG;
	}
	/* Links once every other path's fate is known: a link is judged by
	 * the links it goes through as they will be. */
	for (i = 0; !o->links_keep && i < p.n; i++) {
		struct item *it = &p.it[i];
		char slot[32], target[PATH_MAX];
		ssize_t n;

		if ((it->act != A_ADD && it->act != A_UPDATE &&
		    it->act != A_CONFLICT) || !it->staged || it->s.type != 'l')
			continue;
		snprintf(slot, sizeof slot, "%zu", i);
		n = readlinkat(p.stage_fd, slot, target, sizeof target - 1);
		target[n < 0 ? 0 : n] = '\0';
		if (n <= 0 || link_leaves(&p, it->path, target)) {
			it->act = A_HELD;
			it->target = sbx_xstrdup(target);
		}
	}
	for (i = 0; i < p.n; i++) {
		struct item *it = &p.it[i];

		if (it->act == A_NONE)
			continue;
		if (o->plan)
			o->plan(it->path, act_name[it->act], it->act ==
			    A_CONFIG ? "config" : it->act == A_HELD ? "link" :
			    NULL, it->s.size, o->arg);
		if (it->act == A_CONFLICT || it->act == A_CONFIG)
			conflicts++;
		else if (it->act == A_HELD)
			r->held++;
	}
	r->conflicts = (uint64_t)conflicts;
	if (status_only || o->dry_run) {
		rc = 0;
		goto out;
	}
	/* Check every target, then move: a refusal writes nothing. */
	for (i = 0; i < p.n; i++) {
		struct item *it = &p.it[i];

		if (it->act != A_ADD && it->act != A_UPDATE &&
		    it->act != A_CONFLICT)
			continue;
		dest = it->act == A_CONFLICT ? sbx_xasprintf("%s.sbx-conflict",
		    it->path) : sbx_xstrdup(it->path);
		rc = it->staged ? check_target(dest, err) : 0;
		free(dest);
		if (rc < 0)
			goto out;
	}
	rc = -1;
	for (i = 0; i < p.n; i++)
		if (p.it[i].act == A_DELETE) {
			if (delete_one(p.it[i].path, err) < 0)
				goto out;
			sbx_note("delete '%s'", p.it[i].path);
			drop_entry(&p.base, p.it[i].path);
			r->deleted++;
		}
	for (i = 0; i < p.n; i++) {
		struct item *it = &p.it[i];

		if ((it->act != A_ADD && it->act != A_UPDATE &&
		    it->act != A_CONFLICT) || !it->staged)
			continue;
		dest = it->act == A_CONFLICT ? sbx_xasprintf("%s.sbx-conflict",
		    it->path) : sbx_xstrdup(it->path);
		src = commit_one(&p, it, dest, err);
		free(dest);
		if (src < 0)
			goto out;
		if (it->act == A_CONFLICT) {
			sbx_warn("conflict: '%s' changed on both sides; the "
			    "sandbox's version is in '%s.sbx-conflict'",
			    it->path, it->path);
			continue;
		}
		sbx_note("%s '%s'", act_name[it->act], it->path);
		it->s.hmtime = 0;
		set_entry(&p.base, &p.adds, &it->s);
		r->files++;
		r->bytes += it->s.size;
	}
	for (i = 0; i < p.n; i++) {
		struct item *it = &p.it[i];

		if (it->act == A_CONFLICT && !it->staged)
			sbx_warn("conflict: '%s' was deleted in the sandbox and "
			    "changed here; kept", it->path);
		else if (it->act == A_CONFIG)
			sbx_warn("conflict: '%s' is configuration the host "
			    "runs, %s in the sandbox; kept as it is here (take "
			    "it with --trust-config)", it->path, !it->staged ?
			    "deleted" : it->have_host ? "changed" : "made");
		else if (it->act == A_HELD)
			sbx_warn("held back: link '%s' -> '%s' leads out of "
			    "the project (take it with --links keep)",
			    it->path, it->target);
	}
	compact(&p.base, &p.adds);
	/* Where a conflict stays or a link waits, the sandbox's side is not
	 * in the baseline: the next pull lists everything again. */
	free(p.meta.token);
	p.meta.token = NULL;
	if (!conflicts && !r->held) {
		p.meta.token = p.delta.token;
		p.delta.token = NULL;
	}
	p.meta.digest = digest;
	if (baseline_save(o, &p.base, &p.meta, err) < 0)
		goto out;
	rc = 0;
	if (conflicts || r->held)
		rc = held_message(&p, conflicts, r->held, err);
out:
	if (job.pid > 0)
		sbx_job_wait(&job, &jerr);
	if (p.stage_fd >= 0)
		close(p.stage_fd);
	if (p.stage) {
		sbx_rmtree(p.stage);
		free(p.stage);
	}
	if (made_sbx)
		rmdir(".sbx"); /* only if nothing else went there */
	for (i = 0; i < p.n; i++) {
		free(p.it[i].path);
		free(p.it[i].target);
	}
	free(p.it);
	sbx_manifest_release(&p.base);
	sbx_manifest_release(&p.scan);
	sbx_manifest_release(&p.fetch);
	sbx_manifest_release(&p.adds);
	sbx_manifest_release(&p.delta.dirs);
	free(p.delta.token);
	free(p.meta.token);
	return rc;
}
