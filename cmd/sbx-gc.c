/* sbx-gc - kill expired, dead, old, idle and orphaned sandboxes; for cron */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx-gc [-nqv] [-b backend] [-o duration] [-i duration]\n"
    "              [-l key=value]... [-d dir]... [-g duration]\n";

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"dry-run", no_argument, NULL, 'n'},
	{"grace", required_argument, NULL, 'g'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"idle-for", required_argument, NULL, 'i'},
	{"label", required_argument, NULL, 'l'},
	{"older-than", required_argument, NULL, 'o'},
	{"quiet", no_argument, NULL, 'q'},
	{"state-dir", required_argument, NULL, 'd'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* A sandbox whose creation has not finished is taken for abandoned only
 * after this long (or the grace period, if longer). */
#define CREATING_MAX 600
/* Kills run in this many processes at once. */
#define JOBS 8
/* A JSON file larger than this is not a state file. */
#define STATE_MAX (4 << 20)

struct ctx {
	const char *backend;
	json_t *want;      /* labels that must match */
	json_t *refs;      /* id or name -> newest update of a state naming it */
	int use_refs;      /* --state-dir given, and every directory read */
	int older, idle, dry_run;
	json_t *listed; /* every id the backend listed */
	uint64_t older_than, idle_for, grace;
	long long now;
	json_t *victims;   /* [{"id", "reason"}], killed after the listing */
	int checked, kept, acted, failed;
};

static struct ctx *walk_ctx; /* nftw(3) passes no argument */

static int
ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n > m && !strcmp(s + n - m, suffix);
}

static void
add_ref(json_t *refs, const char *key, long long updated)
{
	if (key && *key && sbx_json_int(refs, key, -1) < updated)
		json_object_set_new(refs, key, json_integer(updated));
}

/* A state file naming a sandbox of our backend: remember its id, its
 * name and when the state was last updated. Other JSON is skipped. */
static void
add_state(const char *path, const struct stat *st, struct ctx *ctx)
{
	struct sbx_err err = {0};
	json_t *root, *ref;
	const char *be;
	long long updated;

	if (st->st_size > STATE_MAX)
		return;
	if (!(root = sbx_json_load_object(path, &err))) {
		/* Unreadable, it may name a sandbox; gone or not JSON, not. */
		if (err.code == SBX_EX_FAIL) {
			sbx_warn("%s; not killing unreferenced sandboxes",
			    err.msg);
			ctx->use_refs = 0;
		}
		return;
	}
	ref = json_object_get(root, "ref");
	be = sbx_json_str(ref, "backend");
	if (be && !strcmp(be, ctx->backend) && sbx_json_str(ref, "id")) {
		updated = sbx_json_int(root, "updated_at_epoch", -1);
		if (updated < 0)
			updated = st->st_mtime;
		add_ref(ctx->refs, sbx_json_str(ref, "id"), updated);
		add_ref(ctx->refs, sbx_json_str(ref, "name"), updated);
		sbx_note("'%s' names '%s'", path, sbx_json_str(ref, "id"));
	}
	json_decref(root);
}

/* A state file's temp file (X.json.tmpXXXXXX, X.json.baseline.tmpXXXXXX)
 * that a killed writer left: gone, unless a writer holds X.json's lock. */
static void
tidy_temp(const char *path, struct ctx *ctx)
{
	size_t n = strlen(path);
	char *state;

	if (n < 15 || strncmp(path + n - 10, ".tmp", 4) || ctx->dry_run)
		return;
	state = sbx_xasprintf("%.*s", (int)(n - 10), path);
	if (ends_with(state, ".json.baseline"))
		state[strlen(state) - 9] = '\0';
	if (ends_with(state, ".json") && sbx_state_tidy(state) == 0)
		sbx_note("removed what a killed writer of '%s' left", state);
	free(state);
}

static int
visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	switch (type) {
	case FTW_F:
		if (S_ISREG(st->st_mode) && ends_with(path, ".json"))
			add_state(path, st, walk_ctx);
		else if (S_ISREG(st->st_mode))
			tidy_temp(path, walk_ctx);
		break;
	case FTW_NS:
		/* A file that went while we looked (a renamed temp file)
		 * named no sandbox; any other miss may hide a reference. */
		if (errno == ENOENT || !ends_with(path, ".json"))
			break;
		/* FALLTHROUGH */
	case FTW_DNR:
		sbx_warn("cannot read '%s': %s; not killing unreferenced "
		    "sandboxes", path, strerror(errno));
		walk_ctx->use_refs = 0;
		break;
	}
	return 0;
}

