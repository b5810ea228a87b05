/* cp.c - sbx-cp: files and directories into, out of and between sandboxes,
 * as one tar stream through the backends' transfer contract (put_archive,
 * get_archive, scan), with cp -r's rules for where the copy lands */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "internal.h"

/* One operand, taken apart. */
struct side {
	const struct sbx_cp_loc *loc;
	const struct sbx_files *f;
	char *path;    /* without the trailing "/" or "/."; "/" stays */
	char *parent;  /* its directory */
	char *base;    /* its last part */
	int slash;     /* it ended in "/": it must be a directory */
	int contents;  /* it ended in "/.": what is in it, not itself */
};

static void
side_release(struct side *s)
{
	free(s->path);
	free(s->parent);
	free(s->base);
}

static int
side_init(struct side *s, const struct sbx_cp_loc *loc, struct sbx_err *err)
{
	size_t n;
	char *p, *slash;

	memset(s, 0, sizeof *s);
	s->loc = loc;
	if (loc->ref && !(s->f = sbx_files_of(loc->ref, err)))
		return -1;
	if (!strcmp(loc->path, "-"))
		return 0;
	p = s->path = sbx_xstrdup(loc->path);
	for (;;) {
		n = strlen(p);
		if (n > 1 && p[n - 1] == '/') {
			p[n - 1] = '\0';
			s->slash = 1;
		} else if (n > 2 && !strcmp(p + n - 2, "/.")) {
			p[n - 2] = '\0';
			s->contents = s->slash = 1;
		} else if (!strcmp(p, ".")) {
			s->contents = s->slash = 1;
			break;
		} else
			break;
	}
	if (!*p) { /* "/." */
		free(p);
		p = s->path = sbx_xstrdup("/");
	}
	slash = strrchr(p, '/');
	if (!strcmp(p, "/")) {
		s->parent = sbx_xstrdup("/");
		s->base = sbx_xstrdup(".");
		s->contents = s->slash = 1;
	} else if (!slash) {
		s->parent = sbx_xstrdup(".");
		s->base = sbx_xstrdup(p);
	} else {
		s->parent = slash == p ? sbx_xstrdup("/") :
		    sbx_xasprintf("%.*s", (int)(slash - p), p);
		s->base = sbx_xstrdup(slash + 1);
	}
	if (!strcmp(s->base, "..") || (!strcmp(s->base, ".") &&
	    strcmp(p, "/") && strcmp(p, ".")))
		return sbx_err_set(err, SBX_EX_USAGE, "cannot copy '%s': name "
		    "a file or directory", loc->path);
	return 0;
}

/* The operand as messages name it: "ID:PATH" in a sandbox. */
static char *
side_name(const struct side *s, const char *path)
{
	if (!s->loc->ref)
		return sbx_xstrdup(path);
	return sbx_xasprintf("%s:%s", sbx_json_str(s->loc->ref, "id"), path);
}

static int
skip_all(const char *path, int is_dir, void *arg)
{
	(void)path;
	(void)is_dir;
	(void)arg;
	return 1;
}

/* Whether dir is a directory in the sandbox (a symlink to one counts, as
 * cp follows it): 1, 0, or -1 with err. */
static int
sandbox_isdir(const struct side *s, const char *dir, struct sbx_manifest *m,
    struct sbx_err *err)
{
	struct sbx_scan_opts o = {.dir = dir, .skip = m ? NULL : skip_all};
	struct sbx_manifest none = {0};
	int rc;

	if (!m && !strcmp(dir, "/"))
		return 1;
	rc = s->f->scan(s->loc->ref, &o, m ? m : &none, err);
	sbx_manifest_release(&none);
	if (rc == 0)
		return 1;
	/* "no directory"; or a backend that runs the listing in dir could
	 * not start it there (docker: "workdir ... does not exist"). */
	if (err->code == SBX_EX_USAGE || err->code == SBX_EX_EXECFAIL ||
	    err->code == SBX_EX_NOEXEC || err->code == SBX_EX_NOTFOUND)
		return 0;
	return -1;
}

/* --- the source: a tar stream read with libarchive --------------------- */

