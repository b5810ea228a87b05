/* snapdiff.c - sbx-snapshot export of a snapshot whose backend cannot
 * say which files it changed of the image it came from (e2b: a template;
 * qemu: a disk's blocks). Two sandboxes are made through the backend's
 * operations, one of the snapshot and one of its base image (the
 * caller's record says which), every file of each listed by one script
 * (GNU find), the lists compared, and what differs fetched from the
 * first with get_archive (sbx-cp's transfer) into the export
 * lib/local/snapport.c writes. Both sandboxes are killed whatever
 * happens; SIGINT, SIGTERM and SIGHUP wait for it. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "internal.h"

/* Each entry: "TYPE MODE UID GID SIZE MTIME CTIME PATH\0TARGET\0"; the
 * root's own (an empty path) first, then "sbx-end\0": a list cut short
 * is no list. What local's export skips, and what the sandbox's runtime
 * makes, is left out. GNU find by its path, the first on PATH that
 * takes -printf: a busybox shell built to prefer its applets runs its
 * own find for "find". */
static const char list_sh[] =
    "cd / || exit 1\n"
    "F=; IFS=:; for d in $PATH; do [ -x \"$d/find\" ] && "
    "\"$d/find\" . -maxdepth 0 -printf '' 2>/dev/null && "
    "{ F=$d/find; break; }; done; unset IFS\n"
    "[ -n \"$F\" ] || { echo 'no GNU find in the sandbox' >&2; exit 3; }\n"
    "\"$F\" . \\( -path ./proc -o -path ./sys -o -path ./dev -o -path ./run "
    "-o -path ./tmp/.sbx \\) -prune -o "
    "-printf '%y %m %U %G %s %T@ %C@ %P\\0%l\\0' 2>/dev/null\n"
    "printf 'sbx-end\\0'\n";

#define LIST_MAX (1u << 30)
#define HASH_CHUNK 512

struct ent {
	char *path;
	char type;            /* find's %y: f d l ... */
	unsigned mode;
	long long uid, gid, size;
	char *mtime, *ctime, *target;
	char hash[65];        /* of a candidate, when taken */
};

struct list {
	struct ent *e;
	size_t n;
	char *raw;            /* the capture the strings point into */
};

struct xp {
	const struct sbx_backend *be;
	json_t *ref[2];       /* the snapshot's sandbox, the base's */
	struct list l[2];
	json_t *dirs;         /* the directories to write, as [path...] */
	struct sbx_manifest get; /* the files and links to fetch */
	json_t *deleted;
	struct sbx_snap_merge m;
	struct archive *w;
	struct sbx_err *err;
};

static int
ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ent *)a)->path,
	    ((const struct ent *)b)->path);
}

static struct ent *
find_ent(const struct list *l, const char *path)
{
	struct ent k = {.path = (char *)path};

	return bsearch(&k, l->e, l->n, sizeof *l->e, ent_cmp);
}

static const int stop_sigs[] = {SIGINT, SIGTERM, SIGHUP};

/* Those of stop_sigs not ignored (a background job's SIGINT) into set:
 * blocked while the sandboxes live, to end them first. */
static void
stop_set(sigset_t *set)
{
	struct sigaction sa;
	size_t i;

	sigemptyset(set);
	for (i = 0; i < sizeof stop_sigs / sizeof stop_sigs[0]; i++)
		if (sigaction(stop_sigs[i], NULL, &sa) == 0 &&
		    sa.sa_handler != SIG_IGN)
			sigaddset(set, stop_sigs[i]);
}

/* Stop at a signal that waits (blocked): the caller kills and returns,
 * and the signal comes when it is unblocked. */
static int
interrupted(const sigset_t *set, struct sbx_err *err)
{
	sigset_t p;
	size_t i;

	if (sigpending(&p) < 0)
		return 0;
	for (i = 0; i < sizeof stop_sigs / sizeof stop_sigs[0]; i++)
		if (sigismember(set, stop_sigs[i]) &&
		    sigismember(&p, stop_sigs[i]))
			return sbx_err_set(err, SBX_EX_FAIL, "interrupted: "
			    "the export's sandboxes are killed");
	return 0;
}