static void
check_dir(const char *dir)
{
	struct stat st;

	if (stat(dir, &st) < 0)
		sbx_die(SBX_EX_USAGE, "cannot use state directory '%s':", dir);
	if (!S_ISDIR(st.st_mode))
		sbx_die(SBX_EX_USAGE, "'%s' is not a directory", dir);
}

/* Every state file under dir, recursively, never following a symlink. */
static int
scan_states(const char *dir, struct ctx *ctx)
{
	walk_ctx = ctx;
	if (nftw(dir, visit, 32, FTW_PHYS) < 0) {
		sbx_warn("cannot read '%s': %s; not killing unreferenced "
		    "sandboxes", dir, strerror(errno));
		ctx->use_refs = 0;
		return SBX_EX_FAIL;
	}
	return ctx->use_refs ? SBX_EX_OK : SBX_EX_FAIL;
}

/* When a state file naming this sandbox was last updated, or -1. */
static long long
last_update(const json_t *o, struct ctx *ctx)
{
	long long a = sbx_json_int(ctx->refs, sbx_json_str(o, "id"), -1);
	const char *name = sbx_json_str(o, "name");
	long long b = name ? sbx_json_int(ctx->refs, name, -1) : -1;

	return a > b ? a : b;
}

/* Whether t lies less than g seconds before now (or after it). */
static int
within(long long t, long long now, uint64_t g)
{
	return t > now || (uint64_t)(now - t) < g;
}

/* Why o is to go, or NULL. *kept says why when a reason held but the
 * grace period saved it. */
static const char *
reason_of(const json_t *o, struct ctx *ctx, const char **kept)
{
	const char *st = sbx_json_str(o, "status");
	long long age = sbx_json_int(o, "age", 0);
	long long idle = sbx_json_int(o, "idle", 0), used;
	uint64_t g = ctx->grace;
	int young, gone;
	const char *r = NULL;

	*kept = NULL;
	if (age < 0)
		age = 0;
	if (idle < 0)
		idle = 0;
	young = (uint64_t)age < g;
	st = st ? st : "";
	gone = !strcmp(st, "dead") || !strcmp(st, "killed");
	if (json_is_true(json_object_get(o, "creating"))) {
		/* Never half-kill a sandbox being created; one whose
		 * creation died long ago is dead. */
		if ((uint64_t)age < (g > CREATING_MAX ? g : CREATING_MAX)) {
			*kept = "it is being created";
			return NULL;
		}
		r = "dead";
	} else if (json_is_true(json_object_get(o, "warm")) &&
	    !strcmp(st, "running")) {
		/* Ended by its own idle timeout when no create takes it. */
		*kept = "it is made ahead for creates (local.warm)";
		return NULL;
	} else if (!strcmp(st, "expired")) {
		r = "expired";
	} else if (gone && !young) {
		r = "dead";
	} else if (ctx->older && (uint64_t)age >= ctx->older_than) {
		r = "older-than";
	} else if (ctx->idle && !strcmp(st, "running") &&
	    (uint64_t)idle >= ctx->idle_for) {
		/* A paused sandbox waits on purpose; --older-than still
		 * applies to it. */
		r = "idle";
	} else if (ctx->use_refs && last_update(o, ctx) < 0 && !young) {
		r = "unreferenced";
	} else if (young && (gone || (ctx->use_refs &&
	    last_update(o, ctx) < 0))) {
		*kept = "created within the grace period";
		return NULL;
	}
	/* A loop that updated its state lately is still at work. */
	if (r && (used = last_update(o, ctx)) >= 0 && within(used, ctx->now,
	    g)) {
		*kept = "its state was updated within the grace period";
		return NULL;
	}
	return r;
}

static int
one(json_t *o, void *arg)
{
	struct ctx *ctx = arg;
	const char *r, *id = sbx_json_str(o, "id"), *why;

	if (id)
		json_object_set_new(ctx->listed, id, json_true());
	if (!sbx_target_labels_match(o, ctx->want))
		return 0;
	if (!id)
		return 0;
	ctx->checked++;
	if ((r = reason_of(o, ctx, &why))) {
		json_array_append_new(ctx->victims, json_pack("{ssss}", "id",
		    id, "reason", r));
	} else if (why) {
		ctx->kept++;
		sbx_note("keeping '%s': %s", id, why);
	}
	return 0;
}

static void
print_result(const char *id, const char *reason, const char *action)
{
	json_t *o = json_pack("{ssssss}", "id", id, "reason", reason,
	    "action", action);

	sbx_out_json(o);
	json_decref(o);
}

/* The outcome of one kill, as a worker reports it: one write to a pipe,
 * which is atomic at this size. */
struct outcome {
	uint32_t i;
	int done;
	struct sbx_err err; /* code 0: killed */
};

