/* sbx-kill - destroy sandboxes; idempotent */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx-kill [-kqv] [-b backend] [-I id | -s file] [id ...]\n";

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"help", no_argument, NULL, 'h'},
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
	int keep;
};

static void
print_result(const json_t *ref, const char *status)
{
	json_t *o = json_pack("{ssssss}", "backend", sbx_json_str(ref,
	    "backend"), "id", sbx_json_str(ref, "id"), "status", status);

	sbx_out_json(o);
	json_decref(o);
}

static int
kill_ref(json_t *ref, struct ctx *ctx)
{
	const struct sbx_backend *be;
	struct sbx_err err = {0};

	if (!(be = sbx_backend_of(ref, &err))) {
		sbx_warn("%s", err.msg);
		return err.code;
	}
	if (be->kill(ref, ctx->keep, &err) < 0) {
		if (err.code == SBX_EX_NOSANDBOX) {
			sbx_warn("'%s' is already gone", sbx_json_str(ref, "id"));
			print_result(ref, "gone");
			return SBX_EX_OK;
		}
		sbx_warn("cannot kill '%s': %s", sbx_json_str(ref, "id"), err.msg);
		return err.code ? err.code : SBX_EX_FAIL;
	}
	print_result(ref, "killed");
	return SBX_EX_OK;
}

static int
kill_id(const char *id, void *arg)
{
	struct ctx *ctx = arg;
	json_t *ref = json_pack("{ssss}", "backend", ctx->backend, "id", id);
	int rc = kill_ref(ref, ctx);

	json_decref(ref);
	return rc;
}

/* Kill the sandbox of a state file, and mark the state killed. */
static int
kill_state(const char *path, struct ctx *ctx)
{
	struct sbx_state st;
	struct sbx_err err = {0};
	int rc;

	if (sbx_state_open(&st, path, &err) < 0) {
		if (err.code == SBX_EX_NOSANDBOX)
			sbx_err_set(&err, SBX_EX_NOSANDBOX,
			    "no sandbox: no state file '%s'", path);
		sbx_die_err(&err);
	}
	if (!json_object_size(st.root)) {
		unlink(path);
		sbx_die(SBX_EX_NOSANDBOX, "no sandbox: no state file '%s'", path);
	}
	rc = kill_ref(json_object_get(st.root, "ref"), ctx);
	if (rc == SBX_EX_OK) {
		sbx_state_set_status(st.root, "killed");
		if (sbx_state_save(&st, &err) < 0) {
			sbx_warn("%s", err.msg);
			rc = SBX_EX_FAIL;
		}
	}
	sbx_state_release(&st);
	return rc;
}

static int
stdin_has_ids(void)
{
	struct stat st;

	return fstat(0, &st) == 0 && (S_ISFIFO(st.st_mode) ||
	    S_ISSOCK(st.st_mode) || S_ISREG(st.st_mode));
}

int
main(int argc, char **argv)
{
	struct sbx_target t = {0};
	struct ctx ctx = {0};
	struct sbx_err err = {0};
	int c, i, r, rc = SBX_EX_OK, count;

	sbx_prog_set(argv);
	while ((c = getopt_long(argc, argv, "b:hI:kqs:vV", longopts, NULL)) !=
	    -1) {
		switch (c) {
		case 'b':
			t.backend = optarg;
			break;
		case 'I':
			t.id = optarg;
			break;
		case 'k':
			ctx.keep = 1;
			break;
		case 's':
			t.state_path = optarg;
			break;
		default:
			if (!sbx_opt_common(c, usage))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	ctx.backend = t.backend ? t.backend : sbx_backend_default();
	if (!sbx_backend_get(ctx.backend, &err))
		sbx_die_err(&err);
	if (optind < argc || t.id) {
		if (t.id && (r = kill_id(t.id, &ctx)) > rc)
			rc = r;
		for (i = optind; i < argc; i++)
			if ((r = kill_id(argv[i], &ctx)) > rc)
				rc = r;
		return sbx_out_close(rc);
	}
	/* Ids come down a pipe or from a file; an empty one means nothing
	 * to kill, never the sandbox of the current directory. */
	if (!sbx_ref_explicit(&t) && stdin_has_ids()) {
		rc = sbx_each_stdin_id(kill_id, &ctx, &count);
		if (!count)
			sbx_note("no ids on standard input");
		return sbx_out_close(rc);
	}
	if (!t.state_path)
		t.state_path = getenv("SBX_STATE") && *getenv("SBX_STATE") ?
		    getenv("SBX_STATE") : SBX_STATE_DEFAULT;
	if (!strcmp(t.state_path, SBX_STATE_DEFAULT) &&
	    access(SBX_STATE_DEFAULT, F_OK) < 0)
		sbx_die(SBX_EX_NOSANDBOX,
		    "no sandbox: no ids, no --state, and no '%s'",
		    SBX_STATE_DEFAULT);
	return sbx_out_close(kill_state(t.state_path, &ctx));
}
