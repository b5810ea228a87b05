/* sbx-pause - pause a sandbox, or resume it; print its ref */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sbx.h"

enum { OPT_MEMORY = 256, OPT_ARCHIVE };

static const char usage[] =
    "usage: sbx-pause [-qrv] [-m suspend|stop|archive | --archive |\n"
    "                 --memory[=true|false]]\n"
    "                 [-b backend] [-I id | -s file] [id ...]\n"
    "       sbx-pause -S [-b backend]\n";

static const struct option longopts[] = {
	{"archive", no_argument, NULL, OPT_ARCHIVE},
	{"backend", required_argument, NULL, 'b'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"id", required_argument, NULL, 'I'},
	{"memory", optional_argument, NULL, OPT_MEMORY},
	{"mode", required_argument, NULL, 'm'},
	{"quiet", no_argument, NULL, 'q'},
	{"resume", no_argument, NULL, 'r'},
	{"semantics", no_argument, NULL, 'S'},
	{"state", required_argument, NULL, 's'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

struct ctx {
	const char *backend;
	const char *explicit_backend; /* -b, when given */
	int resume;
	int mode, stop; /* --mode given; it is stop (1) or archive (2) */
	int memory;     /* it was given as --memory */
};

/* The ref, secret-free as refs are, with what became of the sandbox. */
static void
print_ref(const json_t *ref, const char *status)
{
	json_t *o = json_deep_copy(ref);

	json_object_set_new(o, "status", json_string(status));
	sbx_out_json(o);
	json_decref(o);
}

static const char *
act(json_t *ref, const struct ctx *ctx, int *rc)
{
	const struct sbx_backend *be;
	struct sbx_err err = {0};
	unsigned caps, extra = 0;
	char *p;
	int stop;

	*rc = SBX_EX_OK;
	if (!(be = sbx_backend_of(ref, &err))) {
		sbx_warn("%s", err.msg);
		*rc = err.code;
		return NULL;
	}
	/* A sandbox may do more than its backend's others (Daytona's VM
	 * classes suspend): asked only when a suspend is in question. What
	 * it adds is not asked of the backend. */
	if (!ctx->resume && (!ctx->mode || !ctx->stop) &&
	    !(be->caps & SBX_CAP_SUSPEND) && be->ops->sandbox_caps)
		extra = be->ops->sandbox_caps(ref, &err);
	memset(&err, 0, sizeof err);
	caps = be->caps | extra;
	/* Without --mode, pause does what the sandbox does by default. */
	stop = ctx->mode ? ctx->stop : !(caps & SBX_CAP_SUSPEND);
	if (!(caps & (SBX_CAP_SUSPEND | SBX_CAP_STOP)))
		sbx_err_set(&err, SBX_EX_USAGE, "backend '%s' cannot pause",
		    be->name);
	else if (!ctx->resume && sbx_backend_need(be, ~extra & (stop == 2 ?
	    SBX_CAP_ARCHIVE : stop ? SBX_CAP_STOP : SBX_CAP_SUSPEND),
	    &err) < 0 && ctx->memory &&
	    (p = strstr(err.msg, " (--mode ")))
		/* The refusal names the flag as it was given. */
		snprintf(p, sizeof err.msg - (size_t)(p - err.msg),
		    " (--memory=%s)", stop ? "false" : "true");
	if (err.code) {
		sbx_warn("%s", err.msg);
		*rc = err.code;
		return NULL;
	}
	if ((ctx->resume ? be->ops->resume(ref, &err) : be->ops->pause(ref, stop,
	    &err)) < 0) {
		sbx_warn("cannot %s '%s': %s", ctx->resume ? "resume" : "pause",
		    sbx_json_str(ref, "id"), err.msg);
		*rc = err.code ? err.code : SBX_EX_FAIL;
		return NULL;
	}
	return ctx->resume ? "running" : stop ? "stopped" : "paused";
}

static int
act_id(const char *id, void *arg)
{
	struct ctx *ctx = arg;
	struct sbx_err err = {0};
	json_t *ref = sbx_ref_find(ctx->explicit_backend, id, &err);
	const char *st;
	int rc;

	if (!ref) {
		sbx_warn("%s", err.msg);
		return err.code;
	}
	if ((st = act(ref, ctx, &rc)))
		print_ref(ref, st);
	json_decref(ref);
	return rc;
}

/* The sandbox of a state file; its status and billable segments follow
 * (a pause closes a segment, a resume opens one). */
static int
act_state(const char *path, void *arg)
{
	struct ctx *ctx = arg;
	struct sbx_state st;
	struct sbx_err err = {0};
	const char *status;
	json_t *ref;
	int rc;

	if (sbx_target_state_open(&st, path, ctx->explicit_backend, &err) < 0)
		sbx_die_err(&err);
	ref = json_object_get(st.root, "ref");
	/* Printed before the close releases ref. */
	if ((status = act(ref, ctx, &rc)))
		print_ref(ref, status);
	if (sbx_target_state_close(&st, status, &err) < 0) {
		sbx_warn("%s", err.msg);
		rc = SBX_EX_FAIL;
	}
	return rc;
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"archive", NULL, "stop, then archive (--mode archive)"},
	{"backend", NULL, "the backend the ids belong to"},
	{"memory", "true|false", "keep the memory (suspend) or only the files (stop)"},
	{"mode", NULL, "how to pause: suspend, stop or archive"},
	{"resume", NULL, "resume the sandboxes instead"},
	{"semantics", NULL, "print what pausing does on the backend"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-pause -m stop -s .sbx/s.json",
	1,
};

int
main(int argc, char **argv)
{
	struct sbx_target t = {0};
	struct ctx ctx = {0};
	struct sbx_err err = {0};
	const struct sbx_backend *be;
	const char *mode = NULL;
	int c, rc, semantics = 0, memory = 0, archive = 0;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, "b:hI:m:qrSs:vV", longopts,
	    NULL)) != -1) {
		switch (c) {
		case OPT_ARCHIVE:
			if (memory)
				sbx_usage_error(usage, "give --memory or "
				    "--archive, not both");
			if (mode && strcmp(mode, "archive"))
				sbx_usage_error(usage, "give --mode or "
				    "--archive, not both");
			mode = "archive";
			archive = 1;
			break;
		case 'm':
			if (memory)
				sbx_usage_error(usage, "give --mode or "
				    "--memory, not both");
			if (archive)
				sbx_usage_error(usage, "give --mode or "
				    "--archive, not both");
			mode = optarg;
			break;
		case OPT_MEMORY:
			/* E2B's pause {"memory": false}: a suspend keeps
			 * the memory, a stop only the files. */
			if (archive)
				sbx_usage_error(usage, "give --memory or "
				    "--archive, not both");
			if (mode && !memory)
				sbx_usage_error(usage, "give --mode or "
				    "--memory, not both");
			if (!optarg || !strcmp(optarg, "true"))
				mode = "suspend";
			else if (!strcmp(optarg, "false"))
				mode = "stop";
			else
				sbx_usage_error(usage, "--memory must be true "
				    "or false, not '%s'", optarg);
			memory = 1;
			break;
		case 'r':
			ctx.resume = 1;
			break;
		case 'S':
			semantics = 1;
			break;
		default:
			if (!sbx_opt_common(c, usage) &&
			    !sbx_target_opt(c, optarg, &t))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (mode && strcmp(mode, "suspend") && strcmp(mode, "stop") &&
	    strcmp(mode, "archive"))
		sbx_usage_error(usage, "--mode must be suspend, stop or "
		    "archive, not '%s'", mode);
	if (mode && ctx.resume)
		sbx_usage_error(usage, "--%s is for pausing; --resume "
		    "resumes however it was paused", memory ? "memory" :
		    "mode");
	ctx.mode = mode != NULL;
	ctx.memory = memory;
	ctx.stop = !mode ? 0 : !strcmp(mode, "stop") ? 1 :
	    !strcmp(mode, "archive") ? 2 : 0;
	ctx.backend = t.backend ? t.backend : sbx_backend_default();
	ctx.explicit_backend = t.backend;
	sbx_flavour_pick_target(&t, argc - optind);
	if (!(be = sbx_backend_get(ctx.backend, &err)))
		sbx_die_err(&err);
	if (semantics) {
		json_t *o = json_pack("{sssss[]}", "backend", be->name, "pause",
		    sbx_backend_pause_default(be), "modes");

		if (be->caps & SBX_CAP_SUSPEND)
			json_array_append_new(json_object_get(o, "modes"),
			    json_string("suspend"));
		if (be->caps & SBX_CAP_STOP)
			json_array_append_new(json_object_get(o, "modes"),
			    json_string("stop"));
		if (be->caps & SBX_CAP_ARCHIVE)
			json_array_append_new(json_object_get(o, "modes"),
			    json_string("archive"));
		sbx_out_json(o);
		json_decref(o);
		return sbx_out_close(SBX_EX_OK);
	}
	rc = sbx_each_target(&t, argv + optind, argc - optind, act_id, act_state,
	    &ctx, &err);
	if (rc < 0)
		sbx_die_err(&err);
	return sbx_out_close(rc);
}
