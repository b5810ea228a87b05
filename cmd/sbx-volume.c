/* sbx-volume - named volumes: directories that outlive the sandboxes
 * that mount them (sbx-create --volume NAME:/path) */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx-volume [-qv] [-b backend] create name ...\n"
    "       sbx-volume [-jqv] [-b backend] ls\n"
    "       sbx-volume [-qv] [-b backend] rm name ...\n";

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"json", no_argument, NULL, 'j'},
	{"quiet", no_argument, NULL, 'q'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"backend", NULL, "the backend whose volumes (default: the default)"},
	{"json", NULL, "print JSON Lines even on a terminal"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-volume create cache\n"
	"  sbx-create --volume cache:/root/.cache -s .sbx/s.json",
	1,
};

static int table;

static int
print(json_t *vol, void *arg)
{
	int *header = arg;

	if (!table) {
		sbx_out_json(vol);
		return 0;
	}
	if (header && !*header) {
		printf("%-24s %-8s %s\n", "NAME", "BACKEND", "CREATED");
		*header = 1;
	}
	printf("%-24s %-8s %s\n", sbx_json_str(vol, "name"),
	    sbx_json_str(vol, "backend"), sbx_json_str(vol, "created") ?
	    sbx_json_str(vol, "created") : "-");
	return 0;
}

int
main(int argc, char **argv)
{
	const struct sbx_backend *be;
	struct sbx_err err = {0};
	const char *backend = NULL, *op;
	int c, i, json = 0, header = 0, rc = 0;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, "b:hjqvV", longopts, NULL)) !=
	    -1) {
		switch (c) {
		case 'b':
			backend = optarg;
			break;
		case 'j':
			json = 1;
			break;
		default:
			if (!sbx_opt_common(c, usage))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (optind >= argc)
		sbx_usage_error(usage, "no command (create, ls or rm)");
	op = argv[optind++];
	if (strcmp(op, "create") && strcmp(op, "ls") && strcmp(op, "rm"))
		sbx_usage_error(usage, "unknown command '%s' (create, ls or "
		    "rm)", op);
	if (!strcmp(op, "ls") && optind < argc)
		sbx_usage_error(usage, "unexpected argument '%s'", argv[optind]);
	if (strcmp(op, "ls") && optind >= argc)
		sbx_usage_error(usage, "%s: no volume named", op);
	/* Every name checked before any is touched. */
	for (i = optind; i < argc; i++)
		if (!sbx_volume_valid_name(argv[i]))
			sbx_die(SBX_EX_USAGE, "invalid volume name '%s' (want "
			    "[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63})", argv[i]);
	if (!backend)
		backend = sbx_backend_default();
	sbx_flavour_pick(backend);
	if (!(be = sbx_backend_get(backend, &err)) ||
	    sbx_backend_need(be, SBX_CAP_VOLUMES, &err) < 0)
		sbx_die_err(&err);
	table = !json && isatty(1);
	if (!strcmp(op, "ls")) {
		if (be->ops->volume("ls", NULL, print, &header, &err) < 0)
			sbx_die_err(&err);
		return sbx_out_close(0);
	}
	for (i = optind; i < argc; i++) {
		memset(&err, 0, sizeof err);
		if (be->ops->volume(op, argv[i], print, NULL, &err) < 0) {
			sbx_warn("%s", err.msg);
			if (err.code > rc)
				rc = err.code;
		}
	}
	return sbx_out_close(rc);
}
