/* sbx-sync - push a project into a sandbox, pull changes and deletions back */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx-sync push [-nqv] [--delete] [-z gzip|zstd|none] [-a glob]... "
    "[-x glob]...\n"
    "                     [-m size] [-L warn|skip] [-s file | -I id [-b "
    "backend]] [dir]\n"
    "       sbx-sync pull [-nqv] [--theirs | --ours] [--full] "
    "[--links keep|skip]\n"
    "                     [--trust-config] [--strict] [-x glob]... [-s file "
    "| -I id\n"
    "                     [-b backend]] [dir]\n"
    "       sbx-sync status [-qv] [--full] [--links keep|skip] "
    "[--trust-config]\n"
    "                       [-x glob]... [-s file | -I id [-b backend]] "
    "[dir]\n";

enum {
	OPT_DELETE = 256, OPT_THEIRS, OPT_OURS, OPT_FULL, OPT_LINKS, OPT_TRUST,
	OPT_STRICT
};

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"compress", required_argument, NULL, 'z'},
	{"delete", no_argument, NULL, OPT_DELETE},
	{"dry-run", no_argument, NULL, 'n'},
	{"exclude", required_argument, NULL, 'x'},
	{"full", no_argument, NULL, OPT_FULL},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"id", required_argument, NULL, 'I'},
	{"include", required_argument, NULL, 'a'},
	{"large", required_argument, NULL, 'L'},
	{"links", required_argument, NULL, OPT_LINKS},
	{"max-file-size", required_argument, NULL, 'm'},
	{"ours", no_argument, NULL, OPT_OURS},
	{"quiet", no_argument, NULL, 'q'},
	{"state", required_argument, NULL, 's'},
	{"strict", no_argument, NULL, OPT_STRICT},
	{"theirs", no_argument, NULL, OPT_THEIRS},
	{"trust-config", no_argument, NULL, OPT_TRUST},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

static void
print_plan(const char *path, const char *action, const char *why,
    uint64_t size, void *arg)
{
	json_t *o = json_object();

	(void)arg;
	json_object_set_new(o, "path", sbx_json_bytes(path, strlen(path)));
	json_object_set_new(o, "action", json_string(action));
	json_object_set_new(o, "size", json_integer((json_int_t)size));
	if (why)
		json_object_set_new(o, "why", json_string(why));
	sbx_out_json(o);
	json_decref(o);
}

/* The state file's absolute name, and its directory relative to the
 * project when it lies inside (that directory never travels). */
static void
locate_state(const char *state, const char *project, char **abs_out,
    char **rel_out, char **file_out)
{
	char dir[PATH_MAX], proj[PATH_MAX], *copy = sbx_xstrdup(state), *slash;
	const char *base;
	size_t n;

	*abs_out = *rel_out = *file_out = NULL;
	slash = strrchr(copy, '/');
	if (slash) {
		*slash = '\0';
		base = slash + 1;
	} else
		base = copy;
	if (!realpath(slash ? (*copy ? copy : "/") : ".", dir) ||
	    !realpath(project, proj)) {
		free(copy);
		return;
	}
	*abs_out = sbx_xasprintf("%s/%s", strcmp(dir, "/") ? dir : "", base);
	n = strlen(proj);
	if (!strncmp(dir, proj, n) && dir[n] == '/') {
		*rel_out = sbx_xstrdup(dir + n + 1);
		*file_out = sbx_xasprintf("%s/%s", dir + n + 1, base);
	} else if (!strcmp(dir, proj))
		*file_out = sbx_xstrdup(base);
	free(copy);
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"compress", NULL, "push: the stream's compression"},
	{"delete", NULL, "push: delete what is gone here since a push"},
	{"dry-run", NULL, "push, pull: print what would be done"},
	{"exclude", NULL, "neither push nor pull these paths (repeatable)"},
	{"full", NULL, "pull, status: look at every file, not changes"},
	{"include", NULL, "push: send only these paths (repeatable)"},
	{"large", NULL, "push: files over -m are sent (warn) or skipped"},
	{"links", NULL, "pull, status: symlinks out of the project"},
	{"max-file-size", NULL, "push: a file larger than this is large"},
	{"ours", NULL, "pull: on a conflict keep the host's version"},
	{"strict", NULL, "pull: a conflict or held-back file exits 1"},
	{"theirs", NULL, "pull: on a conflict take the sandbox's version"},
	{"trust-config", NULL, "pull, status: take config files as any other"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-sync push -s .sbx/run.json && sbx-sync pull -s .sbx/run.json",
	1,
};

