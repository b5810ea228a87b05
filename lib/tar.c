/* tar.c - tar streams with libarchive: made from a manifest, and extracted
 * without ever leaving the directory they are extracted into */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "internal.h"

static int
ar_err(struct sbx_err *err, struct archive *a, const char *what)
{
	return sbx_err_set(err, SBX_EX_FAIL, "%s: %s", what,
	    archive_error_string(a) ? archive_error_string(a) : "error");
}

static int
same_stat(const struct sbx_fentry *e, const struct stat *st)
{
	struct sbx_fentry now;

	return sbx_fentry_stat(&now, st) && now.type == e->type &&
	    now.size == e->size && now.mtime == e->mtime;
}

/* One member: header from e, data read from the file, which must not
 * change while it is read (or the receiver's record would lie). */
static int
write_one(struct archive *a, struct archive_entry *ae,
    const struct sbx_fentry *e, struct sbx_err *err)
{
	char buf[65536], target[PATH_MAX];
	struct timespec ts = sbx_ts(e->mtime);
	struct stat st;
	uint64_t left;
	ssize_t n;
	int fd = -1, rc = -1;

	archive_entry_clear(ae);
	archive_entry_set_pathname(ae, e->path);
	archive_entry_set_mtime(ae, ts.tv_sec, ts.tv_nsec);
	archive_entry_set_perm(ae, e->mode & 07777);
	if (e->type == 'l') {
		n = readlink(e->path, target, sizeof target - 1);
		if (n < 0)
			return sbx_err_set(err, SBX_EX_FAIL,
			    "cannot read link '%s':", e->path);
		target[n] = '\0';
		/* A link re-pointed since its stat is a changed file too. */
		if (lstat(e->path, &st) < 0 || !same_stat(e, &st) ||
		    (uint64_t)n != e->size)
			return sbx_err_set(err, SBX_EX_FAIL, "'%s' changed "
			    "while it was read; run again", e->path);
		archive_entry_set_filetype(ae, AE_IFLNK);
		archive_entry_set_symlink(ae, target);
		archive_entry_set_size(ae, 0);
		if (archive_write_header(a, ae) != ARCHIVE_OK)
			return ar_err(err, a, e->path);
		return 0;
	}
	/* O_NONBLOCK: a FIFO put in the file's place must not hang us. */
	fd = open(e->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
	    O_NONBLOCK);
	if (fd < 0 && errno == ELOOP)
		goto changed;
	if (fd < 0 || fstat(fd, &st) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", e->path);
		goto out;
	}
	if (!same_stat(e, &st))
		goto changed;
	archive_entry_set_filetype(ae, AE_IFREG);
	archive_entry_set_size(ae, (la_int64_t)e->size);
	if (archive_write_header(a, ae) != ARCHIVE_OK) {
		ar_err(err, a, e->path);
		goto out;
	}
	for (left = e->size; left; left -= (uint64_t)n) {
		n = read(fd, buf, left < sizeof buf ? left : sizeof buf);
		if (n < 0 && errno == EINTR) {
			n = 0;
			continue;
		}
		if (n < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':",
			    e->path);
			goto out;
		}
		if (n == 0)
			goto changed;
		if (archive_write_data(a, buf, (size_t)n) != n) {
			ar_err(err, a, "cannot write the stream");
			goto out;
		}
		sbx_progress_add(0, (uint64_t)n);
	}
	if (fstat(fd, &st) < 0 || !same_stat(e, &st))
		goto changed;
	rc = 0;
	goto out;
changed:
	sbx_err_set(err, SBX_EX_FAIL, "'%s' changed while it was read; "
	    "run again", e->path);
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

int
sbx_tar_write(int fd, const struct sbx_manifest *m, enum sbx_compress z,
    struct sbx_err *err)
{
	struct archive *a = archive_write_new();
	struct archive_entry *ae = archive_entry_new();
	int rc = -1;
	size_t i;

