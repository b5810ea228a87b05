/* build.c - sbx-image build -b docker: a build context (lib/ctxhash.c)
 * sent as a tar to the engine's /build, its output followed */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "docker.h"


/* One file of the context as a tar member named name: its content and
 * mode, root's, its mtime. */
static int
member(struct archive *a, int rootfd, const char *path, const char *name,
    struct sbx_err *err)
{
	static char buf[65536];
	struct archive_entry *ae = NULL;
	struct stat st;
	int64_t left;
	ssize_t n;
	int fd, rc = -1;

	if ((fd = openat(rootfd, path, O_RDONLY | O_CLOEXEC)) < 0 ||
	    fstat(fd, &st) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", path);
		goto out;
	}
	ae = archive_entry_new();
	archive_entry_set_pathname(ae, name);
	archive_entry_set_filetype(ae, AE_IFREG);
	archive_entry_set_perm(ae, st.st_mode & 07777);
	archive_entry_set_size(ae, st.st_size);
	archive_entry_set_mtime(ae, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	if (archive_write_header(a, ae) < ARCHIVE_WARN) {
		sbx_err_set(err, SBX_EX_FAIL, "%s", archive_error_string(a));
		goto out;
	}
	for (left = st.st_size; left > 0; left -= n) {
		n = read(fd, buf, left < (int64_t)sizeof buf ? (size_t)left :
		    sizeof buf);
		if (n < 0 && errno == EINTR) {
			n = 0;
			continue;
		}
		if (n <= 0) {
			sbx_err_set(err, SBX_EX_FAIL, n < 0 ? "cannot read "
			    "'%s':" : "'%s' changed while it was read", path);
			goto out;
		}
		if (archive_write_data(a, buf, (size_t)n) != n) {
			sbx_err_set(err, SBX_EX_FAIL, "%s",
			    archive_error_string(a));
			goto out;
		}
	}
	rc = 0;
out:
	archive_entry_free(ae);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The name the Dockerfile has in the tar: its own when it is in the
 * context, else one of its own beside the files (as docker build does). */
static char *
df_name(const struct sbx_ctx *c, int *listed)
{
	size_t i;

	*listed = 0;
	if (c->dockerfile_rel) {
		for (i = 0; i < c->n; i++)
			if (!strcmp(c->files[i], c->dockerfile_rel))
				*listed = 1;
		return sbx_xstrdup(c->dockerfile_rel);
	}
	return sbx_xasprintf(".dockerfile.sbx-%s", c->hash);
}

/* A Dockerfile from outside the context goes in under a name of its own;
 * the engine removes it before the build's COPY sees it when the tar's
 * .dockerignore names it (as docker build does): the context's
 * .dockerignore, and that line. */
static int
ignore_df(struct archive *a, int rootfd, const struct sbx_ctx *c,
    const char *df, struct sbx_err *err)
{
	struct archive_entry *ae = archive_entry_new();
	struct sbx_buf b = SBX_BUF_INIT;
	char chunk[8192];
	ssize_t n;
	size_t i;
	int fd = -1, own = 1, rc = -1;

	for (i = 0; i < c->n; i++)
		if (!strcmp(c->files[i], ".dockerignore"))
			own = 0;
	if (!own && (fd = openat(rootfd, ".dockerignore", O_RDONLY |
	    O_CLOEXEC)) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open '.dockerignore':");
		goto out;
	}
	while (fd >= 0 && (n = read(fd, chunk, sizeof chunk)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot read "
			    "'.dockerignore':");
			goto out;
		}
		sbx_buf_add(&b, chunk, (size_t)n);
	}
	/* One the context did not have goes too. */
	snprintf(chunk, sizeof chunk, "\n%s\n%s", df, own ?
	    ".dockerignore\n" : "");
	sbx_buf_add(&b, chunk, strlen(chunk));
	archive_entry_set_pathname(ae, ".dockerignore");
	archive_entry_set_filetype(ae, AE_IFREG);
	archive_entry_set_perm(ae, 0644);
	archive_entry_set_size(ae, (la_int64_t)b.len);
	if (archive_write_header(a, ae) < ARCHIVE_WARN ||
	    archive_write_data(a, b.data, b.len) != (la_ssize_t)b.len) {
		sbx_err_set(err, SBX_EX_FAIL, "%s", archive_error_string(a));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	sbx_buf_release(&b);
	archive_entry_free(ae);
	return rc;
}

/* The child that writes the tar into fd; its error, if any, to efd. */
static void __attribute__((noreturn))
writer(const struct sbx_ctx *c, int fd, int efd)
{
	struct archive *a = archive_write_new();
	struct sbx_err err = {0};
	char *df;
	size_t i;
	int rootfd, listed, rc = -1;

	df = df_name(c, &listed);
	archive_write_set_format_pax_restricted(a);
	archive_write_set_bytes_in_last_block(a, 1);
	if ((rootfd = open(c->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		sbx_err_set(&err, SBX_EX_FAIL, "cannot open '%s':", c->root);
	else if (archive_write_open_fd(a, fd) != ARCHIVE_OK)
		sbx_err_set(&err, SBX_EX_FAIL, "%s", archive_error_string(a));
	else {
		for (i = 0; i < c->n; i++) {
			/* ignore_df writes that one. */
			if (!c->dockerfile_rel && !strcmp(c->files[i],
			    ".dockerignore"))
				continue;
			if (member(a, rootfd, c->files[i], c->files[i],
			    &err) < 0)
				break;
		}
		if (i == c->n && !c->dockerfile_rel && ignore_df(a, rootfd, c,
		    df, &err) < 0)
			i = 0;
		if (i == c->n && (listed || member(a, AT_FDCWD, c->dockerfile,
		    df, &err) == 0)) {
			if (archive_write_close(a) != ARCHIVE_OK)
				sbx_err_set(&err, SBX_EX_FAIL, "%s",
				    archive_error_string(a));
			else
				rc = 0;
		}
	}
	if (rc < 0 && write(efd, err.msg, strlen(err.msg)) < 0)
		_exit(1);
	_exit(rc < 0);
}

/* {"stream": text}, {"status": ...} or {"aux": ...}: the text goes to
 * stderr as it comes. */
static void
follow(struct sbx_docker_stream *f, const json_t *j)
{
	const char *s;

	if (!f->quiet && (s = json_string_value(json_object_get(j,
	    "stream"))))
		fputs(s, stderr);
}

int
sbx_docker_image_exists(const char *name, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct dk d;
	char *esc = sbx_http_escape(name);
	int rc = -1;

	if (sbx_docker_open(&d, NULL, err) < 0)
		goto out;
	if (sbx_docker_req(&d, "GET", NULL, &rs, err, "/images/%s/json",
	    esc) == 0) {
		if (rs.status == 200)
			rc = 1;
		else if (rs.status == 404)
			rc = 0;
		else
			sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot inspect an "
			    "image", err);
	}
	sbx_http_resp_release(&rs);
	sbx_docker_close(&d);
out:
	free(esc);
	return rc;
}

int
sbx_docker_build(const struct sbx_ctx *c, const char *name,
    const json_t *buildargs, int quiet, struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "POST", .out_fd = -1,
	    .in_type = "application/x-tar", .on_body = sbx_docker_stream_body};
	struct sbx_http_resp rs = {0};
	struct sbx_docker_stream f = {.line = SBX_BUF_INIT, .quiet = quiet,
	    .on_msg = follow};
	struct dk d = {0};
	int p[2] = {-1, -1}, e[2] = {-1, -1}, st, rc = -1, listed, opened = 0;
	char why[256] = "", *t, *df, *args, *dfe, *argse, *js;
	ssize_t n;
	pid_t pid = -1;

	rq.on_body_arg = &f;
	df = df_name(c, &listed);
	js = buildargs ? json_dumps(buildargs, JSON_COMPACT) : NULL;
	t = sbx_http_escape(name);
	dfe = sbx_http_escape(df);
	argse = sbx_http_escape(js ? js : "{}");
	args = NULL;
	if (sbx_docker_open(&d, NULL, err) < 0)
		goto out;
	opened = 1;
	rq.path = args = sbx_xasprintf("/v%d.%d/build?t=%s&dockerfile=%s&"
	    "buildargs=%s&rm=1&forcerm=1", API_MAJOR, d.minor, t, dfe, argse);
	if (pipe2(p, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0 ||
	    (pid = fork()) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot send the context:");
		goto out;
	}
	if (pid == 0) {
		close(p[0]);
		close(e[0]);
		writer(c, p[1], e[1]);
	}
	close(p[1]);
	close(e[1]);
	p[1] = e[1] = -1;
	rq.in_fd = p[0];
	rc = sbx_http_do(d.h, &rq, &rs, err);
	/* The writer ends on a closed pipe if the engine stopped reading. */
	close(p[0]);
	p[0] = -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	n = read(e[0], why, sizeof why - 1);
	why[n > 0 ? n : 0] = '\0';
	sbx_docker_stream_end(&f);
	if (*why)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot send the context "
		    "'%s': %s", c->root, why);
	else if (rc == 0 && rs.status != 200)
		rc = sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot build", err);
	else if (rc == 0 && f.error[0])
		rc = sbx_err_set(err, SBX_EX_FAIL, "build of '%s' failed: %s",
		    name, f.error);
	else if (rc == 0 && (!WIFEXITED(st) || WEXITSTATUS(st)))
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot send the context "
		    "'%s': its tar stream ended early", c->root);
out:
	sbx_http_resp_release(&rs);
	sbx_buf_release(&f.line);
	if (opened)
		sbx_docker_close(&d);
	for (n = 0; n < 2; n++) {
		if (p[n] >= 0)
			close(p[n]);
		if (e[n] >= 0)
			close(e[n]);
	}
	free(args);
	free(t);
	free(df);
	free(dfe);
	free(argse);
	free(js);
	return rc;
}
