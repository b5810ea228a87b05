/* image.c - the docker backend's images from a directory: a root
 * filesystem, the same a local sandbox takes as --image, imported into
 * the engine as IMPORT_REPO:HASH (docker import, through the API) */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <nettle/sha2.h>

#include "docker.h"

/* What a local sandbox's commands find too. */
#define IMPORT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin" \
    ":/sbin:/bin"

struct walk {
	struct archive *out;      /* the tar stream; NULL: hash only */
	struct sha256_ctx sha;
};

/* One entry of the tree: hashed (what it is, not what it holds: a file
 * changed in place keeps neither its mtime nor its size), or written. */
static int
entry(struct walk *w, struct archive *disk, struct archive_entry *ae,
    struct sbx_err *err)
{
	static char buf[65536];
	char line[128];
	const char *s;
	la_ssize_t n;

	if (!w->out) {
		s = archive_entry_pathname(ae);
		sha256_update(&w->sha, strlen(s) + 1, (const uint8_t *)s);
		snprintf(line, sizeof line, "%o %lld %lld %lld %lld.%ld %lu",
		    (unsigned)archive_entry_mode(ae),
		    (long long)archive_entry_uid(ae),
		    (long long)archive_entry_gid(ae),
		    (long long)archive_entry_size(ae),
		    (long long)archive_entry_mtime(ae),
		    archive_entry_mtime_nsec(ae),
		    (unsigned long)archive_entry_rdev(ae));
		sha256_update(&w->sha, strlen(line) + 1, (const uint8_t *)line);
		s = archive_entry_symlink(ae) ? archive_entry_symlink(ae) : "";
		sha256_update(&w->sha, strlen(s) + 1, (const uint8_t *)s);
		return 0;
	}
	if (archive_write_header(w->out, ae) < ARCHIVE_WARN)
		return sbx_err_set(err, SBX_EX_FAIL, "%s", archive_error_string(
		    w->out));
	if (archive_entry_filetype(ae) != AE_IFREG)
		return 0;
	/* ARCHIVE_READDISK_NO_SPARSE: the data comes in order. */
	while ((n = archive_read_data(disk, buf, sizeof buf)) > 0)
		if (archive_write_data(w->out, buf, (size_t)n) != n)
			return sbx_err_set(err, SBX_EX_FAIL, "%s",
			    archive_error_string(w->out));
	if (n < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "%s",
		    archive_error_string(disk));
	return 0;
}

/* Every entry under root (a real path), named relative to it, with its
 * owner, mode and mtime; symlinks as links, sockets left out, and no
 * mount below it (a /proc there) entered. */
static int
walk(const char *root, struct walk *w, struct sbx_err *err)
{
	struct archive *disk = archive_read_disk_new();
	struct archive_entry *ae = archive_entry_new();
	size_t n = strlen(root);
	const char *name;
	char *rel;
	int r, rc = -1;

	archive_read_disk_set_symlink_physical(disk);
	archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS
	    | ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
	    ARCHIVE_READDISK_NO_FFLAGS | ARCHIVE_READDISK_NO_SPARSE);
	if (archive_read_disk_open(disk, root) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_FAIL, "%s", archive_error_string(disk));
		goto out;
	}
	for (;;) {
		r = archive_read_next_header2(disk, ae);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			sbx_err_set(err, SBX_EX_FAIL, "%s",
			    archive_error_string(disk));
			goto out;
		}
		archive_read_disk_descend(disk);
		if (archive_entry_filetype(ae) == AE_IFSOCK)
			continue;
		name = archive_entry_pathname(ae);
		if (strncmp(name, root, n))
			continue;
		for (name += n; *name == '/'; name++)
			;
		rel = sbx_xasprintf("./%s", name);
		archive_entry_copy_pathname(ae, rel);
		free(rel);
		/* Nothing of when it was read, nor of names: ids alone. */
		archive_entry_unset_atime(ae);
		archive_entry_unset_ctime(ae);
		archive_entry_unset_birthtime(ae);
		archive_entry_set_uname(ae, NULL);
		archive_entry_set_gname(ae, NULL);
		if (entry(w, disk, ae, err) < 0)
			goto out;
	}
	rc = 0;
out:
	archive_entry_free(ae);
	archive_read_free(disk);
	return rc;
}

/* The child that writes the tar into fd; its error, if any, to efd. */
static void __attribute__((noreturn))
writer(const char *root, int fd, int efd)
{
	struct walk w = {.out = archive_write_new()};
	struct sbx_err err = {0};
	int rc = -1;

	archive_write_set_format_pax(w.out);
	archive_write_set_format_option(w.out, "pax", "hdrcharset", "BINARY");
	archive_write_set_bytes_in_last_block(w.out, 1);
	if (archive_write_open_fd(w.out, fd) != ARCHIVE_OK)
		sbx_err_set(&err, SBX_EX_FAIL, "%s", archive_error_string(
		    w.out));
	else if (walk(root, &w, &err) == 0 && archive_write_close(w.out) !=
	    ARCHIVE_OK)
		sbx_err_set(&err, SBX_EX_FAIL, "%s", archive_error_string(
		    w.out));
	else if (!err.msg[0])
		rc = 0;
	if (rc < 0 && write(efd, err.msg, strlen(err.msg)) < 0)
		_exit(1);
	_exit(rc < 0);
}

