/* sbx-net - print or replace a sandbox's egress rules; its network log */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"
#include "net/net.h"

static const char usage[] =
    "usage: sbx-net [-qv] [-b backend] [-I id | -s file] [-n allow] "
    "[--allow-out dest]...\n"
    "               [--deny-out dest]... [--inject-header "
    "host:name=source]...\n"
    "       sbx-net [-qv] [-b backend] [-I id | -s file] --clear\n"
    "       sbx-net [-qv] [-b backend] [-I id | -s file] -n deny\n"
    "       sbx-net log [-f] [-b backend] [-I id | -s file]\n";

enum { OPT_ALLOW_OUT = 256, OPT_DENY_OUT, OPT_CLEAR, OPT_INJECT_HEADER };

static const struct option longopts[] = {
	{"allow-out", required_argument, NULL, OPT_ALLOW_OUT},
	{"backend", required_argument, NULL, 'b'},
	{"clear", no_argument, NULL, OPT_CLEAR},
	{"deny-out", required_argument, NULL, OPT_DENY_OUT},
	{"follow", no_argument, NULL, 'f'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"id", required_argument, NULL, 'I'},
	{"inject-header", required_argument, NULL, OPT_INJECT_HEADER},
	{"network", required_argument, NULL, 'n'},
	{"quiet", no_argument, NULL, 'q'},
	{"state", required_argument, NULL, 's'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

static void
add_rule(json_t *set, const char *list, const char *text)
{
	struct sbx_net_rule r;
	struct sbx_err err = {0};

	if (sbx_net_rule_parse(text, &r, &err) < 0)
		sbx_die_err(&err);
	json_array_append_new(json_object_get(set, list), json_string(text));
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"allow-out", NULL, "allow connections to dest (repeatable)"},
	{"clear", NULL, "remove every rule"},
	{"deny-out", NULL, "deny connections to dest (repeatable)"},
	{"follow", NULL, "with log: print new lines as they come"},
	{"inject-header", NULL, "add a header to HTTP requests to host"},
	{"network", "allow|deny", "turn the network on (allow) or off (deny)"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-net -s .sbx/s.json --allow-out git.example.com",
	1,
};

int
main(int argc, char **argv)
{
	struct sbx_target t = {0};
	struct sbx_err err = {0};
	const struct sbx_backend *be;
	const char *state = NULL;
	json_t *ref, *set, *out, *inject = NULL;
	const char *network = NULL;
	char **av = NULL;
	int c, follow = 0, log = 0, change = 0, clear = 0, rc = SBX_EX_OK;

	sbx_prog_set(argv);
	if (argc > 1 && !strcmp(argv[1], "log")) {
		/* Options after the word, parsed from a copy: the remote
		 * flavour is run with argv as it came. */
		av = sbx_xcalloc((size_t)argc, sizeof *av);
		av[0] = argv[0];
		memcpy(av + 1, argv + 2, (size_t)(argc - 2) * sizeof *av);
		log = 1;
		argv = av;
		argc--;
	}
	sbx_opt_init(&help, argv);
	set = json_pack("{s[]s[]}", "allow_out", "deny_out");
	while ((c = getopt_long(argc, argv, "b:fhI:n:qs:vV", longopts,
	    NULL)) != -1) {
		switch (c) {
		case OPT_ALLOW_OUT:
			add_rule(set, "allow_out", optarg);
			change = 1;
			break;
		case OPT_DENY_OUT:
			add_rule(set, "deny_out", optarg);
			change = 1;
			break;
		case OPT_CLEAR:
			clear = 1;
			break;
		case OPT_INJECT_HEADER:
			if (!inject)
				inject = json_array();
			if (sbx_net_inject_parse(optarg, inject, &err) < 0)
				sbx_die_err(&err);
			break;
		case 'n':
			if (strcmp(optarg, "allow") && strcmp(optarg, "deny"))
				sbx_usage_error(usage, "invalid network '%s' "
				    "(want allow or deny)", optarg);
			network = optarg;
			break;
		case 'f':
			follow = 1;
			break;
		default:
			if (!sbx_opt_common(c, usage) &&
			    !sbx_target_opt(c, optarg, &t))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (optind < argc)
		sbx_usage_error(usage, "unexpected argument '%s'", argv[optind]);
	if (log && (change || clear || inject || network))
		sbx_usage_error(usage, "log takes no rules");
	if (network && !strcmp(network, "deny") && (change || clear ||
	    inject))
		sbx_usage_error(usage, "-n deny takes no rules");
	if (follow && !log)
		sbx_usage_error(usage, "--follow is for sbx-net log");
	if (clear && (change || inject || network))
		sbx_usage_error(usage, "--clear and rules do not go together");
	/* The injections replace the sandbox's (kept when none is given);
	 * -n, as E2B's allow_internet_access, turns its network on or off. */
	if (inject)
		json_object_set_new(set, "inject", inject);
	if (network)
		json_object_set_new(set, "network", json_string(network));
	if (!(ref = sbx_ref_resolve(&t, &state, &err)))
		sbx_die_err(&err);
	sbx_flavour_pick(sbx_json_str(ref, "backend"));
	if (!(be = sbx_backend_of(ref, &err)) || sbx_backend_need(be,
	    SBX_CAP_NET_RULES, &err) < 0)
		goto fail;
	if (!be->ops->net_rules) {
		sbx_err_set(&err, SBX_EX_USAGE, "backend '%s' takes its "
		    "network rules at create only (sbx-create --allow-out)",
		    be->name);
		goto fail;
	}
	if (log) {
		/* Rules without a log: E2B's. */
		if (!be->ops->net_log) {
			sbx_err_set(&err, SBX_EX_USAGE, "backend '%s' keeps no "
			    "network log", be->name);
			goto fail;
		}
		if (be->ops->net_log(ref, follow, &err) < 0)
			goto fail;
	} else {
		if (!(out = be->ops->net_rules(ref, change || clear ||
		    inject || network ? set : NULL, &err)))
			goto fail;
		sbx_out_json(out);
		json_decref(out);
	}
	json_decref(set);
	json_decref(ref);
	free(av);
	return sbx_out_close(rc);
fail:
	/* Released first: a sanitizer build counts what exit leaves. */
	json_decref(set);
	json_decref(ref);
	free(av);
	sbx_die_err(&err);
}