struct src {
	struct archive *a;
	struct sbx_job job;   /* a sandbox's get_archive */
	int fd;
	int isdir;
	const char *from;     /* members' prefix to replace ("": none) */
	char *from_buf;
	int top_dir;          /* a directory to begin with (mode 0755) */
	int disk;             /* a tree on this machine */
};

static void
src_close(struct src *r)
{
	if (r->a)
		archive_read_free(r->a);
	r->a = NULL;
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	free(r->from_buf);
	r->from_buf = NULL;
}

static struct archive *
tar_reader(void)
{
	struct archive *a = archive_read_new();

	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_format_empty(a);
	return a;
}

static int
cannot_stat(const struct side *s, const char *why, struct sbx_err *err)
{
	char *n = side_name(s, s->loc->path);

	sbx_err_set(err, SBX_EX_FAIL, "cannot stat '%s': %s", n, why);
	free(n);
	return -1;
}

static int
src_open_host(struct src *r, struct side *s, struct sbx_err *err)
{
	struct stat st;

	if ((s->slash ? stat(s->path, &st) : lstat(s->path, &st)) < 0)
		return cannot_stat(s, strerror(errno), err);
	if (s->slash && !S_ISDIR(st.st_mode))
		return cannot_stat(s, strerror(ENOTDIR), err);
	r->isdir = S_ISDIR(st.st_mode);
	r->a = archive_read_disk_new();
	/* Links are copied as links; one named with a "/" is followed, as
	 * cp follows it. */
	if (s->slash)
		archive_read_disk_set_symlink_hybrid(r->a);
	else
		archive_read_disk_set_symlink_physical(r->a);
	archive_read_disk_set_behavior(r->a, ARCHIVE_READDISK_NO_XATTR |
	    ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_FFLAGS);
	if (archive_read_disk_open(r->a, s->path) != ARCHIVE_OK)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s': %s",
		    s->path, archive_error_string(r->a));
	r->from = s->path;
	r->disk = 1;
	return 0;
}

/* A file or symlink comes in get_archive's tar of its one name from its
 * directory; a directory in the tar of what scan lists in it. */
static int
src_open_sandbox(struct src *r, struct side *s, struct archive_entry **first,
    struct sbx_err *err)
{
	struct sbx_manifest one = {0}, m = {0};
	int rc = -1, k;

	*first = NULL;
	if (!s->slash) {
		sbx_manifest_add(&one, s->base);
		if (s->f->get_archive(s->loc->ref, s->parent, &one, &r->fd,
		    &r->job, err) < 0) {
			if (err->code == SBX_EX_USAGE)
				cannot_stat(s, "No such file or directory",
				    err);
			goto out;
		}
		r->a = tar_reader();
		k = archive_read_open_fd(r->a, r->fd, 65536);
		if (k == ARCHIVE_OK)
			k = archive_read_next_header(r->a, first);
		if (k == ARCHIVE_OK) {
			r->from = s->base;
			rc = 0;
			goto out;
		}
		*first = NULL;
		src_close(r);
		/* Its directory missing is the job's failure. */
		if (sbx_job_wait(&r->job, err) < 0) {
			if (err->code == SBX_EX_USAGE)
				cannot_stat(s, "No such file or directory",
				    err);
			goto out;
		}
		if (k != ARCHIVE_EOF) {
			sbx_err_set(err, SBX_EX_DATA, "bad tar stream from the "
			    "sandbox");
			goto out;
		}
	}
	/* Neither a file nor a symlink: a directory, or nothing. */
	k = sandbox_isdir(s, s->path, &m, err);
	if (k < 0)
		goto out;
	if (!k) {
		cannot_stat(s, s->slash ? "Not a directory (or no such file)" :
		    "No such file or directory", err);
		goto out;
	}
	r->isdir = 1;
	r->top_dir = 1;
	r->from = "";
	if (s->f->get_archive(s->loc->ref, s->path, &m, &r->fd, &r->job,
	    err) < 0)
		goto out;
	r->a = tar_reader();
	if (archive_read_open_fd(r->a, r->fd, 65536) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_DATA, "bad tar stream from the sandbox: "
		    "%s", archive_error_string(r->a));
		goto out;
	}
	rc = 0;
