/* sbx-cost - estimate what sandboxes have cost; enforce a budget */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx-cost [-jqv] [-r rate] [-m amount] [-a amount] [-l file]\n"
    "                [--by label=key] [-s file]... [file ...]\n";

enum { OPT_BY = 256 };

static const struct option longopts[] = {
	{"alert", required_argument, NULL, 'a'},
	{"by", required_argument, NULL, OPT_BY},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"json", no_argument, NULL, 'j'},
	{"log", required_argument, NULL, 'l'},
	{"max", required_argument, NULL, 'm'},
	{"quiet", no_argument, NULL, 'q'},
	{"rate", required_argument, NULL, 'r'},
	{"state", required_argument, NULL, 's'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

struct ctx {
	const char *rate;   /* --rate, checked */
	const char *log;
	uint64_t max, alert; /* units of 0.0001 */
	int has_max, has_alert;
	int silent;         /* -q: only the exit status says */
	long long now;
	json_t *lines;      /* what was printed, for --log */
	uint64_t total, total_s;
	int count;
	char *last_id;
	const char *by;     /* --by label=KEY: KEY */
	json_t *seen;       /* --by: what each sandbox cost, by state path */
	json_t *ids;        /* --by: the ids of this call's state files */
};

static uint64_t
amount(const char *s, int decimals)
{
	uint64_t v;

	if (sbx_cost_parse(s, decimals, &v) < 0)
		sbx_die(SBX_EX_USAGE, "invalid amount '%s'", s);
	return v;
}

/* The CPU seconds the backend reports, or null. */
static json_t *
cpu_of(const json_t *ref)
{
	const struct sbx_backend *be;
	struct sbx_err err = {0};
	json_t *info, *v = NULL;

	if (ref && (be = sbx_backend_of(ref, &err)) && be->ops->info &&
	    (info = be->ops->info(ref, &err))) {
		v = json_object_get(info, "cpu_s");
		v = json_is_number(v) ? json_incref(v) : NULL;
		json_decref(info);
	}
	return v ? v : json_null();
}

/* Update what the state remembers: the estimate, and that the alert was
 * given. 1 when something changed. */
static int
remember(json_t *root, uint64_t units, const char *id, struct ctx *ctx)
{
	json_t *prev = json_object_get(root, "accrued_cost");
	double v = json_number_value(prev);
	char est[32], lim[32];
	int changed = 0;

	if (!json_is_number(prev) || !(v >= 0 && v < 1e12) ||
	    (uint64_t)(v * 10000 + 0.5) != units) {
		json_object_set_new(root, "accrued_cost", json_real((double)
		    units / 10000));
		changed = 1;
	}
	if (ctx->has_alert && units >= ctx->alert &&
	    !json_is_true(json_object_get(root, "cost_alerted"))) {
		sbx_cost_fmt(units, est, sizeof est);
		sbx_cost_fmt(ctx->alert, lim, sizeof lim);
		sbx_warn("cost alert: %s >= %s (%s)", est, lim, id);
		json_object_set_new(root, "cost_alerted", json_true());
		changed = 1;
	}
	return changed;
}

/* The CPU milliseconds the sandboxes of the state used: what each id
 * was last seen using, this one's as measured now (cpu, or null), which
 * "cpu_seen" keeps for when it is gone. -1 when none was ever seen. */
static long long
cpu_used(json_t *root, const char *id, const json_t *cpu, int *changed)
{
	json_t *seen = json_object_get(root, "cpu_seen"), *v;
	const char *k;
	long long ms = -1;
	double s;

	if (!json_is_object(seen)) {
		seen = json_object();
		json_object_set_new(root, "cpu_seen", seen);
	}
	s = json_number_value(cpu);
	v = json_object_get(seen, id);
	/* The counter only grows; a smaller one is another cgroup. */
	if (json_is_number(cpu) && s >= 0 && s < 1e12 && (!json_is_number(v) ||
	    s > json_number_value(v))) {
		json_object_set_new(seen, id, json_real(s));
		*changed = 1;
	}
	json_object_foreach(seen, k, v)
		if (json_is_number(v) && json_number_value(v) >= 0 &&
		    json_number_value(v) < 1e12)
			ms = (ms < 0 ? 0 : ms) + (long long)(json_number_value(
			    v) * 1000 + 0.5);
	if (!json_object_size(seen))
		json_object_del(root, "cpu_seen");
	return ms;
}

/* --by: a sandbox's cost under the key that tells it from the others
 * (its state file's absolute path, or its id), with its label's value. */
static void
by_add(struct ctx *ctx, const char *key, const json_t *line,
    uint64_t units)
{
	json_t *v = json_object_get(json_object_get(line, "labels"), ctx->by);

	json_object_set_new(ctx->seen, key, json_pack("{sOsIsI}", "value",
	    json_is_string(v) ? v : json_null(), "units", (json_int_t)units,
	    "running_s", (json_int_t)sbx_json_int(line, "running_s", 0)));
}

/* A state file's line: the log names it by the absolute path, so that a
 * later call tells which sandboxes are gone. */
static void
by_state(struct ctx *ctx, const char *path, json_t *o, uint64_t units)
{
	char *abs = realpath(path, NULL);

	json_object_set_new(o, "state", sbx_json_bytes(abs ? abs : path,
	    strlen(abs ? abs : path)));
	if (ctx->by) {
		by_add(ctx, abs ? abs : path, o, units);
		json_object_set_new(ctx->ids, sbx_json_str(o, "id"),
		    json_true());
	}
	free(abs);
}

static int
cost_state(const char *path, struct ctx *ctx)
{
	struct sbx_state st;
	struct sbx_err err = {0};
	struct sbx_rate r;
	uint64_t secs, units, hourly;
	const char *id, *backend;
	char est[32], rate[32], msg[sizeof err.msg];
	json_t *ref, *o, *cpu, *labels;
	long long ms = 0;
	int rc = SBX_EX_OK, changed = 0;

	/* Looked at first: opening would make the directory and a lock. */
	if (access(path, F_OK) < 0 && errno == ENOENT) {
		sbx_warn("no sandbox: no state file '%s'", path);
		return SBX_EX_NOSANDBOX;
	}
	/* The backend is asked without the state's lock held. */
	if (sbx_state_open(&st, path, &err) < 0) {
		sbx_warn("%s", err.msg);
		return err.code ? err.code : SBX_EX_FAIL;
	}
	ref = json_incref(json_object_get(st.root, "ref"));
	sbx_state_release(&st);
	cpu = cpu_of(ref);
	json_decref(ref);
	if (sbx_state_open(&st, path, &err) < 0) {
		sbx_warn("%s", err.msg);
		json_decref(cpu);
		return err.code ? err.code : SBX_EX_FAIL;
	}
	ref = json_incref(json_object_get(st.root, "ref"));
	id = sbx_json_str(ref, "id");
	backend = sbx_json_str(ref, "backend");
	if (!json_object_size(st.root)) {
		sbx_err_set(&err, SBX_EX_NOSANDBOX,
		    "no sandbox: no state file '%s'", path);
		goto fail;
	}
	if (!id || !backend) {
		sbx_err_set(&err, SBX_EX_DATA, "'%s': ref has no backend or id",
		    path);
		goto fail;
	}
	if (sbx_cost_running(st.root, ctx->now, &secs, &err) < 0 ||
	    sbx_cost_rate(backend, ctx->rate, st.root, &r, &err) < 0)
		goto bad;
	/* Never a silent 0: a sandbox that ran but whose CPU time was
	 * never seen has no estimate. */
	if (r.per_cpu && (ms = cpu_used(st.root, id, cpu, &changed)) < 0) {
		if (secs) {
			sbx_err_set(&err, SBX_EX_USAGE, "no rate for backend "
			    "'%s': the CPU time of '%s' is not known; set "
			    "cost.%s.per_hour (or give --rate)", backend, id,
			    backend);
			goto fail;
		}
		ms = 0;
	}
	if (sbx_cost_estimate(&r, r.per_cpu ? (uint64_t)ms : secs, &units,
	    &err) < 0 || sbx_cost_estimate(&r, r.per_cpu ? 3600000 : 3600,
	    &hourly, &err) < 0) {
bad:
		if (err.code == SBX_EX_DATA) {
			memcpy(msg, err.msg, sizeof msg);
			sbx_err_set(&err, SBX_EX_DATA, "'%s': %.400s", path,
			    msg);
		}
		goto fail;
	}
	if ((remember(st.root, units, id, ctx) || changed) &&
	    sbx_state_save(&st, &err) < 0) {
		sbx_warn("%s", err.msg);
		rc = SBX_EX_FAIL;
	}
	labels = json_deep_copy(json_object_get(st.root, "labels"));
	sbx_state_release(&st);
	sbx_cost_fmt(units, est, sizeof est);
	sbx_cost_fmt(hourly, rate, sizeof rate);
	sbx_note("%s: %llu s at %s an hour from %s", id,
	    (unsigned long long)secs, rate, r.source);
	o = json_pack("{sssssIssssssso}", "id", id, "backend", backend,
	    "running_s", (json_int_t)secs, "estimated", est, "rate", rate,
	    "rate_source", r.source, "cpu_s", cpu);
	/* Its labels, for sbx-cost --by (also of the log's lines). */
	if (json_object_size(labels))
		json_object_set(o, "labels", labels);
	json_decref(labels);
	if (!ctx->silent && !ctx->by)
		sbx_out_json(o);
	by_state(ctx, path, o, units);
	json_array_append_new(ctx->lines, o);
	ctx->total += units;
	ctx->total_s += secs;
	ctx->count++;
	free(ctx->last_id);
	ctx->last_id = sbx_xstrdup(id);
	json_decref(ref);
	return rc;
fail:
	sbx_warn("%s", err.msg);
	sbx_state_release(&st);
	json_decref(ref);
	json_decref(cpu);
	return err.code;
}

/* One line per sandbox, with the time, appended to the log at once. */
static int
write_log(struct ctx *ctx)
{
	char ts[32], *s;
	json_t *o, *line;
	size_t i;
	int fd, rc = 0;
	struct sbx_buf b = SBX_BUF_INIT;

	sbx_time_fmt(ctx->now, ts, sizeof ts);
	json_array_foreach(ctx->lines, i, o) {
		line = json_pack("{ss}", "at", ts);
		json_object_update(line, o);
		s = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER |
		    JSON_REAL_PRECISION(15));
		if (s) {
			sbx_buf_add(&b, s, strlen(s));
			sbx_buf_add(&b, "\n", 1);
		}
		free(s);
		json_decref(line);
	}
	fd = open(ctx->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || sbx_write_all(fd, b.data, b.len) < 0 ||
	    close(fd) < 0) {
		sbx_warn("cannot write '%s':", ctx->log);
		rc = -1;
	}
	sbx_buf_release(&b);
	return rc;
}

