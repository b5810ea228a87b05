/* flavour.c - which build of a tool runs (static with the local backend,
 * or remote with every backend), and where our sibling binaries are */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"

char *
sbx_sibling(const char *rel)
{
	char self[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

	if (n <= 0)
		return NULL;
	self[n] = '\0';
	if (!(slash = strrchr(self, '/')))
		return NULL;
	*slash = '\0';
	return sbx_xasprintf("%s/%s", self, rel);
}

/* Run the remote flavour of this tool with our argv and environment:
 * <dir>/remote/<tool>, or <dir>/../libexec/sbx/remote/<tool>. Returns
 * only when neither could run, with *in_tree and *installed naming them
 * (malloc'd; NULL when we cannot tell where we are) and errno of each. */
static void
try_remote(char **in_tree, char **installed, int *e1, int *e2)
{
	char **argv = sbx_prog_argv();
	const char *tool = sbx_prog_get();
	char *p;

	*in_tree = *installed = NULL;
	if (!argv)
		return;
	p = sbx_xasprintf("remote/%s", tool);
	*in_tree = sbx_sibling(p);
	free(p);
	p = sbx_xasprintf("../libexec/sbx/remote/%s", tool);
	*installed = sbx_sibling(p);
	free(p);
	if (!*in_tree || !*installed)
		return;
	execv(*in_tree, argv);
	*e1 = errno;
	execv(*installed, argv);
	*e2 = errno;
}

void
sbx_flavour_pick(const char *backend)
{
	const struct sbx_backend *be = sbx_backend_find(backend);
	char *in_tree, *installed, *libexec;
	int e1 = 0, e2 = 0;

	if (!be || be->ops)
		return;
	try_remote(&in_tree, &installed, &e1, &e2);
	if (!in_tree || !installed)
		sbx_die(SBX_EX_FAIL, "backend '%s' needs the remote flavour "
		    "of %s", backend, sbx_prog_get());
	/* Installed, libexec/sbx is there: name the file it lacks. */
	libexec = sbx_xstrdup(installed);
	*strrchr(libexec, '/') = '\0';
	*strrchr(libexec, '/') = '\0';
	if (e1 != ENOENT || (e2 == ENOENT && access(libexec, F_OK) < 0)) {
		errno = e1;
		sbx_die(SBX_EX_FAIL, "backend '%s' needs '%s':", backend,
		    in_tree);
	}
	errno = e2;
	sbx_die(SBX_EX_FAIL, "backend '%s' needs '%s':", backend, installed);
}

void
sbx_flavour_pick_target(const struct sbx_target *t, int nids)
{
	const char *path = t->state_path, *env = getenv("SBX_STATE");

	int ids = nids || t->id || (!sbx_ref_explicit(t) &&
	    sbx_stdin_has_ids());

	/* An id without --backend is looked for in every backend. */
	if (ids && !t->backend)
		sbx_flavour_pick_all();
	sbx_flavour_pick(t->backend ? t->backend : sbx_backend_default());
	if (ids)
		return;
	if (!path)
		path = env && *env ? env : SBX_STATE_DEFAULT;
	sbx_flavour_pick_state(path);
}

void
sbx_flavour_pick_state(const char *path)
{
	struct sbx_state st;
	struct sbx_err err;

	/* Said again, with its exit code, where the tool reads it. */
	if (sbx_state_read(&st, path, &err) < 0)
		return;
	sbx_flavour_pick(sbx_json_str(json_object_get(st.root, "ref"),
	    "backend"));
	sbx_state_release(&st);
}

void
sbx_flavour_pick_all(void)
{
	const struct sbx_backend *be;
	char *in_tree, *installed;
	int e1, e2;
	size_t i;

	for (i = 0; (be = sbx_backend_at(i)) && be->ops; i++)
		;
	if (!be)
		return;
	try_remote(&in_tree, &installed, &e1, &e2);
	/* Without it, the tool tells what is here. */
	free(in_tree);
	free(installed);
}