out:
	sbx_manifest_release(&one);
	sbx_manifest_release(&m);
	return rc;
}

/* --- the destination ---------------------------------------------------- */

struct dst {
	struct archive *a;
	struct sbx_job job;   /* a sandbox's put_archive */
	int fd;
	int disk;             /* extracting on this machine */
};

static struct archive *
tar_writer(int fd, struct sbx_err *err)
{
	struct archive *a = archive_write_new();

	/* Names are bytes: no translation through the locale. pax between
	 * us (nanosecond mtimes); GNU tar's format on stdout, which tar(1)
	 * reads without a warning about pax's hdrcharset. */
	if (fd == 1)
		archive_write_set_format_gnutar(a);
	else {
		archive_write_set_format_pax(a);
		archive_write_set_format_option(a, "pax", "hdrcharset",
		    "BINARY");
	}
	archive_write_set_bytes_in_last_block(a, 1);
	if (archive_write_open_fd(a, fd) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot start the stream: %s",
		    archive_error_string(a));
		archive_write_free(a);
		return NULL;
	}
	return a;
}

/* The host's side: the library's guards, as sbx_tar_extract has them. */
static struct archive *
disk_writer(void)
{
	struct archive *a = archive_write_disk_new();

	archive_write_disk_set_options(a, ARCHIVE_EXTRACT_TIME |
	    ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
	    ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_UNLINK |
	    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
	return a;
}

/* --- the copy ------------------------------------------------------------ */

/* A member's name with the source's prefix replaced by top. */
static char *
rename_member(const char *name, const char *from, const char *top)
{
	size_t n = strlen(from);

	while (name[0] == '.' && name[1] == '/')
		name += 2;
	while (from[0] == '.' && from[1] == '/' && from[2])
		from += 2;
	n = strlen(from);
	if (!*from)
		return *top ? sbx_xasprintf("%s/%s", top, name) :
		    sbx_xstrdup(name);
	if (!strncmp(name, from, n) && (!name[n] || name[n] == '/'))
		return sbx_xasprintf("%s%s", top, *top || !name[n] ? name + n :
		    name + n + 1);
	return NULL;
}

static int
valid_name(char *name)
{
	size_t n = strlen(name);

	while (n > 1 && name[n - 1] == '/')
		name[--n] = '\0';
	return sbx_path_valid(name);
}

static int
pump(struct src *r, struct archive_entry *first, struct dst *w,
    const char *top, const struct side *ss, int *broke, struct sbx_err *err)
{
	struct archive_entry *ae = first, *own = NULL;
	char buf[65536], *name = NULL;
	la_ssize_t n;
	int k, rc = -1, type;

	if (r->top_dir && *top) {
		own = archive_entry_new();
		archive_entry_set_pathname(own, top);
		archive_entry_set_filetype(own, AE_IFDIR);
		archive_entry_set_perm(own, 0755);
		archive_entry_set_mtime(own, (time_t)sbx_now(), 0);
		if (archive_write_header(w->a, own) != ARCHIVE_OK)
			goto werr;
	}
	for (;;) {
		if (!ae) {
			k = archive_read_next_header(r->a, &ae);
			if (k == ARCHIVE_EOF)
				break;
			if (k != ARCHIVE_OK && k != ARCHIVE_WARN) {
				sbx_err_set(err, SBX_EX_DATA, "bad tar stream: "
				    "%s", archive_error_string(r->a));
				*broke = 1;
				goto out;
			}
		}
		if (r->disk)
			archive_read_disk_descend(r->a);
		free(name);
		name = rename_member(archive_entry_pathname(ae) ?
		    archive_entry_pathname(ae) : "", r->from, top);
		type = archive_entry_filetype(ae);
		if (!name || !*name || (type == AE_IFDIR && !strcmp(name,
		    ".")) ) {
			ae = NULL;
			continue;
		}
		if (!valid_name(name)) {
			sbx_err_set(err, SBX_EX_DATA, "refused archive member "
			    "'%s': not a plain relative path", name);
			goto out;
		}
		if (archive_entry_hardlink(ae) || (type != AE_IFREG &&
		    type != AE_IFDIR && type != AE_IFLNK)) {
			if (!ss->loc->ref && strcmp(ss->loc->path, "-")) {
				/* A socket or a FIFO on this machine. */
				sbx_warn("'%s': not a file, directory or "
				    "symlink; left out", name);
				ae = NULL;
				continue;
			}
			sbx_err_set(err, SBX_EX_DATA, "refused archive member "
			    "'%s': not a file, directory or symlink", name);
			goto out;
		}
		archive_entry_set_pathname(ae, name);
		archive_entry_set_uid(ae, 0);
		archive_entry_set_gid(ae, 0);
		archive_entry_set_uname(ae, NULL);
		archive_entry_set_gname(ae, NULL);
		if (archive_write_header(w->a, ae) != ARCHIVE_OK)
			goto werr;
		if (type == AE_IFREG && archive_entry_size(ae) > 0) {
			while ((n = archive_read_data(r->a, buf, sizeof buf)) >
			    0) {
				if (archive_write_data(w->a, buf, (size_t)n) !=
				    n)
					goto werr;
				sbx_progress_add(0, (uint64_t)n);
			}
			if (n < 0) {
				sbx_err_set(err, SBX_EX_FAIL, "cannot read "
				    "'%s': %s", name,
				    archive_error_string(r->a));
				*broke = 1;
				goto out;
			}
		}
		if (w->disk && archive_write_finish_entry(w->a) != ARCHIVE_OK)
			goto werr;
		sbx_progress_add(1, 0);
		ae = NULL;
	}
	rc = 0;
	goto out;
werr:
	*broke = 2;
	/* Who read our stdout went away (| head): a quiet end. */
	if (w->fd < 0 && !w->disk && archive_errno(w->a) == EPIPE) {
		err->code = SBX_EX_OK;
		goto out;
	}
	sbx_err_set(err, SBX_EX_FAIL, "cannot write '%s': %s", name ? name :
	    top, archive_error_string(w->a));
out:
	free(name);
	if (own)
		archive_entry_free(own);
	return rc;
}

/* Where the copy lands: *dir (a directory of dst's side) and the name in
 * it, by cp -r's rules. */
static int
landing(const struct side *sd, const struct side *ss, int src_isdir,
    int *dst_isdir, char **dir, char **name, struct sbx_err *err)
{
	const char *src_base = ss->loc->ref || strcmp(ss->loc->path, "-") ?
	    ss->base : NULL;
	struct stat st;
	char *n;
	int k, exists = 0;

	if (!sd->loc->ref) {
		k = stat(sd->path, &st);
		exists = k == 0 || lstat(sd->path, &st) == 0;
		*dst_isdir = k == 0 && S_ISDIR(st.st_mode);
	} else if ((*dst_isdir = sandbox_isdir(sd, sd->path, NULL, err)) < 0)
		return -1;
	if (!src_base) { /* a stream from stdin: into dst, as it is */
		if (!*dst_isdir) {
			n = side_name(sd, sd->loc->path);
			sbx_err_set(err, SBX_EX_FAIL, "cannot extract into "
			    "'%s': Not a directory (or no such directory)", n);
			free(n);
			return -1;
		}
		*dir = sbx_xstrdup(sd->path);
		*name = sbx_xstrdup("");
		return 0;
	}
	if (*dst_isdir && !ss->contents) {
		*dir = sbx_xstrdup(sd->path);
		*name = sbx_xstrdup(src_base);
		return 0;
	}
	if (*dst_isdir && ss->contents) {
		/* cp -r SRC/. DST: what is in SRC into DST. */
		*dir = sbx_xstrdup(sd->path);
		*name = sbx_xstrdup("");
		return 0;
	}
	n = side_name(sd, sd->loc->path);
	if (exists && src_isdir) {
		char *m = side_name(ss, ss->loc->path);

		sbx_err_set(err, SBX_EX_FAIL, "cannot overwrite non-directory "
		    "'%s' with directory '%s'", n, m);
		free(m);
		free(n);
		return -1;
	}
	if (sd->slash && !src_isdir) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create regular file "
		    "'%s': Not a directory", n);
		free(n);
		return -1;
	}
	free(n);
	*dir = sbx_xstrdup(sd->parent);
	*name = sbx_xstrdup(sd->base);
	return 0;
}