/* --by: the log's lines of the sandboxes this call's state files do not
 * name (gone, their state file removed), the last of each. */
static int
by_log(struct ctx *ctx)
{
	json_t *states = json_copy(ctx->seen), *o;
	const char *id, *st;
	char *line = NULL, *key;
	size_t cap = 0;
	ssize_t len;
	uint64_t units;
	long n = 0;
	int rc = SBX_EX_OK;
	FILE *f = ctx->log ? fopen(ctx->log, "re") : NULL;

	if (!f && ctx->log && errno != ENOENT) {
		sbx_warn("cannot read '%s':", ctx->log);
		rc = SBX_EX_FAIL;
	}
	while (f && (len = getline(&line, &cap, f)) > 0) {
		n++;
		if (len == 1 && line[0] == '\n')
			continue;
		o = json_loadb(line, (size_t)len, 0, NULL);
		id = sbx_json_str(o, "id");
		st = sbx_json_str(o, "state");
		if (json_is_true(json_object_get(o, "total"))) {
			json_decref(o);
			continue;
		}
		if (!id || !json_is_integer(json_object_get(o, "running_s")) ||
		    sbx_cost_parse(sbx_json_str(o, "estimated"),
		    SBX_COST_DECIMALS, &units) < 0) {
			sbx_warn("'%s' line %ld: not a line of sbx-cost",
			    ctx->log, n);
			rc = SBX_EX_DATA;
			json_decref(o);
			continue;
		}
		/* A line of an older sbx-cost names no state file. */
		key = st ? sbx_xstrdup(st) : sbx_xasprintf("id %s", id);
		if (!json_object_get(states, key) &&
		    !json_object_get(ctx->ids, id))
			by_add(ctx, key, o, units);
		free(key);
		json_decref(o);
	}
	if (f)
		fclose(f);
	free(line);
	json_decref(states);
	return rc;
}