static void
kill_one(const struct sbx_backend *be, const char *backend, const char *id,
    struct outcome *out)
{
	json_t *ref = json_pack("{ssss}", "backend", backend, "id", id);

	memset(&out->err, 0, sizeof out->err);
	if (be->ops->kill(ref, 0, &out->err) < 0 && !out->err.code)
		out->err.code = SBX_EX_FAIL;
	/* Its command log goes with it (sbx-logs(1)). */
	if (!out->err.code || out->err.code == SBX_EX_NOSANDBOX)
		sbx_cmdlog_remove(backend, sbx_json_str(ref, "id"));
	out->done = 1;
	json_decref(ref);
}

/* A kill mostly waits in the kernel (for processes to die, for cgroups
 * to go): JOBS at once end far sooner than one after the other. Worker k
 * kills victims k, k + JOBS, ... and reports each on one pipe. */
static void
kill_all(const struct sbx_backend *be, struct ctx *ctx, struct outcome *outs)
{
	size_t n = json_array_size(ctx->victims), jobs = n < JOBS ? n : JOBS;
	size_t i, k;
	struct outcome o;
	int p[2];

	if (jobs > 1 && pipe2(p, O_CLOEXEC) == 0) {
		fflush(stdout);
		fflush(stderr);
		for (k = 0; k < jobs; k++) {
			if (fork() != 0)
				continue;
			close(p[0]);
			for (i = k; i < n; i += jobs) {
				kill_one(be, ctx->backend, sbx_json_str(
				    json_array_get(ctx->victims, i), "id"), &o);
				o.i = (uint32_t)i;
				if (sbx_write_all(p[1], &o, sizeof o) < 0)
					_exit(1);
			}
			_exit(0);
		}
		close(p[1]);
		while (sbx_read_all(p[0], &o, sizeof o) == 0)
			if (o.i < n)
				outs[o.i] = o;
		close(p[0]);
		while (wait(NULL) > 0 || errno == EINTR)
			;
	}
	/* What no worker reported: one could not start, or died. */
	for (i = 0; i < n; i++)
		if (!outs[i].done)
			kill_one(be, ctx->backend, sbx_json_str(
			    json_array_get(ctx->victims, i), "id"), &outs[i]);
}

/* Print what became of victim i; its exit status. */
static int
report(size_t i, const struct outcome *out, struct ctx *ctx)
{
	const json_t *v = json_array_get(ctx->victims, i);
	const char *id = sbx_json_str(v, "id");
	const char *reason = sbx_json_str(v, "reason");

	if (ctx->dry_run) {
		print_result(id, reason, "would-kill");
	} else if (!out->err.code) {
		print_result(id, reason, "killed");
	} else if (out->err.code == SBX_EX_NOSANDBOX) {
		/* Someone else killed it meanwhile: what we wanted. */
		sbx_note("'%s' is already gone", id);
		return SBX_EX_OK;
	} else {
		sbx_warn("cannot kill '%s': %s", id, out->err.msg);
		print_result(id, reason, "failed");
		ctx->failed++;
		return out->err.code;
	}
	ctx->acted++;
	return SBX_EX_OK;
}

/* No two runs act at once: an exclusive flock on a file in the local
 * store, held until we exit, whatever the backend. 1 with the lock, 0
 * when another sbx-gc holds it, -1 when there is no store: nothing to
 * collect for a backend whose sandboxes live there; for another
 * (make), the store is made. */
static int
lock_store(int make)
{
	const char *root = sbx_local_root();
	char *path = sbx_xasprintf("%s/.gc.lock", root);
	struct sbx_err err = {0};
	int fd, rc = 1;

	/* As the local backend makes it: sandbox users may search it. */
	if (make && sbx_mkdirs(root, geteuid() ? 0700 : 0711, &err) < 0)
		sbx_die_err(&err);
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == ENOENT) {
		rc = -1;
	} else if (fd < 0) {
		sbx_die(SBX_EX_FAIL, "cannot open '%s':", path);
	} else if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK)
			sbx_die(SBX_EX_FAIL, "cannot lock '%s':", path);
		close(fd);
		rc = 0;
	}
	free(path);
	return rc;
}

static uint64_t
duration_arg(const char *opt, const char *s)
{
	struct sbx_err err;
	uint64_t v;

	if (sbx_opt_duration(opt, s, 0, 3650ull * 86400, &v,
	    &err) < 0)
		sbx_die_err(&err);
	return v;
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"backend", NULL, "the backend whose sandboxes to collect"},
	{"dry-run", NULL, "print what would be killed; kill nothing"},
	{"grace", NULL, "spare state files updated this recently (5m)"},
	{"idle-for", NULL, "kill the sandboxes idle this long"},
	{"label", NULL, "only sandboxes with this label (repeatable)"},
	{"older-than", NULL, "kill the sandboxes created this long ago"},
	{"state-dir", NULL, "kill what no state file under dir names"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-gc -n --older-than 2h",
	1,
};