/* Whether name lies below one of the stream's own symlinks. */
static int
under_link(const struct sbx_manifest *links, const char *name)
{
	size_t i, n;

	if (!strncmp(name, "./", 2))
		name += 2;
	for (i = 0; i < links->n; i++) {
		n = strlen(links->e[i].path);
		if (!strncmp(name, links->e[i].path, n) && name[n] == '/')
			return 1;
	}
	return 0;
}

/* The tar stream on stdin, in a temporary file once every member of it
 * passed: a bad one is refused before anything is written. */
static int
spool_stdin(struct sbx_err *err)
{
	const char *tmp = getenv("TMPDIR");
	struct sbx_manifest links = {0}; /* the stream's symlinks */
	struct archive *a = NULL;
	struct archive_entry *ae;
	char buf[65536], *name;
	ssize_t n;
	int fd, k, type, ok;

	fd = open(tmp && *tmp ? tmp : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC,
	    0600);
	if (fd < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make a temporary file:");
		return -1;
	}
	while ((n = read(0, buf, sizeof buf)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || sbx_write_all(fd, buf, (size_t)n) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot read the stream "
			    "on stdin:");
			goto fail;
		}
	}
	if (lseek(fd, 0, SEEK_SET) < 0)
		goto fail;
	a = tar_reader();
	if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_DATA, "not a tar stream: %s",
		    archive_error_string(a));
		goto fail;
	}
	while ((k = archive_read_next_header(a, &ae)) == ARCHIVE_OK) {
		name = sbx_xstrdup(archive_entry_pathname(ae) ?
		    archive_entry_pathname(ae) : "");
		type = archive_entry_filetype(ae);
		ok = (!strcmp(name, ".") || !strcmp(name, "./") ||
		    valid_name(name + (strncmp(name, "./", 2) ? 0 : 2))) &&
		    !archive_entry_hardlink(ae) && (type == AE_IFREG ||
		    type == AE_IFDIR || type == AE_IFLNK);
		if (!ok)
			sbx_err_set(err, SBX_EX_DATA, "refused archive member "
			    "'%s': not a plain relative file, directory or "
			    "symlink", archive_entry_pathname(ae) ?
			    archive_entry_pathname(ae) : "");
		else if (under_link(&links, name)) {
			ok = 0;
			sbx_err_set(err, SBX_EX_DATA, "refused archive member "
			    "'%s': a path through a symlink", name);
		} else if (type == AE_IFLNK)
			sbx_manifest_add(&links, name + (strncmp(name, "./",
			    2) ? 0 : 2));
		free(name);
		if (!ok)
			goto fail;
	}
	sbx_manifest_release(&links);
	if (k != ARCHIVE_EOF) {
		sbx_err_set(err, SBX_EX_DATA, "bad tar stream on stdin: %s",
		    archive_error_string(a));
		goto fail;
	}
	archive_read_free(a);
	if (lseek(fd, 0, SEEK_SET) < 0) {
		a = NULL;
		goto fail;
	}
	return fd;
