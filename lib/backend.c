/* backend.c - the registry of backends, built twice: the static flavour
 * of the tools has local only and hands the others to the remote flavour
 * (linked with libcurl), which has them all (-DSBX_REMOTE) */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"

static const struct sbx_backend *const backends[] = {
	&sbx_local_backend,
#ifdef SBX_REMOTE
	&sbx_docker_backend,
#endif
};

#ifndef SBX_REMOTE
/* What only the remote flavour has. */
static const char *const remote_only[] = {"docker"};

/* Run the remote flavour of this tool with our argv and environment:
 * <dir>/remote/<tool>, or <dir>/../libexec/sbx/remote/<tool>. Callers
 * ask for a backend before they print, write or read anything, so the
 * other flavour can start over. Only returns by dying. */
static void __attribute__((noreturn))
reexec(const char *name)
{
	char self[PATH_MAX], in_tree[PATH_MAX + 64], installed[PATH_MAX + 64];
	char libexec[PATH_MAX + 32], *tool;
	char **argv = sbx_prog_argv();
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	int e1, e2;

	if (n > 0)
		self[n] = '\0';
	if (n <= 0 || !argv || !(tool = strrchr(self, '/')))
		sbx_die(SBX_EX_FAIL, "backend '%s' needs the remote flavour "
		    "of %s", name, sbx_prog_get());
	*tool++ = '\0';
	/* On the stack: sbx_die leaves nothing allocated behind. */
	snprintf(in_tree, sizeof in_tree, "%s/remote/%s", self, tool);
	snprintf(installed, sizeof installed, "%s/../libexec/sbx/remote/%s",
	    self, tool);
	snprintf(libexec, sizeof libexec, "%s/../libexec/sbx", self);
	execv(in_tree, argv);
	e1 = errno;
	execv(installed, argv);
	e2 = errno;
	/* Name the one that should have been there. */
	if (e1 != ENOENT || (e2 == ENOENT && access(libexec, F_OK) < 0)) {
		errno = e1;
		sbx_die(SBX_EX_FAIL, "backend '%s' needs '%s':", name, in_tree);
	}
	errno = e2;
	sbx_die(SBX_EX_FAIL, "backend '%s' needs '%s':", name, installed);
}
#endif

const char *
sbx_backend_default(void)
{
	return sbx_config_get("backend", "local");
}

const struct sbx_backend *
sbx_backend_get(const char *name, struct sbx_err *err)
{
	size_t i;

	for (i = 0; i < sizeof backends / sizeof backends[0]; i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
#ifndef SBX_REMOTE
	for (i = 0; i < sizeof remote_only / sizeof remote_only[0]; i++)
		if (!strcmp(remote_only[i], name))
			reexec(name);
#endif
	sbx_err_set(err, SBX_EX_USAGE, "unknown backend '%s'", name);
	return NULL;
}

const struct sbx_backend *
sbx_backend_of(const json_t *ref, struct sbx_err *err)
{
	const char *name = sbx_json_str(ref, "backend");

	if (!name) {
		sbx_err_set(err, SBX_EX_DATA, "ref names no backend");
		return NULL;
	}
	return sbx_backend_get(name, err);
}