/* --by: what the sandboxes of a value (a group) cost, added up. */
static json_t *
by_sum(json_t *g, const json_t *e)
{
	static const char *const keys[] = {"units", "running_s", "count"};
	size_t i;

	if (!g)
		g = json_pack("{sIsIsI}", "units", (json_int_t)0, "running_s",
		    (json_int_t)0, "count", (json_int_t)0);
	for (i = 0; i < 3; i++)
		json_object_set_new(g, keys[i], json_integer(sbx_json_int(g,
		    keys[i], 0) + (i == 2 ? 1 : sbx_json_int(e, keys[i], 0))));
	return g;
}

/* --by: a value's line (or row), its budget checked; value NULL is the
 * sandboxes without the label. */
static int
by_line(struct ctx *ctx, int table, const char *value, const json_t *g)
{
	uint64_t units = (uint64_t)sbx_json_int(g, "units", 0);
	int over = ctx->has_max && units >= ctx->max;
	char est[32], lim[32];
	json_t *o;

	sbx_cost_fmt(units, est, sizeof est);
	sbx_cost_fmt(ctx->max, lim, sizeof lim);
	o = json_pack("{sssosIsIss}", "label", ctx->by, "value", value ?
	    json_string(value) : json_null(), "count", sbx_json_int(g,
	    "count", 0), "running_s", sbx_json_int(g, "running_s", 0),
	    "estimated", est);
	if (ctx->has_max)
		json_object_set_new(o, "exceeded", json_boolean(over));
	if (ctx->silent)
		;
	else if (table)
		printf("%-20s  %5lld  %10lld  %12s%s\n", value ? value : "-",
		    sbx_json_int(g, "count", 0), sbx_json_int(g, "running_s",
		    0), est, !ctx->has_max ? "" : over ? "  exceeded" : "  -");
	else
		sbx_out_json(o);
	json_decref(o);
	if (!over)
		return SBX_EX_OK;
	if (value)
		sbx_warn("budget reached: %s >= %s (%s=%s)", est, lim, ctx->by,
		    value);
	else
		sbx_warn("budget reached: %s >= %s (no label %s)", est, lim,
		    ctx->by);
	return SBX_EX_BUDGET;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* --by: a line a value of the label, sorted, the sandboxes without it
 * last, as null; then the total. Each value's budget is --max. */
static int
by_print(struct ctx *ctx, int table)
{
	json_t *groups = json_object(), *none = NULL, *g, *e, *v, *o;
	json_t *all = NULL;
	const char **vals, *k;
	char est[32];
	size_t n = 0, i;
	int rc = SBX_EX_OK;

	json_object_foreach(ctx->seen, k, e) {
		v = json_object_get(e, "value");
		all = by_sum(all, e);
		if (!json_is_string(v))
			none = by_sum(none, e);
		else
			json_object_set_new(groups, json_string_value(v),
			    by_sum(json_incref(json_object_get(groups,
			    json_string_value(v))), e));
	}
	vals = sbx_xcalloc(json_object_size(groups) + 1, sizeof *vals);
	json_object_foreach(groups, k, g)
		vals[n++] = k;
	qsort(vals, n, sizeof *vals, cmp_str);
	if (table && !ctx->silent)
		printf("%-20s  %5s  %10s  %12s%s\n", ctx->by, "COUNT",
		    "RUNNING_S", "ESTIMATED", ctx->has_max ? "  BUDGET" : "");
	for (i = 0; i < n; i++)
		if (by_line(ctx, table, vals[i], json_object_get(groups,
		    vals[i])))
			rc = SBX_EX_BUDGET;
	if (none && by_line(ctx, table, NULL, none))
		rc = SBX_EX_BUDGET;
	if (all && sbx_json_int(all, "count", 0) > 1 && !ctx->silent) {
		sbx_cost_fmt((uint64_t)sbx_json_int(all, "units", 0), est,
		    sizeof est);
		o = json_pack("{sbsIsssI}", "total", 1, "running_s",
		    sbx_json_int(all, "running_s", 0), "estimated", est,
		    "count", sbx_json_int(all, "count", 0));
		if (table)
			printf("%-20s  %5lld  %10lld  %12s\n", "TOTAL",
			    sbx_json_int(o, "count", 0), sbx_json_int(o,
			    "running_s", 0), est);
		else
			sbx_out_json(o);
		json_decref(o);
	}
	free(vals);
	json_decref(groups);
	json_decref(none);
	json_decref(all);
	return rc;
}

/* --by's value: label=KEY, KEY a label's key. */
static const char *
by_key(const char *s)
{
	struct sbx_err err = {0};
	json_t *o = json_object();
	char *t;
	int bad;

	if (strncmp(s, "label=", 6))
		sbx_usage_error(usage, "--by wants label=key, not '%s'", s);
	t = sbx_xasprintf("%s=", s + 6);
	bad = !s[6] || strchr(s + 6, '=') || sbx_parse_label(t, o, &err) < 0;
	free(t);
	json_decref(o);
	if (bad)
		sbx_usage_error(usage, "--by: invalid label key '%s'", s + 6);
	return s + 6;
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"alert", NULL, "warn once when an estimate reaches amount"},
	{"by", NULL, "sum by the value of a label; --max is then per value"},
	{"json", NULL, "--by's output as JSON lines, also on a terminal"},
	{"log", NULL, "append each sandbox's line of output to file"},
	{"max", NULL, "exit 4 when the estimate reaches amount"},
	{"rate", NULL, "the rate per hour of every sandbox"},
	{"state", NULL, "a state file; may be repeated"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-cost -r 0.10 -m 5 -s .sbx/run.json",
	1,
};

int
main(int argc, char **argv)
{
	struct ctx ctx = {0};
	const char **paths = NULL, *env;
	size_t n = 0, i;
	char est[32], lim[32], who[128];
	uint64_t spent;
	int c, r, rc = SBX_EX_OK, json = 0;
	json_t *o;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	paths = sbx_xcalloc((size_t)argc + 1, sizeof *paths);
	while ((c = getopt_long(argc, argv, "a:hjl:m:qr:s:vV", longopts,
	    NULL)) != -1) {
		switch (c) {
		case OPT_BY:
			ctx.by = by_key(optarg);
			break;
		case 'j':
			json = 1;
			break;
		case 'a':
			ctx.alert = amount(optarg, SBX_COST_DECIMALS);
			ctx.has_alert = 1;
			break;
		case 'l':
			ctx.log = optarg;
			break;
		case 'm':
			ctx.max = amount(optarg, SBX_COST_DECIMALS);
			ctx.has_max = 1;
			break;
		case 'r':
			amount(optarg, SBX_RATE_DECIMALS);
			ctx.rate = optarg;
			break;
		case 's':
			paths[n++] = optarg;
			break;
		default:
			if (!sbx_opt_common(c, usage))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	for (; optind < argc; optind++)
		paths[n++] = argv[optind];
	ctx.silent = sbx_quiet;
	if (!n) {
		env = getenv("SBX_STATE");
		if (env && *env)
			paths[n++] = env;
		else if (access(SBX_STATE_DEFAULT, F_OK) == 0)
			paths[n++] = SBX_STATE_DEFAULT;
		else
			sbx_die(SBX_EX_NOSANDBOX,
			    "no sandbox: no --state, and no '%s'",
			    SBX_STATE_DEFAULT);
	}

	/* Every state's backend before the first is touched. */
	for (i = 0; i < n; i++)
		sbx_flavour_pick_state(paths[i]);
	ctx.now = sbx_now();
	ctx.lines = json_array();
	ctx.seen = json_object();
	ctx.ids = json_object();
	for (i = 0; i < n; i++)
		if ((r = cost_state(paths[i], &ctx)) > rc)
			rc = r;
	if (ctx.by) {
		/* Read before this call's lines are appended. */
		if ((r = by_log(&ctx)) > rc)
			rc = r;
		if ((r = by_print(&ctx, !json && isatty(STDOUT_FILENO))) > rc)
			rc = r;
	} else if (n > 1) {
		sbx_cost_fmt(ctx.total, est, sizeof est);
		o = json_pack("{sbsIsssi}", "total", 1, "running_s",
		    (json_int_t)ctx.total_s, "estimated", est, "count",
		    ctx.count);
		if (!ctx.silent)
			sbx_out_json(o);
		json_decref(o);
	}
	/* With several sandboxes, the budget is for all of them. */
	spent = ctx.total;
	if (!ctx.by && ctx.has_max && ctx.count && spent >= ctx.max) {
		sbx_cost_fmt(spent, est, sizeof est);
		sbx_cost_fmt(ctx.max, lim, sizeof lim);
		if (n > 1)
			snprintf(who, sizeof who, "total of %d", ctx.count);
		else
			snprintf(who, sizeof who, "%s", ctx.last_id);
		sbx_warn("budget reached: %s >= %s (%s)", est, lim, who);
		if (rc < SBX_EX_BUDGET)
			rc = SBX_EX_BUDGET;
	}
	if (ctx.log && json_array_size(ctx.lines) && write_log(&ctx) < 0 &&
	    rc < SBX_EX_FAIL)
		rc = SBX_EX_FAIL;
	json_decref(ctx.lines);
	json_decref(ctx.seen);
	json_decref(ctx.ids);
	free(ctx.last_id);
	free(paths);
	return sbx_out_close(rc);
}
