/* sbx-stats - what sandboxes use (CPU, memory, disk, processes, network)
 * as JSON lines, or a table on a terminal; -f follows */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx-stats [-fjqv] [-b backend] [-I id | -s file] [-i interval] "
    "[id ...]\n";

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"follow", no_argument, NULL, 'f'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"id", required_argument, NULL, 'I'},
	{"interval", required_argument, NULL, 'i'},
	{"json", no_argument, NULL, 'j'},
	{"quiet", no_argument, NULL, 'q'},
	{"state", required_argument, NULL, 's'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"backend", NULL, "the backend the ids belong to"},
	{"follow", NULL, "a line per sandbox every interval until they end"},
	{"interval", NULL, "seconds between readings (default 1)"},
	{"json", NULL, "print JSON Lines even on a terminal"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-stats -s .sbx/s.json\n"
	"  sbx-ls -l job=ci | sbx-stats -f -i 5",
	1,
};

/* One sandbox watched: its last reading of CPU time, when taken. */
struct box {
	json_t *ref;
	const struct sbx_backend *be;
	double cpu_s;
	long long ms;   /* sbx_mono_ms of that reading; 0: none yet */
	int seen;       /* a reading was taken */
	int ended;
};

struct ctx {
	const char *backend; /* -b, when given */
	struct box *boxes;
	size_t n;
	int rc;
};

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void
add_ref(struct ctx *ctx, json_t *ref)
{
	struct sbx_err err = {0};
	const struct sbx_backend *be;

	if (!(be = sbx_backend_of(ref, &err))) {
		sbx_warn("%s", err.msg);
		if (err.code > ctx->rc)
			ctx->rc = err.code;
		json_decref(ref);
		return;
	}
	if (!be->ops->stats) {
		sbx_warn("backend '%s' cannot tell what a sandbox uses",
		    be->name);
		if (SBX_EX_USAGE > ctx->rc)
			ctx->rc = SBX_EX_USAGE;
		json_decref(ref);
		return;
	}
	ctx->boxes = sbx_xrealloc(ctx->boxes, (ctx->n + 1) *
	    sizeof *ctx->boxes);
	ctx->boxes[ctx->n++] = (struct box){.ref = ref, .be = be};
}

static int
on_id(const char *id, void *arg)
{
	struct ctx *ctx = arg;
	struct sbx_err err = {0};
	json_t *ref;

	if (!(ref = sbx_ref_find(ctx->backend, id, &err))) {
		sbx_warn("%s", err.msg);
		return err.code;
	}
	add_ref(ctx, ref);
	return SBX_EX_OK;
}

static int
on_state(const char *path, void *arg)
{
	struct ctx *ctx = arg;
	struct sbx_state st;
	struct sbx_err err = {0};

	if (sbx_target_state_open(&st, path, ctx->backend, &err) < 0)
		sbx_die_err(&err);
	add_ref(ctx, json_deep_copy(json_object_get(st.root, "ref")));
	sbx_target_state_close(&st, NULL, &err);
	return SBX_EX_OK;
}

