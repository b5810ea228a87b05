/* shellremote.c - sbx-shell on a backend whose sandboxes do not run our
 * agent as PID 1 (docker, e2b): the static sbx-init is copied into the
 * sandbox once, started there as the sessions' server, and each call is
 * an exec of its client, through the backend contract alone */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "internal.h"
#include "local/local.h"

#define RDIR "/tmp/.sbx-shell"
#define RBIN RDIR "/sbx-init"
#define RSOCK RDIR "/sock"

/* The agent into RDIR of the sandbox, as one tar through its files. */
static int
upload(const json_t *ref, struct sbx_err *err)
{
	const struct sbx_files *f = sbx_files_of(ref, err);
	struct archive *a = NULL;
	struct archive_entry *e = NULL;
	struct sbx_job job;
	struct stat st;
	char buf[65536];
	ssize_t n;
	int in, fd = -1, rc = -1;

	if (!f)
		return -1;
	if ((in = sbx_local_init_open(err)) < 0)
		return -1;
	if (fstat(in, &st) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot read the agent:");
		goto out;
	}
	if (f->put_archive(ref, "/tmp", &fd, &job, err) < 0)
		goto out;
	a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	if (archive_write_open_fd(a, fd) != ARCHIVE_OK)
		goto bad;
	e = archive_entry_new();
	archive_entry_set_pathname(e, ".sbx-shell");
	archive_entry_set_filetype(e, AE_IFDIR);
	/* As /tmp: the image's user, whoever it is, makes the socket. */
	archive_entry_set_perm(e, 01777);
	if (archive_write_header(a, e) < ARCHIVE_WARN)
		goto bad;
	archive_entry_clear(e);
	archive_entry_set_pathname(e, ".sbx-shell/sbx-init");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0755);
	archive_entry_set_size(e, st.st_size);
	if (archive_write_header(a, e) < ARCHIVE_WARN)
		goto bad;
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (archive_write_data(a, buf, (size_t)n) != n)
			goto bad;
	if (n < 0 || archive_write_close(a) != ARCHIVE_OK)
		goto bad;
	close(fd);
	fd = -1;
	rc = sbx_job_wait(&job, err);
	goto out;
bad:
	sbx_err_set(err, SBX_EX_FAIL, "cannot copy the agent into the "
	    "sandbox: %s", archive_error_string(a) ? archive_error_string(a) :
	    strerror(errno));
	if (fd >= 0) {
		close(fd);
		fd = -1;
		sbx_job_wait(&job, NULL);
	}
out:
	if (e)
		archive_entry_free(e);
	if (a)
		archive_write_free(a);
	if (fd >= 0)
		close(fd);
	close(in);
	return rc;
}

/* The client's answer (a SBX_MSG_SHELLREP frame in hex) as a message. */
static int
unframe(const struct sbx_buf *out, struct sbx_msg *m)
{
	struct sbx_buf d = SBX_BUF_INIT;
	uint32_t h[2];
	int rc = -1;

	if (sbx_hex_get(out->data ? out->data : "", out->len, &d) < 0 ||
	    d.len < sizeof h)
		goto out;
	memcpy(h, d.data, sizeof h);
	if (h[0] != d.len - sizeof h || h[1] != SBX_MSG_SHELLREP)
		goto out;
	memset(m, 0, sizeof *m);
	m->type = h[1];
	m->len = h[0];
	m->data = sbx_xmalloc(m->len + 1);
	memcpy(m->data, d.data + sizeof h, m->len);
	m->data[m->len] = '\0';
	rc = 0;
out:
	sbx_buf_release(&d);
	return rc;
}

int
sbx_shell_remote(const json_t *ref, const struct sbx_shell_req *rq,
    json_t **out, struct sbx_err *err)
{
	static char *const call[] = {RBIN, "--shell-call", RSOCK, NULL};
	static char *const serve[] = {RBIN, "--shell-server", RSOCK, NULL};
	const struct sbx_backend *be = sbx_backend_of(ref, err);
	struct sbx_buf body = SBX_BUF_INIT, in = SBX_BUF_INIT;
	struct sbx_exec_result r;
	struct sbx_msg m = {0};
	uint32_t h[2];
	int c, tries, rc = -1;

	*out = NULL;
	if (!be)
		return -1;
	sbx_shell_frame(&body, rq);
	h[0] = (uint32_t)body.len;
	h[1] = SBX_MSG_SHELL;
	sbx_hex_put(&in, h, sizeof h);
	sbx_hex_put(&in, body.data, body.len);
	sbx_buf_add(&in, "\n", 1);
	for (tries = 0; ; tries++) {
		/* The wait is the agent's; a lost answer is not waited for
		 * forever. */
		c = sbx_exec_in(be, ref, call, NULL, NULL, &in,
		    (uint64_t)rq->wait_ms + 60000, &r, err);
		if (c == 0)
			break;
		if (c < 0)
			goto out;
		/* No agent there yet (127), or no server (3): the agent in,
		 * its server started (it returns once it listens), again. */
		if (tries || (c != SBX_EX_NOSANDBOX && c != SBX_EX_NOTFOUND &&
		    c != SBX_EX_NOEXEC)) {
			sbx_err_set(err, SBX_EX_FAIL, "the sandbox's shell agent "
			    "failed (exit %d)%s%.*s", c, r.err.len ? ": " : "",
			    (int)(r.err.len && r.err.data[r.err.len - 1] == '\n' ?
			    r.err.len - 1 : r.err.len), r.err.data ? r.err.data :
			    "");
			goto out;
		}
		sbx_buf_release(&r.out);
		sbx_buf_release(&r.err);
		if (c != SBX_EX_NOSANDBOX && upload(ref, err) < 0)
			goto out;
		c = sbx_exec_in(be, ref, serve, NULL, NULL, NULL, 30000, &r,
		    err);
		if (c != 0) {
			if (c > 0)
				sbx_err_set(err, SBX_EX_FAIL, "cannot start the "
				    "sandbox's shell agent (exit %d)", c);
			goto out;
		}
		sbx_buf_release(&r.out);
		sbx_buf_release(&r.err);
	}
	if (unframe(&r.out, &m) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "malformed answer from the "
		    "sandbox's shell agent");
		goto out;
	}
	rc = sbx_shell_answer(&m, rq->op, out, err);
out:
	sbx_msg_release(&m);
	sbx_buf_release(&r.out);
	sbx_buf_release(&r.err);
	sbx_buf_release(&body);
	sbx_buf_release(&in);
	return rc;
}
