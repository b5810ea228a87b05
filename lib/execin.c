/* execin.c - one exec of a command, its stdin given as bytes and its
 * output captured, through the backend contract alone: what sbx-shell's
 * calls, qemu's mtimes and CA and the like run in a sandbox (its own
 * file: the file operations of portable.c are linked only where files
 * move) */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "msg.h"

/* One exec of argv in cwd (NULL: the workdir), as user (NULL: the
 * sandbox's), its stdin the bytes of in (when not NULL), its output
 * captured; its exit code, or -1 with err. */
int
sbx_exec_in(const struct sbx_backend *be, const json_t *ref,
    char *const argv[], const char *cwd, const char *user,
    const struct sbx_buf *in, uint64_t timeout_ms, struct sbx_exec_result *r,
    struct sbx_err *err)
{
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4u * SBX_MSG_MAX};
	int saved = -1, mfd = -1, rc;

	memset(r, 0, sizeof *r);
	o.timeout_ms = timeout_ms;
	o.cwd = cwd;
	o.user = user;
	if (in) {
		/* Our stdin for the exec's: a file of the bytes. */
		/* (A closed stdin stays closed after.) */
		if ((mfd = memfd_create("sbx-input", MFD_CLOEXEC)) < 0 ||
		    sbx_write_all(mfd, in->data, in->len) < 0 ||
		    lseek(mfd, 0, SEEK_SET) < 0 ||
		    ((saved = fcntl(0, F_DUPFD_CLOEXEC, 3)) < 0 &&
		    errno != EBADF) || dup2(mfd, 0) < 0) {
			if (mfd >= 0)
				close(mfd);
			if (saved >= 0)
				close(saved);
			return sbx_err_set(err, SBX_EX_FAIL, "cannot make the "
			    "command's input:");
		}
		o.interactive = 1;
	}
	rc = be->ops->exec(ref, (char **)argv, &o, r, err);
	if (in) {
		if (saved >= 0) {
			dup2(saved, 0);
			close(saved);
		} else {
			close(0);
		}
		close(mfd);
	}
	/* A command the sandbox lacks is an error of some backends' exec,
	 * an exit status of others: the same here. */
	if (rc < 0 && (err->code == SBX_EX_NOTFOUND ||
	    err->code == SBX_EX_NOEXEC))
		return err->code;
	return rc < 0 ? -1 : r->exit_code;
}
