/* sbx-kill - destroy sandboxes; idempotent */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx-kill [-kqv] [-b backend] [-I id | -s file] [-F dir] "
    "[id ...]\n";

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"final-sync", required_argument, NULL, 'F'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"id", required_argument, NULL, 'I'},
	{"keep", no_argument, NULL, 'k'},
	{"quiet", no_argument, NULL, 'q'},
	{"state", required_argument, NULL, 's'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

struct ctx {
	const char *backend;
	const char *explicit_backend; /* -b, when given */
	const char *final_sync; /* a project to pull into first, or NULL */
	int keep;
};

/* --final-sync: sbx-sync pull, the one beside us (or on PATH), before
 * the sandbox goes; a pull that fails keeps it. */
static int
final_sync(const struct ctx *ctx, const char *state, const json_t *ref)
{
	char *self = sbx_sibling("sbx-sync"), *argv[10];
	int i = 0, status;
	pid_t pid;

	argv[i++] = self && access(self, X_OK) == 0 ? self : "sbx-sync";
	argv[i++] = "pull";
	/* What the pull leaves (a conflict, a link) would go with the
	 * sandbox: that keeps it. */
	argv[i++] = "--strict";
	if (sbx_quiet)
		argv[i++] = "-q";
	if (state) {
		argv[i++] = "-s";
		argv[i++] = (char *)state;
	} else {
		argv[i++] = "-b";
		argv[i++] = (char *)sbx_json_str(ref, "backend");
		argv[i++] = "-I";
		argv[i++] = (char *)sbx_json_str(ref, "id");
	}
	argv[i++] = (char *)ctx->final_sync;
	argv[i] = NULL;
	fflush(stdout);
	if ((pid = fork()) == 0) {
		/* Our stdout carries kill results only: its summary goes
		 * with the diagnostics. */
		dup2(2, 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	free(self);
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return SBX_EX_FAIL;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return SBX_EX_OK;
	/* Gone already: nothing to pull, and kill says so. */
	if (WIFEXITED(status) && WEXITSTATUS(status) == SBX_EX_NOSANDBOX)
		return -1;
	sbx_warn("'%s' not killed: the final sync into '%s' failed", state ?
	    state : sbx_json_str(ref, "id"), ctx->final_sync);
	return SBX_EX_FAIL;
}

static void
print_result(const json_t *ref, const char *status)
{
	json_t *o = json_pack("{ssssss}", "backend", sbx_json_str(ref,
	    "backend"), "id", sbx_json_str(ref, "id"), "status", status);

	sbx_out_json(o);
	json_decref(o);
}

/* named: a state file or a ref names the sandbox, so it existed and gone
 * is done; a bare id the backend does not know may be a typo: exit 3. One
 * that was there when asked and went before the kill is gone, as named. */
static int
kill_ref(json_t *ref, struct ctx *ctx, int named)
{
	const struct sbx_backend *be;
	struct sbx_err err = {0};
	json_t *info;

	if (!(be = sbx_backend_of(ref, &err))) {
		sbx_warn("%s", err.msg);
		return err.code;
	}
	if (!named && (info = be->ops->info(ref, &err))) {
		named = 1;
		json_decref(info);
	} else if (!named && err.code == SBX_EX_NOSANDBOX) {
		/* Not ours is said as kill says it, below. */
		if (strstr(err.msg, SBX_NOT_OURS))
			sbx_warn("cannot kill '%s': %s",
			    sbx_json_str(ref, "id"), err.msg);
		else
			sbx_warn("%s", err.msg);
		return SBX_EX_NOSANDBOX;
	}
	if ((ctx->keep && sbx_backend_need(be, SBX_CAP_KEEP, &err) < 0) ||
	    be->ops->kill(ref, ctx->keep, &err) < 0) {
		/* Gone is done; one that is not ours is not gone. */
		if (err.code == SBX_EX_NOSANDBOX && !named &&
		    !strstr(err.msg, SBX_NOT_OURS)) {
			sbx_warn("%s", err.msg);
			return SBX_EX_NOSANDBOX;
		}
		if (err.code == SBX_EX_NOSANDBOX && !strstr(err.msg,
		    SBX_NOT_OURS)) {
			sbx_warn("'%s' is already gone", sbx_json_str(ref, "id"));
			sbx_cmdlog_remove(be->name, sbx_json_str(ref, "id"));
			print_result(ref, "gone");
			return SBX_EX_OK;
		}
		sbx_warn("cannot kill '%s': %s", sbx_json_str(ref, "id"), err.msg);
		return err.code ? err.code : SBX_EX_FAIL;
	}
	/* Its log goes with it; -k keeps it with the rest, until sbx-gc. */
	if (!ctx->keep)
		sbx_cmdlog_remove(be->name, sbx_json_str(ref, "id"));
	print_result(ref, "killed");
	return SBX_EX_OK;
}

static int
kill_id(const char *id, void *arg)
{
	struct ctx *ctx = arg;
	struct sbx_err err = {0};
	json_t *ref;
	int rc;

	if (!(ref = sbx_ref_find(ctx->explicit_backend, id, &err))) {
		sbx_warn("%s", err.msg);
		return err.code;
	}
	/* A sandbox already gone has nothing to pull: kill reports it. */
	if (ctx->final_sync && (rc = final_sync(ctx, NULL, ref)) > 0) {
		json_decref(ref);
		return rc;
	}
	/* One sbx_ref_find saw needs no second look (a local sandbox's
	 * info asks its agent and reads its cgroups). */
	rc = kill_ref(ref, ctx, sbx_target_from_ref() || sbx_ref_found());

	json_decref(ref);
	return rc;
}

/* Kill the sandbox of a state file, and mark the state killed. */
static int
kill_state(const char *path, void *arg)
{
	struct ctx *ctx = arg;
	struct sbx_state st;
	struct sbx_err err = {0};
	int rc;

	/* Before the state is locked: sbx-sync locks it too. */
	if (ctx->final_sync && access(path, F_OK) == 0 &&
	    (rc = final_sync(ctx, path, NULL)) > 0)
		return rc;
	if (sbx_target_state_open(&st, path, ctx->explicit_backend, &err) < 0)
		sbx_die_err(&err);
	rc = kill_ref(json_object_get(st.root, "ref"), ctx, 1);
	/* No fsync: a "killed" lost to a crash names a sandbox that is gone,
	 * which every tool takes as gone. */
	st.lazy = 1;
	if (sbx_target_state_close(&st, rc == SBX_EX_OK ? "killed" : NULL,
	    &err) < 0) {
		sbx_warn("%s", err.msg);
		rc = SBX_EX_FAIL;
	}
	return rc;
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"backend", NULL, "the backend the ids belong to"},
	{"final-sync", NULL, "pull into dir first; kill only if that works"},
	{"keep", NULL, "keep the sandbox's directory and its files"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-kill --final-sync . --state .sbx/run.json",
	1,
};

int
main(int argc, char **argv)
{
	struct sbx_target t = {0};
	struct ctx ctx = {0};
	struct sbx_err err = {0};
	int c, rc;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, "b:F:hI:kqs:vV", longopts, NULL)) !=
	    -1) {
		switch (c) {
		case 'k':
			ctx.keep = 1;
			break;
		case 'F':
			ctx.final_sync = optarg;
			break;
		default:
			if (!sbx_opt_common(c, usage) &&
			    !sbx_target_opt(c, optarg, &t))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	ctx.backend = t.backend ? t.backend : sbx_backend_default();
	ctx.explicit_backend = t.backend;
	sbx_flavour_pick_target(&t, argc - optind);
	if (!sbx_backend_get(ctx.backend, &err))
		sbx_die_err(&err);
	/* More than one named, or ids from stdin: more than one project. */
	if (ctx.final_sync && (argc - optind + (t.id != NULL) > 1 ||
	    (optind == argc && !sbx_ref_explicit(&t) && sbx_stdin_has_ids())))
		sbx_usage_error(usage, "--final-sync pulls into one project: "
		    "name one sandbox");
	rc = sbx_each_target(&t, argv + optind, argc - optind, kill_id,
	    kill_state, &ctx, &err);
	if (rc < 0)
		sbx_die_err(&err);
	return sbx_out_close(rc);
}