static void
nap(long long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	/* A signal ends the wait, and the run. */
	while (!stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* One reading of b: the object to print, or NULL (err set) when the
 * backend could not take one. cpu_pct from the CPU time since the last
 * reading where the backend does not measure it itself. */
static json_t *
reading(struct box *b, struct sbx_err *err)
{
	json_t *o = b->be->ops->stats(b->ref, err), *v;
	long long now = sbx_mono_ms();
	char ts[32];
	double c;

	if (!o)
		return NULL;
	sbx_time_fmt(sbx_now(), ts, sizeof ts);
	json_object_set_new(o, "time", json_string(ts));
	v = json_object_get(o, "cpu_s");
	if (!json_is_number(v)) {
		if (!json_object_get(o, "cpu_pct"))
			json_object_set_new(o, "cpu_pct", json_null());
		return o;
	}
	c = json_number_value(v);
	if (!json_is_number(json_object_get(o, "cpu_pct")))
		json_object_set_new(o, "cpu_pct", b->ms && now > b->ms &&
		    c >= b->cpu_s ? json_real((double)(long long)((c - b->cpu_s) *
		    1e6 / (double)(now - b->ms) + 0.5) / 10) : json_null());
	b->cpu_s = c;
	b->ms = now;
	return o;
}

static void
fmt_num(json_t *v, const char *f, char *buf, size_t n)
{
	if (json_is_integer(v))
		snprintf(buf, n, "%lld", (long long)json_integer_value(v));
	else if (json_is_number(v))
		snprintf(buf, n, f, json_number_value(v));
	else
		snprintf(buf, n, "-");
}

/* USED/LIMIT, or USED alone without a limit. */
static void
fmt_pair(json_t *o, const char *used, const char *limit, int bytes,
    char *buf, size_t n)
{
	char a[32], b[32];

	if (bytes) {
		sbx_fmt_bytes(json_object_get(o, used), a, sizeof a);
		sbx_fmt_bytes(json_object_get(o, limit), b, sizeof b);
	} else {
		fmt_num(json_object_get(o, used), "%g", a, sizeof a);
		fmt_num(json_object_get(o, limit), "%g", b, sizeof b);
	}
	if (json_is_null(json_object_get(o, limit)))
		snprintf(buf, n, "%s", a);
	else
		snprintf(buf, n, "%s/%s", a, b);
}

static void
print_header(void)
{
	printf("%-12s  %-7s  %6s  %9s  %-15s  %-15s  %-11s  %7s  %7s\n", "ID",
	    "BACKEND", "CPU%", "CPU_S", "MEM", "DISK", "PIDS", "NET_RX",
	    "NET_TX");
}

static void
print_row(json_t *o)
{
	char pct[32], cpu[32], mem[72], disk[72], pids[72], rx[32], tx[32];

	fmt_num(json_object_get(o, "cpu_pct"), "%.1f", pct, sizeof pct);
	fmt_num(json_object_get(o, "cpu_s"), "%.2f", cpu, sizeof cpu);
	fmt_pair(o, "memory_bytes", "memory_limit", 1, mem, sizeof mem);
	fmt_pair(o, "disk_bytes", "disk_limit", 1, disk, sizeof disk);
	fmt_pair(o, "pids", "pids_limit", 0, pids, sizeof pids);
	sbx_fmt_bytes(json_object_get(o, "net_rx_bytes"), rx, sizeof rx);
	sbx_fmt_bytes(json_object_get(o, "net_tx_bytes"), tx, sizeof tx);
	printf("%-12.12s  %-7s  %6s  %9s  %-15s  %-15s  %-11s  %7s  %7s\n",
	    sbx_json_str(o, "id"), sbx_json_str(o, "backend"), pct, cpu, mem,
	    disk, pids, rx, tx);
}

/* A reading of every sandbox not ended, printed when print; 1 while one
 * is left. A sandbox that fails its first reading is an error; one that
 * ends later ends quietly. */
static int
sample(struct ctx *ctx, int print, int table)
{
	struct sbx_err err = {0};
	struct box *b;
	size_t i;
	int left = 0;
	json_t *o;

	for (i = 0; i < ctx->n && !stop; i++) {
		b = &ctx->boxes[i];
		if (b->ended)
			continue;
		if (!(o = reading(b, &err))) {
			if (!b->seen) {
				sbx_warn("%s", err.msg);
				if (err.code > ctx->rc)
					ctx->rc = err.code ? err.code :
					    SBX_EX_FAIL;
			}
			b->ended = 1;
			continue;
		}
		left = b->seen = 1;
		if (print) {
			if (table)
				print_row(o);
			else
				sbx_out_json(o);
		}
		json_decref(o);
	}
	if (print && (fflush(stdout) == EOF || ferror(stdout)))
		exit(sbx_out_close(SBX_EX_FAIL));
	return left;
}

/* Whether a reading must wait for a second one to say cpu_pct. */
static int
need_second(const struct ctx *ctx)
{
	size_t i;

	for (i = 0; i < ctx->n; i++)
		if (!ctx->boxes[i].ended && ctx->boxes[i].ms)
			return 1;
	return 0;
}

int
main(int argc, char **argv)
{
	struct sbx_target t = {0};
	struct ctx ctx = {0};
	struct sbx_err err = {0};
	struct sigaction sa = {0};
	uint64_t interval = 1000;
	int c, rc, follow = 0, json = 0, table;
	size_t i;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, "b:fhI:i:jqs:vV", longopts,
	    NULL)) != -1) {
		switch (c) {
		case 'f':
			follow = 1;
			break;
		case 'i':
			if (sbx_parse_milli(optarg, 100, 86400000, &interval) <
			    0)
				sbx_usage_error(usage, "invalid interval '%s' "
				    "(seconds, 0.1 to 86400)", optarg);
			break;
		case 'j':
			json = 1;
			break;
		default:
			if (!sbx_opt_common(c, usage) &&
			    !sbx_target_opt(c, optarg, &t))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	ctx.backend = t.backend;
	sbx_flavour_pick_target(&t, argc - optind);
	if (t.backend && !sbx_backend_get(t.backend, &err))
		sbx_die_err(&err);
	table = !json && isatty(1);
	rc = sbx_each_target(&t, argv + optind, argc - optind, on_id,
	    on_state, &ctx, &err);
	if (rc < 0)
		sbx_die_err(&err);
	if (rc > ctx.rc)
		ctx.rc = rc;
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* CPU% is the CPU time between two readings over the time between
	 * them: a first one unprinted, unless every backend measures it. */
	sample(&ctx, 0, 0);
	if (need_second(&ctx))
		nap((long long)interval);
	if (table && ctx.n)
		print_header();
	while (!stop && sample(&ctx, 1, table) && follow)
		nap((long long)interval);
	for (i = 0; i < ctx.n; i++)
		json_decref(ctx.boxes[i].ref);
	free(ctx.boxes);
	return sbx_out_close(ctx.rc);
}
