/* worker.c - the backend's lifecycle calls, each in a forked child.
 *
 * The local backend starts a sandbox with a raw clone(2); a child cloned
 * from a process with threads inherits the locks those threads held
 * (malloc's, glibc's setxid broadcast) and hangs on them. A fork(2)
 * child starts with one thread and glibc's atfork state, so it may
 * clone safely; and the sandbox's init is then its child, not sbxd's:
 * when the worker exits it goes to pid 1 and is no zombie of sbxd.
 * The answer comes back as one length-prefixed JSON document. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbxd.h"

enum op { OP_CREATE, OP_KILL, OP_PAUSE, OP_RESUME };

static void __attribute__((noreturn))
worker(enum op op, const struct sbx_spec *spec, json_t *ref, int fd)
{
	struct sbx_err err = {0};
	json_t *out_ref = NULL, *j;
	sigset_t none;
	uint32_t len;
	char *s;
	int rc;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (fd != 3 && (dup2(fd, 3) < 0 || close(fd) < 0))
		_exit(125);
	close_range(4, ~0U, 0);
	switch (op) {
	case OP_CREATE:
		rc = sbxd.be->create(spec, &out_ref, &err);
		break;
	case OP_KILL:
		rc = sbxd.be->kill(ref, 0, &err);
		break;
	case OP_PAUSE:
		rc = sbxd.be->pause(ref, 0, &err);
		break;
	default:
		rc = sbxd.be->resume(ref, &err);
		break;
	}
	j = json_pack("{s:i,s:i,s:s,s:O?}", "rc", rc, "code", err.code,
	    "msg", rc < 0 ? err.msg : "", "ref", op == OP_CREATE ? out_ref :
	    ref);
	s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!s)
		_exit(125);
	len = (uint32_t)strlen(s);
	if (sbx_write_all(3, &len, sizeof len) < 0 ||
	    sbx_write_all(3, s, len) < 0)
		_exit(125);
	_exit(0);
}

/* Read n bytes, watching the worker: other forks may hold the pipe's
 * write end, so its EOF alone does not say the worker is gone. */
static int
read_worker(int fd, pid_t pid, void *buf, size_t n, int *status)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		struct pollfd p = {fd, POLLIN, 0};
		int pr = poll(&p, 1, 200);

		if (pr < 0 && errno != EINTR)
			return -1;
		if (pr <= 0) {
			if (*status == -1 && waitpid(pid, status, WNOHANG) ==
			    pid) {
				/* Gone: what it wrote is in the pipe. */
				if (!(poll(&p, 1, 0) > 0))
					return -1;
			}
			continue;
		}
		r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static int
call(enum op op, const struct sbx_spec *spec, json_t **ref,
    struct sbx_err *err)
{
	int fds[2], status = -1, rc = -1;
	uint32_t len = 0;
	char *s = NULL;
	json_t *j = NULL, *r;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot make a pipe:");
	pid = fork();
	if (pid == 0)
		worker(op, spec, ref ? *ref : NULL, fds[1]);
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot fork:");
	}
	if (read_worker(fds[0], pid, &len, sizeof len, &status) == 0 &&
	    len < (1u << 24)) {
		s = sbx_xmalloc((size_t)len + 1);
		if (read_worker(fds[0], pid, s, len, &status) == 0)
			j = json_loadb(s, len, 0, NULL);
	}
	close(fds[0]);
	if (status == -1)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	free(s);
	if (!json_is_object(j)) {
		sbx_err_set(err, SBX_EX_FAIL, "the backend's worker ended "
		    "early");
		goto out;
	}
	rc = (int)sbx_json_int(j, "rc", -1);
	if (rc < 0) {
		err->code = (int)sbx_json_int(j, "code", SBX_EX_FAIL);
		snprintf(err->msg, sizeof err->msg, "%s",
		    sbx_json_str(j, "msg") ? sbx_json_str(j, "msg") : "");
		goto out;
	}
	r = json_object_get(j, "ref");
	if (op == OP_CREATE)
		*ref = json_incref(r);
	else if (json_is_object(r) && json_is_object(*ref))
		json_object_update(*ref, r);
out:
	json_decref(j);
	return rc;
}

int
sbxd_be_create(const struct sbx_spec *spec, json_t **ref,
    struct sbx_err *err)
{
	*ref = NULL;
	return call(OP_CREATE, spec, ref, err);
}

int
sbxd_be_kill(json_t *ref, struct sbx_err *err)
{
	return call(OP_KILL, NULL, &ref, err);
}

int
sbxd_be_pause(json_t *ref, struct sbx_err *err)
{
	return call(OP_PAUSE, NULL, &ref, err);
}

int
sbxd_be_resume(json_t *ref, struct sbx_err *err)
{
	return call(OP_RESUME, NULL, &ref, err);
}
