/* files.c - the file operations of the backends (sbx-sync's contract),
 * apart from the backend table so that only sbx-sync links libarchive */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx.h"

const struct sbx_files *
sbx_files_of(const json_t *ref, struct sbx_err *err)
{
	const struct sbx_backend *b = sbx_backend_of(ref, err);

	if (!b)
		return NULL;
	/* SBX_SYNC_PORTABLE=1: list and remove through the sandbox's shell,
	 * as a backend that can only exec does; tests run both ways. */
	static struct sbx_files portable;

	if (!strcmp(b->name, "local")) {
		const char *e = getenv("SBX_SYNC_PORTABLE");

		if (!e || strcmp(e, "1"))
			return &sbx_local_files;
		portable = sbx_local_files;
		portable.scan = sbx_portable_scan;
		portable.hash = sbx_portable_hash;
		portable.remove = sbx_portable_remove;
		return &portable;
	}
	if (b->files)
		return b->files;
	sbx_err_set(err, SBX_EX_USAGE, "backend '%s' cannot move files yet",
	    b->name);
	return NULL;
}

/* A job that fails writes "CODE MESSAGE" to its error pipe. */
int
sbx_job_wait(struct sbx_job *job, struct sbx_err *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char buf[512], *end;
	ssize_t n;
	int status = 0, rc = 0;
	long code;

	b.limit = sizeof err->msg + 16;
	if (job->errfd >= 0) {
		while ((n = read(job->errfd, buf, sizeof buf)) != 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				break;
			sbx_buf_add(&b, buf, (size_t)n);
		}
		close(job->errfd);
		job->errfd = -1;
	}
	while (job->pid > 0 && waitpid(job->pid, &status, 0) < 0 &&
	    errno == EINTR)
		;
	job->pid = -1;
	if (b.len) {
		sbx_buf_add(&b, "", 1);
		code = strtol(b.data, &end, 10);
		if (*end == ' ')
			end++;
		sbx_err_set(err, code > 0 && code < 256 ? (int)code :
		    SBX_EX_FAIL, "%s", end);
		rc = -1;
	} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		sbx_err_set(err, SBX_EX_FAIL, "the transfer failed (status "
		    "%d)", WIFEXITED(status) ? WEXITSTATUS(status) :
		    128 + WTERMSIG(status));
		rc = -1;
	}
	sbx_buf_release(&b);
	return rc;
}