/* POST the tree as the image tag: docker import of a tar stream that a
 * child writes while the engine reads it. */
static int
upload(struct dk *d, const char *root, const char *dir, const char *hash,
    struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "POST", .out_fd = -1,
	    .in_type = "application/x-tar"};
	struct sbx_http_resp rs = {0};
	int p[2] = {-1, -1}, e[2] = {-1, -1}, st, rc = -1;
	char why[256] = "", *chg = sbx_http_escape("ENV " IMPORT_PATH);
	const char *m;
	ssize_t n;
	pid_t pid;

	rq.path = sbx_xasprintf("/v%d.%d/images/create?fromSrc=-&repo=%s&"
	    "tag=%s&changes=%s", API_MAJOR, d->minor, IMPORT_REPO, hash, chg);
	free(chg);
	if (pipe2(p, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0 ||
	    (pid = fork()) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot import '%s':", dir);
		goto out;
	}
	if (pid == 0) {
		close(p[0]);
		close(e[0]);
		writer(root, p[1], e[1]);
	}
	close(p[1]);
	close(e[1]);
	p[1] = e[1] = -1;
	rq.in_fd = p[0];
	rc = sbx_http_do(d->h, &rq, &rs, err);
	/* The writer ends on a closed pipe if the engine stopped reading. */
	close(p[0]);
	p[0] = -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	n = read(e[0], why, sizeof why - 1);
	why[n > 0 ? n : 0] = '\0';
	if (*why)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot import '%s': %s",
		    dir, why);
	else if (rc == 0 && rs.status != 200)
		rc = sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot import a "
		    "directory", err);
	else if (rc == 0 && rs.body.data && (m = strstr(rs.body.data,
	    "\"error\":")))
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot import '%s': %.300s",
		    dir, m + 8);
	else if (rc == 0 && (!WIFEXITED(st) || WEXITSTATUS(st)))
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot import '%s': its "
		    "tar stream ended early", dir);
out:
	sbx_http_resp_release(&rs);
	free((char *)rq.path);
	for (n = 0; n < 2; n++) {
		if (p[n] >= 0)
			close(p[n]);
		if (e[n] >= 0)
			close(e[n]);
	}
	return rc;
}

/* A root filesystem with a shell, as the keep-alive and sbx-exec want:
 * /bin/sh resolved inside it, as the container will see it. */
static int
check_root(const char *dir, char **real, struct sbx_err *err)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT};
	struct stat st;
	int dfd, fd;

	if (!(*real = realpath(dir, NULL)) || stat(*real, &st) < 0 ||
	    !S_ISDIR(st.st_mode))
		return sbx_err_set(err, SBX_EX_USAGE, "image '%s' is not a "
		    "directory (an image of the engine never starts with '/' "
		    "or '.')", dir);
	if ((dfd = open(*real, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return sbx_err_set(err, SBX_EX_USAGE, "cannot open image "
		    "'%s':", dir);
	fd = (int)syscall(SYS_openat2, dfd, "bin/sh", &how, sizeof how);
	close(dfd);
	if (fd < 0)
		return sbx_err_set(err, SBX_EX_USAGE, "image '%s' has no "
		    "/bin/sh", dir);
	close(fd);
	return 0;
}

int
sbx_docker_import(struct dk *d, const char *dir, char **tag,
    struct sbx_err *err)
{
	struct walk w = {.out = NULL};
	struct sbx_http_resp rs;
	uint8_t sum[SHA256_DIGEST_SIZE];
	char hash[2 * IMPORT_HASH + 1], *real = NULL;
	int i, rc = -1;

	*tag = NULL;
	if (check_root(dir, &real, err) < 0)
		goto out;
	sha256_init(&w.sha);
	if (walk(real, &w, err) < 0) {
		char why[sizeof err->msg];

		snprintf(why, sizeof why, "%s", err->msg);
		sbx_err_set(err, SBX_EX_FAIL, "cannot import '%s': %s", dir,
		    why);
		goto out;
	}
	sha256_digest(&w.sha, sizeof sum, sum);
	for (i = 0; i < IMPORT_HASH; i++)
		snprintf(hash + 2 * i, 3, "%02x", sum[i]);
	*tag = sbx_xasprintf("%s:%s", IMPORT_REPO, hash);
	/* The same tree twice is one image, uploaded once. */
	if (sbx_docker_req(d, "GET", NULL, &rs, err, "/images/%s/json",
	    *tag) < 0)
		goto out;
	i = (int)rs.status;
	sbx_http_resp_release(&rs);
	if (i == 200)
		rc = 0;
	else if (i != 404)
		sbx_err_set(err, SBX_EX_FAIL, "cannot inspect image '%s' "
		    "(status %d)", *tag, i);
	else
		rc = upload(d, real, dir, hash, err);
out:
	if (rc < 0) {
		free(*tag);
		*tag = NULL;
	}
	free(real);
	return rc;
}
