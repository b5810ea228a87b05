/* sbx-port - a sandbox's ports as the host reaches them: the published
 * ones on the host's loopback (print them, or publish one more), or the
 * URL a remote backend gives each port */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"
#include "net/net.h"

static const char usage[] =
    "usage: sbx-port [-qv] [-b backend] [-I id | -s file] [[hostport:]port]\n";

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"id", required_argument, NULL, 'I'},
	{"quiet", no_argument, NULL, 'q'},
	{"state", required_argument, NULL, 's'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-port -s .sbx/s.json 9000:3000",
	1,
};

int
main(int argc, char **argv)
{
	struct sbx_target t = {0};
	struct sbx_err err = {0};
	const struct sbx_backend *be;
	const char *state = NULL;
	unsigned port = 0, host_port = 0;
	json_t *ref, *out;
	size_t i;
	int c;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, "b:hI:qs:vV", longopts, NULL)) !=
	    -1)
		if (!sbx_opt_common(c, usage) && !sbx_target_opt(c, optarg, &t))
			sbx_usage(usage, SBX_EX_USAGE);
	if (argc - optind > 1)
		sbx_usage_error(usage, "unexpected argument '%s'",
		    argv[optind + 1]);
	if (optind < argc && sbx_net_port_parse(argv[optind], &port,
	    &host_port, &err) < 0)
		sbx_usage_error(usage, "%s", err.msg);
	if (!(ref = sbx_ref_resolve(&t, &state, &err)))
		sbx_die_err(&err);
	sbx_flavour_pick(sbx_json_str(ref, "backend"));
	if (!(be = sbx_backend_of(ref, &err)) || sbx_backend_need(be,
	    SBX_CAP_PORTS | (host_port ? SBX_CAP_PUBLISH : 0), &err) < 0 ||
	    !(out = be->ops->ports(ref, port, host_port, &err))) {
		/* Released first: a sanitizer build counts what exit
		 * leaves. */
		json_decref(ref);
		sbx_die_err(&err);
	}
	/* JSON lines: one a port. */
	if (json_is_array(out))
		for (i = 0; i < json_array_size(out); i++)
			sbx_out_json(json_array_get(out, i));
	else
		sbx_out_json(out);
	json_decref(out);
	json_decref(ref);
	return sbx_out_close(SBX_EX_OK);
}