	/* pax: nanosecond mtimes and long names travel exactly. */
	archive_write_set_format_pax(a);
	/* Names are bytes: no translation through the locale. */
	archive_write_set_format_option(a, "pax", "hdrcharset", "BINARY");
	if (z == SBX_COMPRESS_GZIP)
		archive_write_add_filter_gzip(a);
	else if (z == SBX_COMPRESS_ZSTD)
		archive_write_add_filter_zstd(a);
	archive_write_set_bytes_in_last_block(a, 1);
	if (archive_write_open_fd(a, fd) != ARCHIVE_OK) {
		ar_err(err, a, "cannot start the stream");
		goto out;
	}
	for (i = 0; i < m->n; i++) {
		if (write_one(a, ae, &m->e[i], err) < 0)
			goto out;
		sbx_progress_add(1, 0);
	}
	if (archive_write_close(a) != ARCHIVE_OK) {
		ar_err(err, a, "cannot finish the stream");
		goto out;
	}
	rc = 0;
out:
	archive_entry_free(ae);
	archive_write_free(a);
	return rc;
}

/* What is read after the end of an archive, at most. */
#define TAIL_MAX (1024 * 1024)

/* The rest of a stream whose archive ended, read to its end: tar pads its
 * last record after the end marker (and a compressor adds its trailer),
 * and a writer still sending that found the pipe closed (EPIPE), which
 * failed a whole pull (e2b's, under load). Padding only: a stream that
 * goes on is the writer's failure. */
void
sbx_tar_drain(int fd)
{
	char buf[16384];
	size_t got = 0;
	ssize_t n;

	while (got < TAIL_MAX) {
		if ((n = read(fd, buf, sizeof buf)) > 0)
			got += (size_t)n;
		else if (n == 0 || errno != EINTR)
			break;
	}
}

int
sbx_tar_extract(int fd, struct sbx_err *err)
{
	struct archive *a = archive_read_new();
	struct archive *w = archive_write_disk_new();
	struct archive_entry *ae;
	const char *name;
	char dir[4096];
	int r, rc = -1;

	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	/* The library's own guards: no absolute names, no "..", and a
	 * symlink on the way is removed, not followed. */
	archive_write_disk_set_options(w, ARCHIVE_EXTRACT_TIME |
	    ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
	    ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_UNLINK |
	    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
	if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_DATA, "not a tar stream: %s",
		    archive_error_string(a));
		goto out;
	}
	while ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK) {
		name = archive_entry_pathname(ae);
		if (name && archive_entry_filetype(ae) == AE_IFDIR) {
			size_t n = strlen(name);

			/* Directories come as "sub/". */
			snprintf(dir, sizeof dir, "%s", name);
			while (n > 1 && dir[n - 1] == '/')
				dir[--n] = '\0';
			name = dir;
		}
		if (!name || !sbx_path_valid(name)) {
			sbx_err_set(err, SBX_EX_DATA, "refused archive member "
			    "'%s': not a plain relative path", name ? name : "");
			goto out;
		}
		if (archive_entry_hardlink(ae) || (archive_entry_filetype(ae)
		    != AE_IFREG && archive_entry_filetype(ae) != AE_IFLNK &&
		    archive_entry_filetype(ae) != AE_IFDIR)) {
			sbx_err_set(err, SBX_EX_DATA, "refused archive member "
			    "'%s': not a file, directory or symlink", name);
			goto out;
		}
		if (archive_read_extract2(a, ae, w) != ARCHIVE_OK) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot write '%s': %s",
			    name, archive_error_string(a) ?
			    archive_error_string(a) : archive_error_string(w));
			goto out;
		}
	}
	if (r != ARCHIVE_EOF) {
		sbx_err_set(err, SBX_EX_DATA, "bad tar stream: %s",
		    archive_error_string(a));
		goto out;
	}
	sbx_tar_drain(fd);
	if (archive_write_close(w) != ARCHIVE_OK) {
		ar_err(err, w, "cannot finish writing");
		goto out;
	}
	rc = 0;
out:
	archive_write_free(w);
	archive_read_free(a);
	return rc;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Whether a symlink staged before, a name in the tree links (libc's
 * tsearch: O(log n) a look-up), is one of the directories name is in. */
static int
through_link(void *links, const char *name)
{
	char dir[4096];
	size_t n = strlen(name), i;

	if (!links || n >= sizeof dir)
		return 0;
	memcpy(dir, name, n + 1);
	for (i = 0; i < n; i++)
		if (dir[i] == '/') {
			dir[i] = '\0';
			if (tfind(dir, &links, cmp_str))
				return 1;
			dir[i] = '/';
		}
	return 0;
}

static int
refuse(struct sbx_err *err, const char *name, const char *why)
{
	return sbx_err_set(err, SBX_EX_DATA, "refused archive member '%s': %s",
	    name, why);
}

