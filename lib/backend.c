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
	&sbx_e2b_backend,
#endif
};

#ifndef SBX_REMOTE
/* What only the remote flavour has. */
static const char *const remote_only[] = {"docker", "e2b"};

/* Run the remote flavour of this tool with our argv and environment:
 * <dir>/remote/<tool>, or <dir>/../libexec/sbx/remote/<tool>. Returns
 * only when neither could run, with errno of each, and in_tree and
 * installed (PATH_MAX + 64 each) naming them. */
static int
try_remote(char *in_tree, char *installed, int *e1, int *e2)
{
	char self[PATH_MAX], *tool;
	char **argv = sbx_prog_argv();
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

	if (n <= 0 || !argv)
		return -1;
	self[n] = '\0';
	if (!(tool = strrchr(self, '/')))
		return -1;
	*tool++ = '\0';
	snprintf(in_tree, PATH_MAX + 64, "%s/remote/%s", self, tool);
	snprintf(installed, PATH_MAX + 64, "%s/../libexec/sbx/remote/%s",
	    self, tool);
	execv(in_tree, argv);
	*e1 = errno;
	execv(installed, argv);
	*e2 = errno;
	return 0;
}

/* try_remote, or die naming the file that should have been there.
 * Callers ask for a backend before they print, write or read anything,
 * so the other flavour can start over. */
static void __attribute__((noreturn))
reexec(const char *name)
{
	/* On the stack: sbx_die leaves nothing allocated behind. */
	char in_tree[PATH_MAX + 64], installed[PATH_MAX + 64];
	char libexec[PATH_MAX + 96];
	int e1, e2;

	if (try_remote(in_tree, installed, &e1, &e2) < 0)
		sbx_die(SBX_EX_FAIL, "backend '%s' needs the remote flavour "
		    "of %s", name, sbx_prog_get());
	snprintf(libexec, sizeof libexec, "%s", installed);
	*strrchr(libexec, '/') = '\0';
	*strrchr(libexec, '/') = '\0';
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

static const struct {
	unsigned cap;
	const char *name;  /* in sbx-ls --backends */
	const char *what;  /* in "backend 'B' cannot WHAT" */
} caps[] = {
	{SBX_CAP_PTY, "pty", "give a command a terminal (-t)"},
	{SBX_CAP_STDIN, "stdin", "forward standard input (-i)"},
	{SBX_CAP_NET_DENY, "network_deny", "deny the network (--network "
	    "deny)"},
	{SBX_CAP_NET_ALLOW, "network_allow", "allow the network (--network "
	    "allow)"},
	{SBX_CAP_MEMORY, "memory", "limit memory (--memory)"},
	{SBX_CAP_CPUS, "cpus", "limit CPUs (--cpus)"},
	{SBX_CAP_PIDS, "pids", "limit processes (--pids)"},
	{SBX_CAP_TIMEOUT, "timeout", "end an idle sandbox (--timeout)"},
	{SBX_CAP_RUNTIME, "runtime", "choose a runtime (--runtime)"},
	{SBX_CAP_PULL, "pull", "pull images (--pull)"},
	{SBX_CAP_SUSPEND, "suspend", "suspend a sandbox (--mode suspend)"},
	{SBX_CAP_STOP, "stop", "stop a sandbox and keep its files (--mode "
	    "stop)"},
	{SBX_CAP_FILES, "files", "move files (sbx-sync)"},
	{SBX_CAP_IDLE, "idle", "tell how long a sandbox was idle "
	    "(--idle-for)"},
	{SBX_CAP_ZSTD, "zstd", "take a zstd stream (--compress zstd)"},
	{SBX_CAP_NAME, "name", "name a sandbox (--name)"},
	{SBX_CAP_KEEP, "keep", "keep a killed sandbox's files (--keep)"},
};

int
sbx_backend_need(const struct sbx_backend *be, unsigned want,
    struct sbx_err *err)
{
	size_t i;

	for (i = 0; i < sizeof caps / sizeof caps[0]; i++)
		if ((want & caps[i].cap) && !(be->caps & caps[i].cap))
			return sbx_err_set(err, SBX_EX_USAGE, "backend '%s' "
			    "cannot %s", be->name, caps[i].what);
	return 0;
}

int
sbx_backend_check_spec(const struct sbx_backend *be,
    const struct sbx_spec *spec, struct sbx_err *err)
{
	unsigned want = spec->network == SBX_NET_ALLOW ? SBX_CAP_NET_ALLOW :
	    SBX_CAP_NET_DENY;

	want |= spec->memory ? SBX_CAP_MEMORY : 0;
	want |= spec->cpus_milli ? SBX_CAP_CPUS : 0;
	want |= spec->pids ? SBX_CAP_PIDS : 0;
	want |= spec->timeout ? SBX_CAP_TIMEOUT : 0;
	want |= spec->runtime ? SBX_CAP_RUNTIME : 0;
	want |= spec->pull ? SBX_CAP_PULL : 0;
	want |= spec->name ? SBX_CAP_NAME : 0;
	return sbx_backend_need(be, want, err);
}

const char *
sbx_backend_pause_default(const struct sbx_backend *be)
{
	return be->caps & SBX_CAP_SUSPEND ? "suspend" :
	    be->caps & SBX_CAP_STOP ? "stop" : "none";
}

int
sbx_backend_each(int (*fn)(json_t *o, void *arg), void *arg)
{
	const char *dflt = sbx_backend_default();
	size_t i, k;
	json_t *o, *c;
	int rc = 0;
#ifndef SBX_REMOTE
	char in_tree[PATH_MAX + 64], installed[PATH_MAX + 64];
	int e1, e2;

	/* The remote flavour knows them all; without it, what is here. */
	try_remote(in_tree, installed, &e1, &e2);
#endif
	for (i = 0; !rc && i < sizeof backends / sizeof backends[0]; i++) {
		c = json_object();
		for (k = 0; k < sizeof caps / sizeof caps[0]; k++)
			json_object_set_new(c, caps[k].name, json_boolean(
			    backends[i]->caps & caps[k].cap));
		o = json_pack("{sssbssso}", "backend", backends[i]->name,
		    "default", !strcmp(backends[i]->name, dflt), "pause",
		    sbx_backend_pause_default(backends[i]), "caps", c);
		rc = fn(o, arg);
		json_decref(o);
	}
	return rc;
}
