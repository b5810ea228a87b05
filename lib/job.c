/* job.c - a job: a child process with a pipe for its data and one for
 * its failure, as the backends' file transfers run them */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

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

void
sbx_job_fail(int errfd, const struct sbx_err *err)
{
	char line[sizeof err->msg + 16];
	int n = snprintf(line, sizeof line, "%d %s", err->code ? err->code :
	    SBX_EX_FAIL, err->msg);

	if (n > 0 && write(errfd, line, (size_t)n) < 0)
		_exit(SBX_EX_FAIL);
	_exit(err->code ? err->code : SBX_EX_FAIL);
}

pid_t
sbx_job_fork(int to_child, int *fd, int *child_end, struct sbx_job *job,
    struct sbx_err *err)
{
	int p[2], ep[2];
	pid_t pid;

	job->pid = -1;
	job->errfd = -1;
	if (pipe2(p, O_CLOEXEC) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "pipe:");
	if (pipe2(ep, O_CLOEXEC) < 0) {
		close(p[0]);
		close(p[1]);
		return sbx_err_set(err, SBX_EX_FAIL, "pipe:");
	}
	fflush(NULL);
	if ((pid = fork()) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "fork:");
		close(p[0]);
		close(p[1]);
		close(ep[0]);
		close(ep[1]);
		return -1;
	}
	*child_end = to_child ? p[0] : p[1];
	*fd = to_child ? p[1] : p[0];
	if (pid == 0) {
		close(*fd);
		close(ep[0]);
		job->errfd = ep[1];
		return 0;
	}
	close(*child_end);
	close(ep[1]);
	job->pid = pid;
	job->errfd = ep[0];
	return pid;
}

int
sbx_job_transfer(int to_child, int (*child)(const json_t *ref,
    const char *dir, const struct sbx_manifest *paths, int fd,
    struct sbx_err *err), const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	struct sbx_err cerr = {0};
	int cfd;
	pid_t pid = sbx_job_fork(to_child, fd, &cfd, job, err);

	if (pid == 0) {
		if (child(ref, dir, paths, cfd, &cerr) < 0)
			sbx_job_fail(job->errfd, &cerr);
		_exit(0);
	}
	return pid < 0 ? -1 : 0;
}

pid_t
sbx_guard_start(int *wfd, int *done)
{
	int p[2], null;
	pid_t pid;
	char c = 0;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	if ((pid = fork()) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		setsid();
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		close(p[1]);
		/* Nothing of our caller's held open (a state file's lock, a
		 * pipe it waits on), nor its working directory. */
		if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		if (dup2(p[0], 3) == 3)
			close_range(4, ~0u, 0);
		if (chdir("/") < 0)
			_exit(1);
		while (read(3, &c, 1) < 0 && errno == EINTR)
			;
		/* "d": it is done; EOF alone: its caller is gone. */
		*done = c == 'd';
		return 0;
	}
	close(p[0]);
	*wfd = p[1];
	return pid;
}

void
sbx_guard_end(pid_t pid, int wfd, int done)
{
	if (pid <= 0)
		return;
	if (done && write(wfd, "d", 1) != 1) {
		/* It undoes, as it would have had we died. */
	}
	close(wfd);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}