fail:
	sbx_manifest_release(&links);
	if (a)
		archive_read_free(a);
	else if (!err->msg[0])
		sbx_err_set(err, SBX_EX_FAIL, "cannot read the stream:");
	close(fd);
	return -1;
}

/* A destination whose directory is missing, as cp says it. */
static void
no_dir(const struct side *sd, struct sbx_err *err)
{
	char *n = side_name(sd, sd->loc->path);

	sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s': No such file or "
	    "directory", n);
	free(n);
}

/* Both sides in one sandbox, the copy of a directory below itself. */
static int
into_itself(const struct side *ss, const struct side *sd, const char *dir,
    const char *name)
{
	const char *a = sbx_json_str(ss->loc->ref, "id");
	const char *b = sbx_json_str(sd->loc->ref, "id");
	char *land;
	size_t n = strlen(ss->path);
	int r;

	if (!a || !b || strcmp(a, b) || strcmp(sbx_json_str(ss->loc->ref,
	    "backend"), sbx_json_str(sd->loc->ref, "backend")))
		return 0;
	land = *name ? sbx_xasprintf("%s/%s", strcmp(dir, "/") ? dir : "",
	    name) : sbx_xstrdup(dir);
	r = !strcmp(ss->path, "/") || (!strncmp(land, ss->path, n) &&
	    (!land[n] || land[n] == '/'));
	free(land);
	return r;
}