static int
parse_list(struct list *l, char *buf, size_t len, struct sbx_err *err)
{
	char *p = buf, *end = buf + len, *rec, *tgt, *f[7], *s;
	size_t cap = 0;
	int i;

	l->raw = buf;
	while (p < end) {
		rec = p;
		p += strnlen(p, (size_t)(end - p)) + 1;
		if (!strcmp(rec, "sbx-end"))
			return p == end ? 0 : sbx_err_set(err, SBX_EX_DATA,
			    "the sandbox's file list has data after its end");
		if (p >= end)
			break;
		tgt = p;
		p += strnlen(p, (size_t)(end - p)) + 1;
		if (p > end)
			break;
		s = rec;
		for (i = 0; i < 7; i++) {
			f[i] = s;
			if (!(s = strchr(s, ' ')))
				return sbx_err_set(err, SBX_EX_DATA, "the "
				    "sandbox's file list has a bad entry");
			*s++ = '\0';
		}
		if (!*s)
			continue;       /* the root itself */
		if (l->n == cap) {
			cap = cap ? cap * 2 : 4096;
			l->e = sbx_xrealloc(l->e, cap * sizeof *l->e);
		}
		memset(&l->e[l->n], 0, sizeof *l->e);
		l->e[l->n].type = f[0][0];
		l->e[l->n].mode = (unsigned)strtoul(f[1], NULL, 8);
		l->e[l->n].uid = strtoll(f[2], NULL, 10);
		l->e[l->n].gid = strtoll(f[3], NULL, 10);
		l->e[l->n].size = strtoll(f[4], NULL, 10);
		l->e[l->n].mtime = f[5];
		l->e[l->n].ctime = f[6];
		l->e[l->n].path = s;
		l->e[l->n].target = tgt;
		l->n++;
	}
	return sbx_err_set(err, SBX_EX_FAIL, "the sandbox's file list was cut "
	    "short");
}

static int
run(struct xp *x, int k, char **argv, struct sbx_exec_result *r)
{
	struct sbx_exec_opts o = {0};

	o.cwd = "/";
	o.capture = 1;
	o.max_output = LIST_MAX;
	memset(r, 0, sizeof *r);
	if (x->be->ops->exec(x->ref[k], argv, &o, r, x->err) < 0)
		return -1;
	if (r->exit_code != 0)
		return sbx_err_set(x->err, SBX_EX_FAIL, "cannot list the files "
		    "of the %s's sandbox (exit %d): %.*s", k ? "base" :
		    "snapshot", r->exit_code, (int)(r->err.len > 200 ? 200 :
		    r->err.len), r->err.data ? r->err.data : "");
	return 0;
}

static int
list_files(struct xp *x, int k)
{
	struct sbx_exec_result r;
	char *argv[] = {"sh", "-c", (char *)list_sh, NULL};
	int rc;

	if ((rc = run(x, k, argv, &r)) == 0) {
		rc = parse_list(&x->l[k], r.out.data ? r.out.data : "",
		    r.out.len, x->err);
		r.out.data = NULL;      /* the list's now */
		if (rc == 0)
			qsort(x->l[k].e, x->l[k].n, sizeof *x->l[k].e,
			    ent_cmp);
	}
	sbx_buf_release(&r.out);
	sbx_buf_release(&r.err);
	return rc;
}

/* sha256sum -z of the candidates (c[0..n), on side k) into their ents. */
static int
hash_side(struct xp *x, int k, struct ent **c, size_t n)
{
	struct sbx_exec_result r;
	char **argv = sbx_xcalloc(HASH_CHUNK + 4, sizeof *argv), *p, *end;
	size_t i, j, m;
	struct ent *e;
	int rc = 0;

	for (i = 0; rc == 0 && i < n; i += m) {
		m = n - i < HASH_CHUNK ? n - i : HASH_CHUNK;
		argv[0] = "sha256sum";
		argv[1] = "-z";
		argv[2] = "--";
		for (j = 0; j < m; j++)
			argv[3 + j] = c[i + j]->path;
		argv[3 + m] = NULL;
		if ((rc = run(x, k, argv, &r)) == 0) {
			p = r.out.data;
			end = p + r.out.len;
			while (p && p + 66 < end) {
				/* "HEX  PATH\0" */
				if ((e = find_ent(&x->l[k], p + 66)))
					memcpy(e->hash, p, 64);
				p += strnlen(p, (size_t)(end - p)) + 1;
			}
		}
		sbx_buf_release(&r.out);
		sbx_buf_release(&r.err);
	}
	free(argv);
	return rc;
}

static int
parent_here(const struct list *l, const char *path)
{
	char *p = sbx_xstrdup(path), *s = strrchr(p, '/');
	const struct ent *e;
	int here = 1;

	if (s) {
		*s = '\0';
		here = (e = find_ent(l, p)) && e->type == 'd';
	}
	free(p);
	return here;
}

