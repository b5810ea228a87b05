/* sbx-cp - copy files and directories into, out of and between sandboxes */
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx-cp [-qv] [-b backend] [-s file] src dst\n";

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"quiet", no_argument, NULL, 'q'},
	{"state", required_argument, NULL, 's'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* An operand: a sandbox's path ("SANDBOX:PATH", ":PATH"), or one here.
 * A name with a '/' before its first ':' ("./a:b") is one here. */
struct operand {
	const char *arg;
	char *sandbox;  /* NULL: here; "": the one of -s (or its default) */
	const char *path;
};

static void
parse_operand(struct operand *op, const char *arg)
{
	const char *colon = strchr(arg, ':');

	op->arg = arg;
	op->sandbox = NULL;
	op->path = arg;
	if (!*arg)
		sbx_usage_error(usage, "an empty operand");
	if (strlen(arg) >= 4096)
		sbx_usage_error(usage, "operand '%.40s...' is too long", arg);
	if (!colon || *arg == '/' || *arg == '.' || memchr(arg, '/',
	    (size_t)(colon - arg)))
		return;
	op->sandbox = sbx_xasprintf("%.*s", (int)(colon - arg), arg);
	op->path = colon + 1;
}

/* The sandbox of an operand, checked to exist (exit 3 when it does not)
 * and to move files; a relative path is the sandbox's workdir's. */
static json_t *
resolve(struct operand *op, const char *backend, const char *state,
    char **path)
{
	struct sbx_target t = {.backend = backend};
	struct sbx_err err = {0};
	const struct sbx_backend *be;
	const char *used = NULL, *wd;
	json_t *ref, *info;

	if (*op->sandbox)
		t.id = op->sandbox;
	else
		t.state_path = state;
	if (!(ref = sbx_ref_resolve(&t, &used, &err)))
		sbx_die_err(&err);
	if (!*op->sandbox && sbx_ref_check_backend(ref, backend, used,
	    &err) < 0)
		sbx_die_err(&err);
	sbx_flavour_pick(sbx_json_str(ref, "backend"));
	if (!(be = sbx_backend_of(ref, &err)) ||
	    sbx_backend_need(be, SBX_CAP_FILES, &err) < 0 ||
	    !(info = be->ops->info(ref, &err)))
		sbx_die_err(&err);
	wd = sbx_json_str(info, "workdir");
	if (*op->path == '/')
		*path = sbx_xstrdup(op->path);
	else if (!*op->path)
		*path = sbx_xstrdup(wd ? wd : "/");
	else
		*path = sbx_xasprintf("%s/%s", wd && strcmp(wd, "/") ? wd : "",
		    op->path);
	json_decref(info);
	return ref;
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"backend", NULL, "the backend of a SANDBOX: operand's id or name"},
	{"state", NULL, "the sandbox a ':PATH' operand names"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-cp -s .sbx/state.json src/ :/workspace/src",
	1,
};

int
main(int argc, char **argv)
{
	struct operand ops[2];
	struct sbx_cp_loc loc[2] = {{0}};
	struct sbx_err err = {0};
	const char *backend = NULL, *state = NULL;
	char *paths[2] = {NULL, NULL};
	int c, i;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, "b:hqs:vV", longopts, NULL)) !=
	    -1) {
		switch (c) {
		case 'b':
			backend = optarg;
			break;
		case 's':
			state = optarg;
			break;
		default:
			if (sbx_opt_common(c, usage))
				break;
			sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (argc - optind != 2)
		sbx_usage_error(usage, argc - optind < 2 ? "a source and a "
		    "destination are required" : "one source and one "
		    "destination, not %d operands", argc - optind);
	for (i = 0; i < 2; i++)
		parse_operand(&ops[i], argv[optind + i]);
	if (!ops[0].sandbox && !ops[1].sandbox)
		sbx_usage_error(usage, "neither '%s' nor '%s' is in a sandbox "
		    "(SANDBOX:PATH)", ops[0].arg, ops[1].arg);
	if (state && !(ops[0].sandbox && !*ops[0].sandbox) &&
	    !(ops[1].sandbox && !*ops[1].sandbox))
		sbx_usage_error(usage, "--state names the sandbox of ':PATH', "
		    "and no operand has one");
	if (backend && !sbx_backend_find(backend))
		sbx_usage_error(usage, "unknown backend '%s'", backend);

	for (i = 0; i < 2; i++) {
		if (!ops[i].sandbox) {
			loc[i].path = ops[i].path;
			continue;
		}
		loc[i].ref = resolve(&ops[i], backend, state, &paths[i]);
		loc[i].path = paths[i];
	}
	/* A receiver that dies shows as EPIPE, and its message says why. */
	signal(SIGPIPE, SIG_IGN);
	sbx_progress_start(!sbx_quiet && isatty(STDERR_FILENO));
	c = sbx_cp(&loc[0], &loc[1], &err);
	sbx_progress_end();
	if (c < 0 && err.code != SBX_EX_OK)
		sbx_die_err(&err);
	for (i = 0; i < 2; i++) {
		json_decref(loc[i].ref);
		free(paths[i]);
		free(ops[i].sandbox);
	}
	return sbx_out_close(SBX_EX_OK);
}