int
main(int argc, char **argv)
{
	struct ctx ctx = {0};
	struct sbx_err err = {0};
	const struct sbx_backend *be;
	const char **dirs = NULL;
	struct outcome *outs = NULL;
	size_t ndirs = 0, i;
	int c, r, rc = SBX_EX_OK, locked = 1;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	ctx.want = json_object();
	ctx.refs = json_object();
	ctx.victims = json_array();
	ctx.grace = 300;
	while ((c = getopt_long(argc, argv, "b:d:g:hi:l:no:qvV", longopts,
	    NULL)) != -1) {
		switch (c) {
		case 'b':
			ctx.backend = optarg;
			break;
		case 'd':
			dirs = sbx_xrealloc(dirs, (ndirs + 1) * sizeof *dirs);
			dirs[ndirs++] = optarg;
			break;
		case 'g':
			ctx.grace = duration_arg("--grace", optarg);
			break;
		case 'i':
			ctx.idle = 1;
			ctx.idle_for = duration_arg("--idle-for", optarg);
			break;
		case 'l':
			if (sbx_parse_label(optarg, ctx.want, &err) < 0)
				sbx_die_err(&err);
			break;
		case 'n':
			ctx.dry_run = 1;
			break;
		case 'o':
			ctx.older = 1;
			ctx.older_than = duration_arg("--older-than", optarg);
			break;
		default:
			if (!sbx_opt_common(c, usage))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (optind < argc)
		sbx_usage_error(usage, "unexpected argument '%s'", argv[optind]);
	if (!ctx.backend)
		ctx.backend = sbx_backend_default();
	sbx_flavour_pick(ctx.backend);
	if (!(be = sbx_backend_get(ctx.backend, &err)) || sbx_backend_need(be,
	    ctx.idle ? SBX_CAP_IDLE : 0, &err) < 0)
		sbx_die_err(&err);
	for (i = 0; i < ndirs; i++)
		check_dir(dirs[i]);
	/* A dry run changes nothing: it needs no lock. */
	if (!ctx.dry_run && !(locked = lock_store(!be->in_store))) {
		sbx_warn("another sbx-gc is running: leaving the work to it");
		goto out;
	}
	ctx.use_refs = ndirs > 0;
	for (i = 0; i < ndirs; i++)
		if ((r = scan_states(dirs[i], &ctx)) > rc)
			rc = r;
	ctx.now = sbx_now();
	ctx.listed = json_object();
	if (locked > 0 && be->ops->list(one, &ctx, &err) < 0)
		sbx_die_err(&err);
	/* Logs of sandboxes that ended out of our sight (sbx-logs(1)). */
	if (locked > 0 && !ctx.dry_run)
		sbx_cmdlog_sweep(be->name, ctx.listed, ctx.now);
	/* And what such sandboxes left on this host (a docker agent's
	 * directory). */
	if (locked > 0 && !ctx.dry_run && be->ops->sweep)
		be->ops->sweep(ctx.now);
	outs = sbx_xcalloc(json_array_size(ctx.victims) + 1, sizeof *outs);
	if (!ctx.dry_run)
		kill_all(be, &ctx, outs);
	/* What a kill's remover left in the local store's trash (one
	 * killed), and what these kills put there: gone when we end. */
	if (locked > 0 && !ctx.dry_run && !strcmp(be->name, "local") &&
	    sbx_local_sweep() < 0)
		sbx_warn("cannot empty '%s/.trash'", sbx_local_root());
	for (i = 0; i < json_array_size(ctx.victims); i++)
		if ((r = report(i, &outs[i], &ctx)) > rc)
			rc = r;
	if (ctx.failed)
		sbx_warn("%d %s, %d failed, %d kept (grace), %d checked",
		    ctx.acted, ctx.dry_run ? "to kill (dry run)" : "killed",
		    ctx.failed, ctx.kept, ctx.checked);
	else
		sbx_warn("%d %s, %d kept (grace), %d checked", ctx.acted,
		    ctx.dry_run ? "to kill (dry run)" : "killed", ctx.kept,
		    ctx.checked);
out:
	json_decref(ctx.want);
	json_decref(ctx.listed);
	json_decref(ctx.refs);
	json_decref(ctx.victims);
	free(dirs);
	free(outs);
	return sbx_out_close(rc);
}