static void
take(struct xp *x, struct ent *s)
{
	if (s->type == 'd')
		json_array_append_new(x->dirs, json_string(s->path));
	else if (s->type == 'f' || s->type == 'l')
		sbx_manifest_add(&x->get, s->path);
	/* Sockets, fifos and devices are the sandbox's business. */
}

/* What differs: the snapshot's side against the base's. */
static int
compare(struct xp *x)
{
	struct ent *s, *b, **cs, **cb;
	size_t i, nc = 0;
	int rc = 0;

	cs = sbx_xcalloc(x->l[0].n + 1, sizeof *cs);
	cb = sbx_xcalloc(x->l[0].n + 1, sizeof *cb);
	for (i = 0; i < x->l[0].n; i++) {
		s = &x->l[0].e[i];
		if (!(b = find_ent(&x->l[1], s->path)))
			take(x, s);
		else if (b->type != s->type) {
			json_array_append_new(x->deleted, json_string(s->path));
			take(x, s);
		} else if (s->mode != b->mode || s->uid != b->uid ||
		    s->gid != b->gid || (s->type == 'l' && strcmp(s->target,
		    b->target)) || (s->type == 'f' && s->size != b->size))
			take(x, s);
		else if (s->type == 'f' && (strcmp(s->mtime, b->mtime) ||
		    strcmp(s->ctime, b->ctime))) {
			/* Touched: a write changes ctime, which no one can
			 * set back; the content says whether it changed. */
			cs[nc] = s;
			cb[nc++] = b;
		}
	}
	for (i = 0; i < x->l[1].n; i++) {
		b = &x->l[1].e[i];
		/* The top of what went: rm -rf takes the rest. */
		if (!find_ent(&x->l[0], b->path) && parent_here(&x->l[0],
		    b->path))
			json_array_append_new(x->deleted, json_string(b->path));
	}
	if (nc && (hash_side(x, 0, cs, nc) < 0 || hash_side(x, 1, cb, nc) <
	    0))
		rc = -1;
	for (i = 0; rc == 0 && i < nc; i++)
		if (!cs[i]->hash[0] || strcmp(cs[i]->hash, cb[i]->hash))
			take(x, cs[i]);
	free(cs);
	free(cb);
	return rc;
}

static int
write_fail(struct xp *x)
{
	return sbx_err_set(x->err, SBX_EX_FAIL, "cannot write the archive: %s",
	    archive_error_string(x->w));
}

/* get_archive's tar of paths, each member as files/PATH; a hard link's
 * name (to a member before it) goes to again, to be fetched alone. */
static int
copy_tar(struct xp *x, const struct sbx_manifest *paths,
    struct sbx_manifest *again)
{
	const struct sbx_files *f = sbx_files_of(x->ref[0], x->err);
	struct archive_entry *e;
	struct archive *a;
	struct sbx_job job;
	struct sbx_err e2 = {0};
	const void *blk;
	const char *p;
	size_t len;
	la_int64_t off;
	char *name;
	int fd = -1, r, rc = 0;

	if (!f || f->get_archive(x->ref[0], "/", paths, &fd, &job, x->err) <
	    0)
		return -1;
	a = archive_read_new();
	archive_read_support_format_tar(a);
	if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK)
		r = ARCHIVE_FATAL;
	else
		while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
			p = archive_entry_pathname(e);
			if (!strncmp(p, "./", 2))
				p += 2;
			/* The transfer of the backends takes no hard link:
			 * each name a file of its own. */
			if (archive_entry_hardlink(e)) {
				if (!again)
					break;
				sbx_manifest_add(again, p);
				continue;
			}
			name = sbx_xasprintf("files/%s", p);
			archive_entry_set_pathname(e, name);
			free(name);
			if (archive_write_header(x->w, e) != ARCHIVE_OK) {
				rc = write_fail(x);
				break;
			}
			while ((r = archive_read_data_block(a, &blk, &len,
			    &off)) == ARCHIVE_OK)
				if (archive_write_data(x->w, blk, len) !=
				    (la_ssize_t)len) {
					rc = write_fail(x);
					break;
				}
			if (rc || r != ARCHIVE_EOF)
				break;
		}
	if (rc == 0 && r != ARCHIVE_EOF)
		rc = sbx_err_set(x->err, SBX_EX_FAIL, "cannot read the "
		    "snapshot's files: %s", archive_error_string(a) ?
		    archive_error_string(a) : "a hard link alone");
	archive_read_free(a);
	if (rc == 0)
		sbx_tar_drain(fd);
	close(fd);
	if (rc == 0)
		return sbx_job_wait(&job, x->err);
	sbx_job_wait(&job, &e2);
	return rc;
}

