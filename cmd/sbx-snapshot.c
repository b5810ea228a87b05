/* sbx-snapshot - take a snapshot of a sandbox's files; list and remove
 * the store's snapshots; export one as a tar, import one on any backend */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"

enum { OPT_MEMORY = 256 };

static const char usage[] =
    "usage: sbx-snapshot [-qv] [-n name] [--memory] [-b backend]\n"
    "                    [-I id | -s file]\n"
    "       sbx-snapshot ls [-j] [-b backend]\n"
    "       sbx-snapshot rm [-b backend] snapshot ...\n"
    "       sbx-snapshot export [-b backend] snapshot\n"
    "       sbx-snapshot import [-b backend] [-i image] [-s file] "
    "[file.tar]\n";

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"id", required_argument, NULL, 'I'},
	{"image", required_argument, NULL, 'i'},
	{"json", no_argument, NULL, 'j'},
	{"memory", no_argument, NULL, OPT_MEMORY},
	{"name", required_argument, NULL, 'n'},
	{"quiet", no_argument, NULL, 'q'},
	{"state", required_argument, NULL, 's'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

static const struct sbx_help_opt helpopts[] = {
	{"backend", NULL, "the backend the id belongs to"},
	{"image", NULL, "import: the sandbox's image, not the export's"},
	{"json", NULL, "ls: JSON lines on a terminal too"},
	{"memory", NULL, "keep the processes too (not available: says why)"},
	{"name", NULL, "name the snapshot (for --from and rm)"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-snapshot -s .sbx/s.json -n before-refactor\n"
	"  sbx-create --from before-refactor -s .sbx/t.json\n"
	"  sbx-snapshot export before-refactor | sbx-snapshot import -b e2b",
	1,
};

static int
print_one(json_t *m, void *arg)
{
	char size[32];
	int *table = arg;

	if (!*table) {
		sbx_out_json(m);
		return 0;
	}
	if (*table == 1) {
		printf("%-16s  %-20s  %-12s  %-24s  %7s  %s\n", "SNAPSHOT",
		    "NAME", "SOURCE", "IMAGE", "SIZE", "CREATED");
		*table = 2;
	}
	sbx_fmt_bytes(json_object_get(m, "size"), size, sizeof size);
	printf("%-16s  %-20s  %-12s  %-24s  %7s  %s\n",
	    sbx_json_str(m, "snapshot") ? sbx_json_str(m, "snapshot") : "?",
	    sbx_json_str(m, "name") ? sbx_json_str(m, "name") : "-",
	    sbx_json_str(m, "source") ? sbx_json_str(m, "source") : "-",
	    sbx_json_str(m, "image") ? sbx_json_str(m, "image") : "-",
	    size, sbx_json_str(m, "created") ? sbx_json_str(m, "created") :
	    "-");
	return 0;
}

static int
take(const struct sbx_target *t, const char *name, int memory)
{
	const struct sbx_backend *be;
	struct sbx_err err = {0};
	const char *state = NULL;
	json_t *ref, *m;

	if (!(ref = sbx_ref_resolve(t, &state, &err)))
		sbx_die_err(&err);
	if (!(be = sbx_backend_of(ref, &err)) ||
	    sbx_backend_need(be, SBX_CAP_SNAPSHOT, &err) < 0 ||
	    (memory && sbx_memory_snapshot_refusal(be, &err) < 0) ||
	    !(m = be->ops->snapshot(ref, name, &err)))
		sbx_die_err(&err);
	sbx_out_json(m);
	json_decref(m);
	json_decref(ref);
	return SBX_EX_OK;
}

/* The backend whose snapshots ls and rm see: -b's, else the default;
 * one without snapshots is a usage error (2). */
static const struct sbx_backend *
store_of(const char *backend)
{
	const struct sbx_backend *be;
	struct sbx_err err = {0};

	if (!backend)
		backend = sbx_backend_default();
	sbx_flavour_pick(backend);
	if (!(be = sbx_backend_get(backend, &err)) ||
	    sbx_backend_need(be, SBX_CAP_SNAPSHOT, &err) < 0)
		sbx_die_err(&err);
	return be;
}

/* export: a snapshot of the local store (or of the backend of -b) as a
 * tar on stdout, never on a terminal. */
static int
export(const char *backend, char **argv, int argc)
{
	const struct sbx_backend *be = NULL;
	struct sbx_err err = {0};

	if (argc != 2)
		sbx_usage_error(usage, argc < 2 ? "export needs a snapshot" :
		    "export takes one snapshot");
	if (isatty(1))
		sbx_usage_error(usage, "export writes a tar: not to a terminal "
		    "(redirect it to a file)");
	if (backend) {
		be = store_of(backend);
		if (sbx_backend_need(be, SBX_CAP_SNAP_EXPORT, &err) < 0)
			sbx_die_err(&err);
	} else
		sbx_flavour_pick("local");
	if ((be && be->ops->snap_export ? be->ops->snap_export(argv[1], 1,
	    &err) : be && !be->in_store ? sbx_err_set(&err, SBX_EX_USAGE,
	    "backend '%s' cannot export its snapshots", be->name) :
	    sbx_snap_export(argv[1], 1, &err)) < 0)
		sbx_die_err(&err);
	return SBX_EX_OK;
}

/* import: a sandbox on the backend from an export (a file, or stdin);
 * its ref on stdout, its state file with -s. */
static int
import(const struct sbx_target *t, const char *image, char **argv,
    int argc)
{
	const struct sbx_backend *be;
	struct sbx_spec spec = {0};
	struct sbx_state st = {0};
	struct sbx_err err = {0};
	const char *state = t->state_path;
	json_t *ref = NULL, *meta = NULL;
	int fd = 0;

	if (argc > 2)
		sbx_usage_error(usage, "import takes one file");
	if (t->id)
		sbx_usage_error(usage, "import makes a sandbox: no --id");
	if (state && !strcmp(state, "-"))
		state = NULL;
	/* Any backend that takes files: docker's too. */
	sbx_flavour_pick(t->backend ? t->backend : sbx_backend_default());
	if (!(be = sbx_backend_get(t->backend ? t->backend :
	    sbx_backend_default(), &err)) ||
	    sbx_backend_need(be, SBX_CAP_FILES, &err) < 0)
		sbx_die_err(&err);
	if (state && !access(state, F_OK))
		sbx_die(SBX_EX_FAIL, "state file '%s' exists", state);
	if (argc == 2 && strcmp(argv[1], "-") &&
	    (fd = open(argv[1], O_RDONLY | O_CLOEXEC)) < 0)
		sbx_die(SBX_EX_NOSANDBOX, "cannot open '%s': %s", argv[1],
		    strerror(errno));
	if (argc < 2 && isatty(0))
		sbx_usage_error(usage, "import reads a tar: give a file or "
		    "redirect stdin");
	spec.image = image;
	if (sbx_snap_import(be, fd, &spec, &ref, &meta, &err) < 0)
		sbx_die_err(&err);
	if (state) {
		if (sbx_state_dir_prepare(state, &err) < 0 ||
		    sbx_state_open(&st, state, &err) < 0) {
			struct sbx_err e2;

			be->ops->kill(ref, 0, &e2);
			sbx_die_err(&err);
		}
		json_decref(st.root);
		st.root = sbx_state_new_root(ref, &spec);
		if (sbx_state_save(&st, &err) < 0) {
			struct sbx_err e2;

			sbx_state_release(&st);
			be->ops->kill(ref, 0, &e2);
			sbx_die_err(&err);
		}
		sbx_state_release(&st);
	}
	sbx_out_json(ref);
	json_decref(spec.labels);
	json_decref(ref);
	json_decref(meta);
	return SBX_EX_OK;
}

int
main(int argc, char **argv)
{
	struct sbx_target t = {0};
	struct sbx_err err = {0};
	const struct sbx_backend *be;
	const char *name = NULL, *image = NULL;
	int c, json = 0, memory = 0, rc = SBX_EX_OK, table, i;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, "b:hI:i:jn:qs:vV", longopts,
	    NULL)) != -1) {
		switch (c) {
		case 'i':
			image = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case OPT_MEMORY:
			memory = 1;
			break;
		case 'n':
			if (!sbx_snap_valid_name(optarg))
				sbx_usage_error(usage, "invalid snapshot name "
				    "'%s' (letters, digits, '.', '_', '-'; not "
				    "snp-...)", optarg);
			name = optarg;
			break;
		default:
			if (!sbx_opt_common(c, usage) &&
			    !sbx_target_opt(c, optarg, &t))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	argv += optind;
	argc -= optind;
	if (memory && argc)
		sbx_usage_error(usage, "--memory is for taking a snapshot");
	if (argc && !strcmp(argv[0], "ls")) {
		if (argc > 1)
			sbx_usage_error(usage, "unexpected argument '%s'",
			    argv[1]);
		if (name || image || t.id || t.state_path)
			sbx_usage_error(usage, "ls takes no sandbox");
		be = store_of(t.backend);
		table = !json && isatty(1);
		if ((be->ops->snapshots ? be->ops->snapshots("ls", NULL,
		    print_one, &table, &err) : sbx_snap_list(print_one, &table,
		    &err)) < 0)
			sbx_die_err(&err);
		return sbx_out_close(SBX_EX_OK);
	}
	if (argc && !strcmp(argv[0], "rm")) {
		if (argc < 2)
			sbx_usage_error(usage, "rm needs a snapshot");
		if (name || image || t.id || t.state_path)
			sbx_usage_error(usage, "rm takes no sandbox");
		be = store_of(t.backend);
		/* Every one, the worst status. */
		for (i = 1; i < argc; i++) {
			struct sbx_err e = {0};

			if ((be->ops->snapshots ? be->ops->snapshots("rm",
			    argv[i], NULL, NULL, &e) : sbx_snap_rm(argv[i],
			    &e)) < 0) {
				sbx_warn("%s", e.msg);
				if (e.code > rc)
					rc = e.code;
			}
		}
		return sbx_out_close(rc);
	}
	if (argc && !strcmp(argv[0], "export")) {
		if (name || image || t.id || t.state_path)
			sbx_usage_error(usage, "export takes a snapshot alone");
		return sbx_out_close(export(t.backend, argv, argc));
	}
	if (argc && !strcmp(argv[0], "import")) {
		if (name)
			sbx_usage_error(usage, "import takes no --name");
		return sbx_out_close(import(&t, image, argv, argc));
	}
	if (image)
		sbx_usage_error(usage, "--image is for import");
	if (argc)
		sbx_usage_error(usage, "unexpected argument '%s'", argv[0]);
	sbx_flavour_pick_target(&t, 0);
	return sbx_out_close(take(&t, name, memory));
}