int
sbx_tar_stage(int fd, int stage_fd, long (*want)(const char *name, void *arg),
    void (*got)(long slot, const struct sbx_fentry *e, void *arg), void *arg,
    struct sbx_err *err)
{
	struct sbx_fentry e;
	struct timespec times[2] = {{0, 0}, {0, 0}};
	void *links = NULL;
	char *link, **node;
	long slot;
	struct archive *a = archive_read_new();
	struct archive_entry *ae;
	const char *name, *target;
	char tmp[32], buf[65536];
	la_ssize_t n;
	int r, rc = -1, out;

	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_DATA, "not a tar stream: %s",
		    archive_error_string(a));
		goto done;
	}
	while ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK) {
		name = archive_entry_pathname(ae);
		if (!name)
			name = "";
		if (*name == '/') {
			refuse(err, name, "absolute path");
			goto done;
		}
		if (!sbx_path_valid(name)) {
			refuse(err, name, "not a plain relative path");
			goto done;
		}
		if (archive_entry_hardlink(ae)) {
			refuse(err, name, "a hard link");
			goto done;
		}
		if (archive_entry_filetype(ae) != AE_IFREG &&
		    archive_entry_filetype(ae) != AE_IFLNK) {
			refuse(err, name, "not a regular file or symlink");
			goto done;
		}
		if (through_link(links, name)) {
			refuse(err, name, "path through a symlink");
			goto done;
		}
		if ((slot = want(name, arg)) < 0) {
			refuse(err, name, "not asked for");
			goto done;
		}
		snprintf(tmp, sizeof tmp, "%ld", slot);
		memset(&e, 0, sizeof e);
		e.mtime = sbx_ns(archive_entry_mtime(ae),
		    archive_entry_mtime_nsec(ae));
		if (archive_entry_filetype(ae) == AE_IFLNK) {
			target = archive_entry_symlink(ae);
			times[0].tv_nsec = UTIME_OMIT;
			times[1] = sbx_ts(e.mtime);
			if (!target || symlinkat(target, stage_fd, tmp) < 0 ||
			    utimensat(stage_fd, tmp, times,
			    AT_SYMLINK_NOFOLLOW) < 0) {
				sbx_err_set(err, SBX_EX_FAIL, "cannot stage "
				    "'%s':", name);
				goto done;
			}
			e.type = 'l';
			e.mode = 0777;
			e.size = strlen(target);
			link = sbx_xstrdup(name);
			if (!(node = tsearch(link, &links, cmp_str))) {
				free(link);
				sbx_err_set(err, SBX_EX_FAIL, "out of memory");
				goto done;
			}
			if (*node != link) /* the same name again */
				free(link);
		} else {
			e.type = 'f';
			e.mode = archive_entry_perm(ae) & 07777;
			e.size = (uint64_t)archive_entry_size(ae);
			out = openat(stage_fd, tmp, O_WRONLY | O_CREAT |
			    O_EXCL | O_CLOEXEC, 0600);
			if (out < 0) {
				sbx_err_set(err, SBX_EX_FAIL, "cannot stage "
				    "'%s':", name);
				goto done;
			}
			while ((n = archive_read_data(a, buf, sizeof buf)) > 0)
				if (sbx_write_all(out, buf, (size_t)n) < 0)
					break;
				else
					sbx_progress_add(0, (uint64_t)n);
			times[0].tv_nsec = UTIME_OMIT;
			times[1] = sbx_ts(e.mtime);
			if (n != 0 || fchmod(out, e.mode) < 0 ||
			    futimens(out, times) < 0) {
				if (n < 0)
					sbx_err_set(err, SBX_EX_DATA, "bad tar "
					    "stream at '%s': %s", name,
					    archive_error_string(a));
				else
					sbx_err_set(err, SBX_EX_FAIL, "cannot "
					    "write '%s':", name);
				close(out);
				goto done;
			}
			if (close(out) < 0) {
				sbx_err_set(err, SBX_EX_FAIL, "cannot write "
				    "'%s':", name);
				goto done;
			}
		}
		got(slot, &e, arg);
		sbx_progress_add(1, 0);
	}
	if (r != ARCHIVE_EOF) {
		sbx_err_set(err, SBX_EX_DATA, "bad tar stream: %s",
		    archive_error_string(a));
		goto done;
	}
	sbx_tar_drain(fd);
	rc = 0;
done:
	archive_read_free(a);
	tdestroy(links, free);
	return rc;
}