/* The changed directories (from the list), then the files and links as
 * get_archive brings them. */
static int
emit_all(struct xp *x)
{
	struct sbx_manifest again = {0}, one = {0};
	const struct ent *d;
	struct archive_entry *e;
	size_t i;
	json_t *v;
	char *name;
	int rc = 0;

	json_array_foreach(x->dirs, i, v) {
		d = find_ent(&x->l[0], json_string_value(v));
		e = archive_entry_new();
		name = sbx_xasprintf("files/%s/", d->path);
		archive_entry_set_pathname(e, name);
		archive_entry_set_filetype(e, AE_IFDIR);
		archive_entry_set_perm(e, d->mode & 07777);
		archive_entry_set_uid(e, d->uid);
		archive_entry_set_gid(e, d->gid);
		archive_entry_set_mtime(e, strtoll(d->mtime, NULL, 10), 0);
		if (archive_write_header(x->w, e) != ARCHIVE_OK)
			rc = write_fail(x);
		archive_entry_free(e);
		free(name);
		if (rc)
			return rc;
	}
	if (x->get.n)
		rc = copy_tar(x, &x->get, &again);
	for (i = 0; rc == 0 && i < again.n; i++) {
		sbx_manifest_add(&one, again.e[i].path);
		rc = copy_tar(x, &one, NULL);
		sbx_manifest_release(&one);
	}
	sbx_manifest_release(&again);
	return rc;
}

static int
layer(void *arg, int l, int pass)
{
	struct xp *x = arg;
	json_t *v;
	size_t i;

	(void)l;
	if (pass)
		return emit_all(x);
	json_array_foreach(x->deleted, i, v)
		sbx_snap_merge_mark(&x->m, json_string_value(v), 0, 0);
	return 0;
}

static int
make(struct xp *x, int k, const char *sid, const json_t *rec)
{
	struct sbx_spec spec = {0};
	json_t *snap = NULL;
	unsigned given = 0;
	int rc = -1;

	spec.from = k ? NULL : sid;
	spec.image = k ? sbx_json_str(rec, "image") : NULL;
	/* Ended by its backend should we be killed outright. */
	spec.timeout = 3600;
	spec.labels = json_pack("{s:s}", "io.sbx.export", sid);
	/* As sbx-create --from makes it, where the backend has the
	 * snapshot's meta (its image, workdir and limits); E2B takes the
	 * template's id alone. */
	if (!k && (snap = sbx_backend_snap_get(x->be, sid, x->err)))
		sbx_snap_spec(snap, &spec, &given, 0, 0);
	if (k || snap || !x->err->code)
		rc = x->be->ops->create(&spec, &x->ref[k], x->err);
	json_decref(spec.labels);
	json_decref(snap);
	return rc;
}

int
sbx_snap_export_diff(const char *backend, const char *sid, const json_t *rec,
    int fd, struct sbx_err *err)
{
	struct xp x = {0};
	sigset_t block, old;
	int k, rc = -1;

	x.err = err;
	x.dirs = json_array();
	x.deleted = json_array();
	sbx_snap_merge_init(&x.m);
	stop_set(&block);
	sigprocmask(SIG_BLOCK, &block, &old);
	if (!(x.be = sbx_backend_get(backend, err)) || make(&x, 0, sid, rec) <
	    0 || interrupted(&block, err) < 0 || make(&x, 1, sid, rec) < 0 ||
	    interrupted(&block, err) < 0 || list_files(&x, 0) < 0 ||
	    list_files(&x, 1) < 0 || interrupted(&block, err) < 0 || compare(&x) < 0 ||
	    interrupted(&block, err) < 0)
		goto out;
	rc = sbx_snap_merge_export(&x.m, 1, layer, &x, fd, rec, &x.w, err);
out:
	for (k = 0; k < 2; k++)
		if (x.ref[k]) {
			struct sbx_err e2 = {0};

			if (x.be->ops->kill(x.ref[k], 0, &e2) < 0 && rc == 0)
				rc = sbx_err_set(err, e2.code, "%s", e2.msg);
			json_decref(x.ref[k]);
		}
	sigprocmask(SIG_SETMASK, &old, NULL);
	for (k = 0; k < 2; k++) {
		free(x.l[k].e);
		free(x.l[k].raw);
	}
	sbx_manifest_release(&x.get);
	sbx_snap_merge_release(&x.m);
	json_decref(x.dirs);
	json_decref(x.deleted);
	return rc;
}
