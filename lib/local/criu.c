/* criu.c - memory snapshots (sbx-snapshot --memory, sbx-fork --memory):
 * refused with the reason this host gives. A local sandbox's processes
 * could only be checkpointed by CRIU; `criu check` says whether CRIU can
 * run here at all, and sbx does not checkpoint a sandbox with it: every
 * snapshot keeps files only ("memory": false). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local.h"

/* `criu check`'s status (127: it could not run) and, in line, its first
 * line saying "Error" without CRIU's "Error (file.c:N): ", else its last
 * line. */
static int
criu_check(char *line, size_t size)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char buf[1024], *p, *s, *e, *pick = NULL;
	int ep[2], status = 0;
	ssize_t n;
	pid_t pid;

	line[0] = '\0';
	if (pipe2(ep, O_CLOEXEC) < 0)
		return -1;
	fflush(NULL);
	if ((pid = fork()) < 0) {
		close(ep[0]);
		close(ep[1]);
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (null < 0 || dup2(null, 0) < 0 || dup2(ep[1], 1) < 0 ||
		    dup2(ep[1], 2) < 0)
			_exit(127);
		execlp("criu", "criu", "check", (char *)NULL);
		_exit(127);
	}
	close(ep[1]);
	b.limit = 65536;
	while ((n = read(ep[0], buf, sizeof buf)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		sbx_buf_add(&b, buf, (size_t)n);
	}
	close(ep[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	sbx_buf_add(&b, "", 1);
	for (p = b.data; p && *p; p = e ? e + 1 : NULL) {
		e = strchr(p, '\n');
		if (e)
			*e = '\0';
		if (!*p)
			continue;
		if (!pick || (!strstr(pick, "Error") && strstr(p, "Error")))
			pick = p;
	}
	if (pick) {
		/* "Error (criu/vdso.c:381): vdso: ..." -> "vdso: ..." */
		if (!strncmp(pick, "Error (", 7) && (s = strstr(pick, "): ")))
			pick = s + 3;
		snprintf(line, size, "%s", pick);
	}
	sbx_buf_release(&b);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 +
	    WTERMSIG(status);
}

int
sbx_memory_snapshot_refusal(const struct sbx_backend *be,
    struct sbx_err *err)
{
	char line[256];
	int rc;

	if (strcmp(be->name, "local"))
		return sbx_err_set(err, SBX_EX_USAGE, "the %s backend takes "
		    "no memory snapshot (--memory)", be->name);
	if ((rc = criu_check(line, sizeof line)) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot run criu:");
	if (rc == 127)
		return sbx_err_set(err, SBX_EX_USAGE, "memory snapshots are "
		    "not available on this host: they need CRIU, and criu "
		    "is not installed");
	if (rc)
		return sbx_err_set(err, SBX_EX_USAGE, "memory snapshots are "
		    "not available on this host: 'criu check' fails (%s)",
		    *line ? line : "no message");
	return sbx_err_set(err, SBX_EX_USAGE, "memory snapshots are not "
	    "available: sbx does not checkpoint a local sandbox's processes "
	    "with CRIU (snapshots keep files only)");
}