static const char shortopts[] = "a:b:hI:L:m:nqs:vVx:z:";

int
main(int argc, char **argv)
{
	struct sbx_sync_opts o = {0};
	struct sbx_sync_result r;
	struct sbx_target t = {0};
	struct sbx_err err = {0};
	struct sbx_state stb;
	const struct sbx_backend *be;
	const char *cmd, *project = ".", *state = NULL, *z = NULL;
	char *state_abs = NULL, *statedir = NULL, *statefile = NULL;
	struct stat st;
	long long t0 = sbx_mono_ms();
	int c, rc, status = 0, push = 0, strict = 0;
	uint64_t u;

	sbx_prog_set(argv);
	/* argv + 1: the options are parsed after the command. */
	sbx_opt_init(&help, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "-h"))
		sbx_usage(usage, SBX_EX_OK);
	if (argc > 1 && !strcmp(argv[1], "--help"))
		sbx_opt_common(SBX_OPT_HELP, usage);
	if (argc > 1 && (!strcmp(argv[1], "-V") ||
	    !strcmp(argv[1], "--version")))
		sbx_version();
	sbx_opt_cmd_first(argc, argv, shortopts, longopts);
	if (argc < 2 || argv[1][0] == '-') {
		/* No command: an unknown option is said first. */
		sbx_opt_init(&help, argv);
		while ((c = getopt_long(argc, argv, shortopts, longopts,
		    NULL)) != -1)
			if (!sbx_opt_common(c, usage) && c == '?')
				sbx_usage(usage, SBX_EX_USAGE);
		sbx_usage_error(usage, "a command is required: push, pull "
		    "or status");
	}
	cmd = argv[1];
	if (!strcmp(cmd, "push"))
		push = 1;
	else if (!strcmp(cmd, "status"))
		status = 1;
	else if (strcmp(cmd, "pull"))
		sbx_usage_error(usage, "unknown command '%s' (push, pull or "
		    "status)", cmd);
	argv++;
	argc--;
	o.exclude = sbx_ignore_new();
	o.include = sbx_ignore_new();
	while ((c = getopt_long(argc, argv, shortopts, longopts,
	    NULL)) != -1) {
		switch (c) {
		case 'a':
		case 'z':
		case 'm':
		case 'L':
			if (!push)
				sbx_usage_error(usage, "-%c is an option of "
				    "push", c);
			if (c == 'a')
				sbx_ignore_add(o.include, optarg);
			else if (c == 'z')
				z = optarg;
			else if (c == 'm') {
				if (sbx_parse_size(optarg, &u) < 0)
					sbx_usage_error(usage, "invalid size "
					    "'%s'", optarg);
				o.max_size = u;
			} else if (!strcmp(optarg, "skip"))
				o.large_skip = 1;
			else if (strcmp(optarg, "warn"))
				sbx_usage_error(usage, "--large must be warn "
				    "or skip, not '%s'", optarg);
			break;
		case 'x':
			sbx_ignore_add(o.exclude, optarg);
			break;
		case 'n':
			if (status)
				sbx_usage_error(usage, "status changes nothing "
				    "already; -n is for push and pull");
			o.dry_run = 1;
			break;
		case OPT_DELETE:
			if (!push)
				sbx_usage_error(usage, "--delete is an option "
				    "of push");
			o.delete = 1;
			break;
		case OPT_FULL:
			if (push)
				sbx_usage_error(usage, "--full is an option of "
				    "pull and status");
			o.full = 1;
			break;
		case OPT_LINKS:
		case OPT_TRUST:
			if (push)
				sbx_usage_error(usage, "--%s is an option of "
				    "pull and status", c == OPT_LINKS ?
				    "links" : "trust-config");
			if (c == OPT_TRUST)
				o.trust_config = 1;
			else if (!strcmp(optarg, "keep"))
				o.links_keep = 1;
			else if (!strcmp(optarg, "skip"))
				o.links_keep = 0;
			else
				sbx_usage_error(usage, "--links must be keep "
				    "or skip, not '%s'", optarg);
			break;
		case OPT_STRICT:
			if (push || status)
				sbx_usage_error(usage, "--strict is an option "
				    "of pull");
			strict = 1;
			break;
		case OPT_THEIRS:
		case OPT_OURS:
			if (push || status)
				sbx_usage_error(usage, "--%s is an option of "
				    "pull", c == OPT_OURS ? "ours" : "theirs");
			if (c == OPT_OURS)
				o.ours = 1;
			else
				o.theirs = 1;
			break;
		default:
			if (!sbx_opt_common(c, usage) &&
			    !sbx_target_opt(c, optarg, &t))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (o.ours && o.theirs)
		sbx_usage_error(usage, "--ours and --theirs exclude each other");
	if (optind < argc)
		project = argv[optind++];
	if (optind < argc)
		sbx_usage_error(usage, "one directory at most ('%s')",
		    argv[optind]);
	if (z && strcmp(z, "gzip") && strcmp(z, "zstd") && strcmp(z, "none"))
		sbx_usage_error(usage, "--compress must be gzip, zstd or none, "
		    "not '%s'", z);
	if (stat(project, &st) < 0 || !S_ISDIR(st.st_mode))
		sbx_die(SBX_EX_USAGE, "no such directory '%s'", project);

	/* The backend now, before anything is read or written. */
	if (!(o.ref = sbx_ref_resolve(&t, &state, &err)))
		sbx_die_err(&err);
	sbx_flavour_pick(sbx_json_str(o.ref, "backend"));
	if (!(be = sbx_backend_of(o.ref, &err)) ||
	    sbx_backend_need(be, SBX_CAP_FILES | (z && !strcmp(z, "zstd") ?
	    SBX_CAP_ZSTD : 0), &err) < 0)
		sbx_die_err(&err);
	if (state)
		locate_state(state, project, &state_abs, &statedir,
		    &statefile);
	o.state_path = state_abs;
	o.statedir = statedir;
	o.statefile = statefile;
	/* Held to the end: two syncs of one state never interleave. */
	if (state_abs) {
		if (sbx_state_open(&stb, state_abs, &err) < 0)
			sbx_die_err(&err);
		o.state = &stb;
	}
	if (!z)
		o.z = be->compress;
	else
		o.z = !strcmp(z, "gzip") ? SBX_COMPRESS_GZIP : !strcmp(z,
		    "zstd") ? SBX_COMPRESS_ZSTD : SBX_COMPRESS_NONE;
	if (chdir(project) < 0)
		sbx_die(SBX_EX_FAIL, "cannot enter '%s':", project);
	o.sbxignore = sbx_ignore_new();
	if (sbx_ignore_load(o.sbxignore, ".sbxignore", &err) < 0)
		sbx_die_err(&err);
	if (status || o.dry_run)
		o.plan = print_plan;
	/* A receiver that dies shows as EPIPE, and its message says why. */
	signal(SIGPIPE, SIG_IGN);

	sbx_progress_start(!status && !o.dry_run && !sbx_quiet &&
	    isatty(STDERR_FILENO));
	if (push)
		rc = sbx_sync_push(&o, &r, &err);
	else
		rc = sbx_sync_pull(&o, status, &r, &err);
	sbx_progress_end();
	if (rc < 0 && (push || err.code != SBX_EX_FAIL || (!r.conflicts &&
	    !r.held)))
		sbx_die_err(&err);
	if (!status && !o.dry_run) {
		json_t *j = json_pack("{sIsIsIsIsI}", "files",
		    (json_int_t)r.files, "bytes", (json_int_t)r.bytes,
		    "deleted", (json_int_t)r.deleted, "conflicts",
		    (json_int_t)r.conflicts, "ms",
		    (json_int_t)(sbx_mono_ms() - t0));

		if (!push) {
			json_object_set_new(j, "listed", json_string(r.partial ?
			    "changed" : "all"));
			json_object_set_new(j, "held", json_integer(
			    (json_int_t)r.held));
		}

		sbx_out_json(j);
		json_decref(j);
	}
	/* What a pull kept or held back is said and, unless --strict,
	 * not a failure: a loop's "pull || break" goes on. */
	if (rc < 0)
		sbx_warn("%s", err.msg);
	if (rc < 0 && !push && !strict)
		rc = 0;
	if (o.state)
		sbx_state_release(o.state);
	json_decref(o.ref);
	sbx_ignore_free(o.include);
	sbx_ignore_free(o.exclude);
	sbx_ignore_free(o.sbxignore);
	free(state_abs);
	free(statedir);
	free(statefile);
	return sbx_out_close(rc < 0 ? SBX_EX_FAIL : SBX_EX_OK);
}
