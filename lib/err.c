/* err.c - the program name, diagnostics on stderr and the library's errors:
 * the ground floor, below every other module */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

int sbx_quiet, sbx_verbose;

static const char *prog = "sbx";
static char **prog_argv;
/* Called with 0 before a diagnostic, 1 after (progress.c). */
static void (*diag_hook)(int after);

void
sbx_diag_hook_set(void (*fn)(int after))
{
	diag_hook = fn;
}

void
sbx_prog_set(char **argv)
{
	const char *p = strrchr(argv[0], '/');

	prog_argv = argv;

	prog = p ? p + 1 : argv[0];
	/* getopt's own messages name the tool the same way. */
	argv[0] = (char *)prog;
	/* A write to a closed pipe is an error we report, not a signal. */
	signal(SIGPIPE, SIG_IGN);
}

/* The kernel's struct sigaction (rt_sigaction(2)), not libc's. */
struct ksigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	unsigned long mask;
};

static void
undo_ignored(int s)
{
	struct ksigaction now, dfl;

	memset(&dfl, 0, sizeof dfl);
	dfl.handler = SIG_DFL;
	if (syscall(SYS_rt_sigaction, s, NULL, &now, sizeof now.mask) == 0 &&
	    now.handler == SIG_IGN)
		syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof dfl.mask);
}

void
sbx_sig_default(void)
{
	struct sigaction sa;
	sigset_t none;
	int s;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	/* SIGKILL and SIGSTOP refuse: nothing to undo there. libc refuses
	 * its own two (32 and 33, its threads' signals), but a caller may
	 * have left them ignored, and an ignored signal stays so across
	 * execve: the kernel is asked directly, and only to undo that. */
	for (s = 1; s < NSIG; s++)
		if (sigaction(s, &sa, NULL) < 0 && errno == EINVAL)
			undo_ignored(s);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

const char *
sbx_prog_get(void)
{
	return prog;
}

char **
sbx_prog_argv(void)
{
	return prog_argv;
}

/* redraw: 0 for a message that ends the program. */
static void
vmsg(const char *fmt, va_list ap, int errnum, int redraw)
{
	size_t n = strlen(fmt);

	if (diag_hook)
		diag_hook(0);
	fprintf(stderr, "%s: ", sbx_prog_get());
	vfprintf(stderr, fmt, ap);
	if (n && fmt[n - 1] == ':')
		fprintf(stderr, " %s", strerror(errnum));
	fputc('\n', stderr);
	if (diag_hook && redraw)
		diag_hook(1);
}

void
sbx_die(int code, const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	va_start(ap, fmt);
	vmsg(fmt, ap, e, 0);
	va_end(ap);
	exit(code);
}

void
sbx_warn(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	if (sbx_quiet)
		return;
	va_start(ap, fmt);
	vmsg(fmt, ap, e, 1);
	va_end(ap);
}

void
sbx_note(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	if (!sbx_verbose || sbx_quiet)
		return;
	va_start(ap, fmt);
	vmsg(fmt, ap, e, 1);
	va_end(ap);
}

int
sbx_err_set(struct sbx_err *err, int code, const char *fmt, ...)
{
	int e = errno;
	size_t n = strlen(fmt), len;
	va_list ap;

	if (!err)
		return -1;
	err->code = code;
	err->hint[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	len = strlen(err->msg);
	if (n && fmt[n - 1] == ':' && len < sizeof err->msg)
		snprintf(err->msg + len, sizeof err->msg - len, " %s",
		    strerror(e));
	errno = e;
	return -1;
}

void
sbx_err_hint(struct sbx_err *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err->hint, sizeof err->hint, fmt, ap);
	va_end(ap);
}

void
sbx_die_err(const struct sbx_err *err)
{
	if (diag_hook)
		diag_hook(0);
	fprintf(stderr, "%s: %s\n", sbx_prog_get(), err->msg);
	/* As git's: what to do, apart from the one-line error. */
	if (err->hint[0])
		fprintf(stderr, "hint: %s\n", err->hint);
	exit(err->code ? err->code : SBX_EX_FAIL);
}
