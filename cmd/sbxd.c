/* sbxd - serve sandboxes over the E2B API */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "sbxd.h"

static const char usage[] =
    "usage: sbxd [-qv] [-l addr] -k file [-S dir] [-t name=image]...\n"
    "            [-m count] [-r rate] [-c count] [-p count] [-w duration]\n"
    "            [-B bytes] [-U bytes] [-T duration] [-M duration]\n"
    "            [-d domain] [-x leave|kill|pause] [-W count] [-A]\n";

static const struct option longopts[] = {
	{"listen", required_argument, NULL, 'l'},
	{"api-key-file", required_argument, NULL, 'k'},
	{"store", required_argument, NULL, 'S'},
	{"template", required_argument, NULL, 't'},
	{"max-sandboxes", required_argument, NULL, 'm'},
	{"create-rate", required_argument, NULL, 'r'},
	{"max-connections", required_argument, NULL, 'c'},
	{"max-per-address", required_argument, NULL, 'p'},
	{"header-timeout", required_argument, NULL, 'w'},
	{"max-body", required_argument, NULL, 'B'},
	{"max-upload", required_argument, NULL, 'U'},
	{"max-timeout", required_argument, NULL, 'T'},
	{"domain", required_argument, NULL, 'd'},
	{"daytona-minute", required_argument, NULL, 'M'},
	{"on-exit", required_argument, NULL, 'x'},
	{"no-access-log", no_argument, NULL, 'A'},
	{"warm", required_argument, NULL, 'W'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"quiet", no_argument, NULL, 'q'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"api-key-file", NULL, "the API keys, one per line (required)"},
	{"create-rate", NULL, "creates a second per API key (0: no limit)"},
	{"daytona-minute", NULL, "how long a minute of Daytona's intervals is (1m)"},
	{"domain", NULL, "the domain the Sandbox objects name"},
	{"header-timeout", NULL, "time to send a request head (10)"},
	{"listen", NULL, "listen on host:port (127.0.0.1:3000)"},
	{"max-body", NULL, "the largest JSON request body (1M)"},
	{"max-connections", NULL, "at most count connections (4096)"},
	{"max-per-address", NULL, "at most count from one address (256)"},
	{"max-sandboxes", NULL, "at most count sandboxes (100)"},
	{"max-timeout", NULL, "the longest timeout a sandbox may have"},
	{"max-upload", NULL, "the largest file upload (1G)"},
	{"no-access-log", NULL, "no access log"},
	{"on-exit", NULL, "what becomes of the sandboxes when sbxd stops"},
	{"store", NULL, "the store directory"},
	{"template", NULL, "register a template (repeatable)"},
	{"warm", NULL, "keep count sandboxes made ahead (0)"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbxd --listen 127.0.0.1:3000 --api-key-file /etc/sbx/api-key",
	8,
};

int
main(int argc, char **argv)
{
	struct sbx_sbxd_opts o = {
		.listen = "127.0.0.1:3000",
		.on_exit = "leave",
		.max_body = 1 << 20,
		.max_upload = 1ull << 30,
		.max_timeout = 86400,
		.dt_minute = 60,
		.access_log = 1,
		.max_sandboxes = 100,
		.create_rate = 20,
		.max_conns = 4096,
		.max_per_addr = 256,
		.header_timeout = 10,
	};
	struct sbx_err err;
	/* Static: reachable still when a usage error exits (LeakSanitizer). */
	static char **tmpl;
	size_t nt = 0;
	uint64_t v;
	int c;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	tmpl = sbx_xcalloc((size_t)argc + 1, sizeof *tmpl);
	while ((c = getopt_long(argc, argv, "Ac:d:B:hk:l:m:M:p:qr:S:t:T:U:vVw:W:x:",
	    longopts, NULL)) != -1) {
		switch (c) {
		case 'A':
			o.access_log = 0;
			break;
		case 'c':
			if (sbx_parse_u64(optarg, 0, 1000000, &v) < 0 ||
			    (v && v < 16))
				sbx_usage_error(usage, "bad count '%s' for "
				    "--max-connections (0, or 16 to 1000000)",
				    optarg);
			o.max_conns = (unsigned)v;
			break;
		case 'd':
			o.domain = optarg;
			break;
		case 'B':
			if (sbx_parse_size(optarg, &o.max_body) < 0 ||
			    o.max_body < 1024)
				sbx_usage_error(usage, "bad size '%s' for "
				    "--max-body (at least 1K)", optarg);
			break;
		case 'k':
			o.key_file = optarg;
			break;
		case 'l':
			o.listen = optarg;
			break;
		case 'm':
			if (sbx_parse_u64(optarg, 0, 100000, &v) < 0)
				sbx_usage_error(usage, "bad count '%s' for "
				    "--max-sandboxes", optarg);
			o.max_sandboxes = (unsigned)v;
			break;
		case 'r':
			if (sbx_parse_u64(optarg, 0, 100000, &v) < 0)
				sbx_usage_error(usage, "bad rate '%s' for "
				    "--create-rate", optarg);
			o.create_rate = (unsigned)v;
			break;
		case 'p':
			if (sbx_parse_u64(optarg, 0, 1000000, &v) < 0)
				sbx_usage_error(usage, "bad count '%s' for "
				    "--max-per-address", optarg);
			o.max_per_addr = (unsigned)v;
			break;
		case 'S':
			o.store = optarg;
			break;
		case 't':
			tmpl[nt++] = optarg;
			break;
		case 'T':
			if (sbx_opt_duration("--max-timeout", optarg, 1,
			    SBX_TIMEOUT_MAX, &o.max_timeout, &err) < 0)
				sbx_die_err(&err);
			break;
		case 'M':
			if (sbx_opt_duration("--daytona-minute", optarg, 1, 60,
			    &o.dt_minute, &err) < 0)
				sbx_die_err(&err);
			break;
		case 'U':
			if (sbx_parse_size(optarg, &o.max_upload) < 0)
				sbx_usage_error(usage, "bad size '%s' for "
				    "--max-upload", optarg);
			break;
		case 'w':
			if (sbx_opt_duration("--header-timeout", optarg, 1,
			    3600, &v, &err) < 0)
				sbx_die_err(&err);
			o.header_timeout = (unsigned)v;
			break;
		case 'W':
			if (sbx_parse_u64(optarg, 0, 10000, &v) < 0)
				sbx_usage_error(usage, "bad count '%s' for "
				    "--warm (0 to 10000)", optarg);
			o.warm = (unsigned)v;
			break;
		case 'x':
			if (strcmp(optarg, "leave") && strcmp(optarg, "kill") &&
			    strcmp(optarg, "pause"))
				sbx_usage_error(usage, "bad value '%s' for "
				    "--on-exit (leave, kill, pause)", optarg);
			o.on_exit = optarg;
			break;
		default:
			if (!sbx_opt_common(c, usage))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (optind < argc)
		sbx_usage_error(usage, "unexpected operand '%s'", argv[optind]);
	if (!o.key_file && !(o.key_file = getenv("SBXD_API_KEY_FILE")))
		sbx_usage_error(usage, "no API key file (--api-key-file)");
	o.templates = tmpl;
	if (sbx_quiet)
		o.access_log = 0;
	if (sbx_sbxd_run(&o, &err) < 0)
		sbx_die_err(&err);
	free(tmpl);
	return SBX_EX_OK;
}
