/* sbx-ls - list sandboxes as JSON Lines, or a table on a terminal */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx-ls [-jqv] [-b backend] [-l key=value]...\n"
    "       sbx-ls -B [-j]\n";

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"backends", no_argument, NULL, 'B'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"json", no_argument, NULL, 'j'},
	{"label", required_argument, NULL, 'l'},
	{"quiet", no_argument, NULL, 'q'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

struct ctx {
	json_t *want; /* labels that must match */
	int table, rows;
	int colour;   /* the table's STATUS in colour */
};

static void
fmt_age(long long s, char *buf, size_t n)
{
	if (s < 120)
		snprintf(buf, n, "%llds", s);
	else if (s < 7200)
		snprintf(buf, n, "%lldm", s / 60);
	else if (s < 172800)
		snprintf(buf, n, "%lldh", s / 3600);
	else
		snprintf(buf, n, "%lldd", s / 86400);
}

/* The STATUS column's colour (SGR), on a terminal that wants colour:
 * https://no-color.org. */
static const char *
status_colour(const struct ctx *ctx, const char *st)
{
	if (!ctx->colour || !st)
		return NULL;
	if (!strcmp(st, "running"))
		return "32";
	if (!strcmp(st, "paused") || !strcmp(st, "stopped"))
		return "33";
	return "31";
}

static void
print_header(void)
{
	printf("%-12s  %-7s  %-14s  %-8s  %5s  %5s  %-12s  %5s  %7s  %s\n",
	    "ID", "BACKEND", "NAME", "STATUS", "AGE", "IDLE", "IMAGE", "PROCS",
	    "MEM", "LABELS");
}

static void
print_row(const struct ctx *ctx, json_t *o)
{
	char age[32], idle[32], mem[32], procs[32], labels[256] = "";
	const char *k, *name = sbx_json_str(o, "name");
	const char *st = sbx_json_str(o, "status"), *sgr;
	const char *be = sbx_json_str(o, "backend");
	json_t *v, *p = json_object_get(o, "processes");
	size_t len = 0;

	fmt_age(sbx_json_int(o, "age", 0), age, sizeof age);
	/* null: the backend cannot tell, which 0s would hide. */
	if (json_is_integer(json_object_get(o, "idle")))
		fmt_age(sbx_json_int(o, "idle", 0), idle, sizeof idle);
	else
		snprintf(idle, sizeof idle, "-");
	sbx_fmt_bytes(json_object_get(o, "memory_bytes"), mem, sizeof mem);
	if (json_is_integer(p))
		snprintf(procs, sizeof procs, "%lld",
		    (long long)json_integer_value(p));
	else
		snprintf(procs, sizeof procs, "-");
	json_object_foreach(json_object_get(o, "labels"), k, v)
		if (len < sizeof labels)
			len += (size_t)snprintf(labels + len, sizeof labels - len,
			    "%s%s=%s", len ? "," : "", k, json_string_value(v));
	/* Ids 12 wide, as docker's: a prefix of 4 or more finds one. */
	printf("%-12.12s  %-7s  %-14.14s  ", sbx_json_str(o, "id"),
	    be ? be : "-", name ? name : json_is_true(json_object_get(o,
	    "warm")) ? "(warm)" : "-");
	/* The padding outside the colour: a row still splits on blanks. */
	if ((sgr = status_colour(ctx, st)))
		printf("\033[%sm%s\033[0m%*s", sgr, st, st && strlen(st) < 8 ?
		    (int)(8 - strlen(st)) : 0, "");
	else
		printf("%-8s", st ? st : "-");
	printf("  %5s  %5s  %-12.12s  %5s  %7s  %s\n", age, idle,
	    sbx_json_str(o, "image") ? sbx_json_str(o, "image") : "-", procs,
	    mem, labels);
}

static int
one(json_t *o, void *arg)
{
	struct ctx *ctx = arg;

	if (!sbx_target_labels_match(o, ctx->want))
		return 0;
	if (ctx->table) {
		print_row(ctx, o);
	} else {
		sbx_out_json(o);
	}
	return 0;
}

/* One backend of sbx-ls --backends. */
static int
backend_row(json_t *o, void *arg)
{
	struct ctx *ctx = arg;
	const char *k;
	json_t *v;
	int n = 0;

	if (!ctx->table) {
		sbx_out_json(o);
		return 0;
	}
	if (!ctx->rows++)
		printf("%-8s  %-7s  %-7s  %s\n", "BACKEND", "DEFAULT", "PAUSE",
		    "CAPABILITIES");
	printf("%-8s  %-7s  %-7s  ", sbx_json_str(o, "backend"),
	    json_is_true(json_object_get(o, "default")) ? "yes" : "-",
	    sbx_json_str(o, "pause"));
	json_object_foreach(json_object_get(o, "caps"), k, v)
		if (json_is_true(v))
			printf("%s%s", n++ ? "," : "", k);
	putchar('\n');
	return 0;
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"backend", NULL, "the backend to list"},
	{"backends", NULL, "list the backends and what each can do"},
	{"json", NULL, "print JSON Lines even on a terminal"},
	{"label", NULL, "only sandboxes with this label (repeatable)"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-ls -l owner=me | jq -r 'select(.status == \"running\") | .id'",
	1,
};

int
main(int argc, char **argv)
{
	struct ctx ctx = {0};
	struct sbx_err err = {0};
	const char *backend = NULL, *colour;
	int c, rc, json = 0, backends = 0;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	ctx.want = json_object();
	while ((c = getopt_long(argc, argv, "Bb:hjl:qvV", longopts, NULL)) !=
	    -1) {
		switch (c) {
		case 'b':
			backend = optarg;
			break;
		case 'B':
			backends = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'l':
			if (sbx_parse_label(optarg, ctx.want, &err) < 0)
				sbx_die_err(&err);
			break;
		default:
			if (!sbx_opt_common(c, usage))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (optind < argc)
		sbx_usage_error(usage, "unexpected argument '%s'", argv[optind]);
	ctx.table = !json && isatty(1);
	if (backends) {
		if (backend || json_object_size(ctx.want))
			sbx_usage_error(usage, "--backends takes no --backend "
			    "or --label");
		sbx_flavour_pick_all();
		sbx_backend_each(backend_row, &ctx);
		json_decref(ctx.want);
		return sbx_out_close(SBX_EX_OK);
	}
	/* Without -b, every backend that is configured and answers. */
	if (backend) {
		sbx_flavour_pick(backend);
		if (!sbx_backend_get(backend, &err))
			sbx_die_err(&err);
	} else {
		sbx_flavour_pick_all();
	}
	colour = getenv("NO_COLOR");
	ctx.colour = ctx.table && !(colour && *colour);
	/* The header even over no rows: the columns say what a row would. */
	if (ctx.table)
		print_header();
	if ((rc = sbx_ref_list(backend, one, &ctx, &err)) < 0)
		sbx_die_err(&err);
	json_decref(ctx.want);
	return sbx_out_close(rc);
}