int
sbx_cp(const struct sbx_cp_loc *src, const struct sbx_cp_loc *dst,
    struct sbx_err *err)
{
	struct side ss, sd;
	struct src r = {.fd = -1, .job = {.pid = -1, .errfd = -1}};
	struct dst w = {.fd = -1, .job = {.pid = -1, .errfd = -1}};
	struct archive_entry *first = NULL;
	struct sbx_err jerr = {0};
	char *dir = NULL, *name = NULL, *top;
	int rc = -1, dst_isdir = 0, broke = 0, stream_in = !src->ref &&
	    !strcmp(src->path, "-");

	if (side_init(&ss, src, err) < 0 || side_init(&sd, dst, err) < 0) {
		side_release(&ss);
		return -1;
	}
	/* The source first: cp names a missing source before anything. */
	if (stream_in) {
		if ((r.fd = spool_stdin(err)) < 0)
			goto out;
		r.a = tar_reader();
		if (archive_read_open_fd(r.a, r.fd, 65536) != ARCHIVE_OK) {
			sbx_err_set(err, SBX_EX_DATA, "not a tar stream: %s",
			    archive_error_string(r.a));
			goto out;
		}
		r.from = "";
	} else if (!src->ref) {
		if (src_open_host(&r, &ss, err) < 0)
			goto out;
	} else if (src_open_sandbox(&r, &ss, &first, err) < 0)
		goto out;
	if (!dst->ref && !strcmp(dst->path, "-")) {
		top = ss.contents ? "" : ss.base;
		if (!(w.a = tar_writer(1, err)))
			goto out;
	} else {
		if (landing(&sd, &ss, r.isdir, &dst_isdir, &dir, &name,
		    err) < 0)
			goto out;
		top = name;
		if (src->ref && dst->ref && r.isdir && into_itself(&ss, &sd,
		    dir, name)) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot copy a directory, "
			    "'%s', into itself, '%s'", src->path, dst->path);
			goto out;
		}
		if (!dst->ref) {
			if (chdir(dir) < 0) {
				sbx_err_set(err, SBX_EX_FAIL, "cannot create "
				    "'%s':", dst->path);
				goto out;
			}
			w.a = disk_writer();
			w.disk = 1;
		} else {
			if (sd.f->put_archive(dst->ref, dir, &w.fd, &w.job,
			    err) < 0) {
				if (err->code == SBX_EX_USAGE)
					no_dir(&sd, err);
				goto out;
			}
			if (!(w.a = tar_writer(w.fd, err)))
				goto out;
		}
	}
	if (pump(&r, first, &w, top, &ss, &broke, err) < 0)
		goto out;
	if (archive_write_close(w.a) != ARCHIVE_OK) {
		broke = 2;
		sbx_err_set(err, w.fd < 0 && !w.disk && archive_errno(w.a) ==
		    EPIPE ? SBX_EX_OK : SBX_EX_FAIL, "cannot finish writing: "
		    "%s", archive_error_string(w.a));
		goto out;
	}
	rc = 0;
out:
	/* A stream cut short must not end as a whole one. */
	if (rc < 0 && w.fd >= 0) {
		close(w.fd);
		w.fd = -1;
	}
	if (w.a)
		archive_write_free(w.a);
	if (w.fd >= 0)
		close(w.fd);
	src_close(&r);
	/* The job that broke the stream says why better than the stream. */
	if (sbx_job_wait(&r.job, &jerr) < 0 && (rc == 0 || broke == 1)) {
		*err = jerr;
		rc = -1;
	}
	if (sbx_job_wait(&w.job, &jerr) < 0 && (rc == 0 || broke == 2)) {
		*err = jerr;
		rc = -1;
		if (jerr.code == SBX_EX_USAGE) /* "no directory" */
			no_dir(&sd, err);
	}
	free(dir);
	free(name);
	side_release(&ss);
	side_release(&sd);
	return rc;
}
