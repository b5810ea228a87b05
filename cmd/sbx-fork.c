/* sbx-fork - copies of a live sandbox: one snapshot of its files, and
 * sandboxes made from it; print their refs */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx.h"

enum { OPT_MEMORY = 256 };

static const char usage[] =
    "usage: sbx-fork [-qv] [-c count] [-n name] [-o prefix] [--memory]\n"
    "                [-b backend] [-I id | -s file]\n";

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"count", required_argument, NULL, 'c'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"id", required_argument, NULL, 'I'},
	{"memory", no_argument, NULL, OPT_MEMORY},
	{"name", required_argument, NULL, 'n'},
	{"output", required_argument, NULL, 'o'},
	{"quiet", no_argument, NULL, 'q'},
	{"state", required_argument, NULL, 's'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

static const struct sbx_help_opt helpopts[] = {
	{"backend", NULL, "the backend the id belongs to"},
	{"count", NULL, "how many copies (1 to 100; 1)"},
	{"memory", NULL, "carry the processes too (not available: says why)"},
	{"name", NULL, "name the snapshot they share"},
	{"output", NULL, "write state files PREFIX1.json, PREFIX2.json..."},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-fork -s .sbx/s.json -c 3 -o .sbx/fork",
	1,
};

#define FORK_MAX 100

/* Undo: the copies made, and the snapshot when nothing else holds it. */
static void
undo(const struct sbx_backend *be, json_t **refs, int n, const char *sid,
    char **paths)
{
	struct sbx_err e;
	int i;

	for (i = 0; i < n; i++) {
		if (refs[i])
			be->ops->kill(refs[i], 0, &e);
		if (paths[i])
			remove(paths[i]);
	}
	/* A snapshot on this machine (the local store's, qemu's); another
	 * backend's stays (sbx-snapshot(1)). */
	if (be->in_store && be->ops->snapshots)
		be->ops->snapshots("rm", sid, NULL, NULL, &e);
	else if (be->in_store)
		sbx_snap_rm(sid, &e);
}

/* One copy: a sandbox from snap, its state file at path (NULL: none). */
static int
make_copy(const struct sbx_backend *be, const json_t *snap, const char *path,
    json_t **ref, struct sbx_err *err)
{
	struct sbx_spec spec = {0};
	struct sbx_state st = {0};
	unsigned given = 0;
	int rc = -1;

	spec.labels = json_object();
	sbx_snap_spec(snap, &spec, &given, 0, 0);
	if (sbx_limits_default(be, &spec, given, err) < 0 ||
	    sbx_backend_check_spec(be, &spec, err) < 0 ||
	    be->ops->create(&spec, ref, err) < 0)
		goto out;
	if (path) {
		if (sbx_state_dir_prepare(path, err) < 0 ||
		    sbx_state_open(&st, path, err) < 0)
			goto out;
		json_decref(st.root);
		st.root = sbx_state_new_root(*ref, &spec);
		rc = sbx_state_save(&st, err);
		sbx_state_release(&st);
		if (rc < 0)
			goto out;
	}
	rc = 0;
out:
	json_decref(spec.labels);
	return rc;
}

/* The copies, FORK_PAR at a time, each made by a child process of its
 * own: a create mostly waits on the kernel. A child writes its ref, or
 * "!CODE message", on its pipe. */
#define FORK_PAR 4

static int
make_copies(const struct sbx_backend *be, const json_t *snap, int n,
    json_t **refs, char **paths, struct sbx_err *err)
{
	int i, j, k, fds[FORK_PAR], rc = 0;
	pid_t pids[FORK_PAR];
	char buf[4096];
	ssize_t got;

	fflush(stdout);
	for (i = 0; i < n; i += FORK_PAR) {
		for (j = 0; j < FORK_PAR && i + j < n; j++) {
			int p[2];

			if (pipe2(p, O_CLOEXEC) < 0 || (pids[j] = fork()) < 0)
				sbx_die(SBX_EX_FAIL, "cannot fork:");
			if (pids[j] == 0) {
				struct sbx_err e = {0};
				json_t *r = NULL;
				char *text;

				close(p[0]);
				if (make_copy(be, snap, paths[i + j], &r, &e) < 0)
					dprintf(p[1], "!%d %s", e.code ? e.code :
					    SBX_EX_FAIL, e.msg);
				else if ((text = json_dumps(r, JSON_COMPACT |
				    JSON_PRESERVE_ORDER)))
					dprintf(p[1], "%s", text);
				_exit(0);
			}
			close(p[1]);
			fds[j] = p[0];
		}
		for (k = 0; k < j; k++) {
			size_t len = 0;

			while (len < sizeof buf - 1 && (got = read(fds[k],
			    buf + len, sizeof buf - 1 - len)) > 0)
				len += (size_t)got;
			buf[len] = '\0';
			close(fds[k]);
			waitpid(pids[k], NULL, 0);
			if (buf[0] == '!' && !rc) {
				char *msg = strchr(buf, ' ');

				rc = sbx_err_set(err, (int)strtol(buf + 1, NULL,
				    10), "%s", msg ? msg + 1 : "?");
			} else if (buf[0] != '!' && !(refs[i + k] =
			    json_loads(buf, 0, NULL)) && !rc)
				rc = sbx_err_set(err, SBX_EX_FAIL, "a copy "
				    "said nothing");
		}
	}
	return rc;
}

int
main(int argc, char **argv)
{
	struct sbx_target t = {0};
	struct sbx_err err = {0};
	const struct sbx_backend *be;
	const char *name = NULL, *prefix = NULL, *state = NULL, *sid;
	json_t *ref, *snap, *refs[FORK_MAX] = {0};
	char *paths[FORK_MAX] = {0};
	unsigned long count = 1;
	char *end;
	int c, i, memory = 0;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, "b:c:hI:n:o:qs:vV", longopts,
	    NULL)) != -1) {
		switch (c) {
		case 'c':
			count = strtoul(optarg, &end, 10);
			if (*end || !*optarg || count < 1 || count > FORK_MAX)
				sbx_usage_error(usage, "invalid count '%s' (1 to "
				    "%d)", optarg, FORK_MAX);
			break;
		case 'n':
			if (!sbx_snap_valid_name(optarg))
				sbx_usage_error(usage, "invalid snapshot name "
				    "'%s'", optarg);
			name = optarg;
			break;
		case 'o':
			prefix = optarg;
			break;
		case OPT_MEMORY:
			memory = 1;
			break;
		default:
			if (!sbx_opt_common(c, usage) &&
			    !sbx_target_opt(c, optarg, &t))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (optind < argc)
		sbx_usage_error(usage, "unexpected argument '%s'", argv[optind]);
	sbx_flavour_pick_target(&t, 0);
	if (!(ref = sbx_ref_resolve(&t, &state, &err)) ||
	    !(be = sbx_backend_of(ref, &err)) ||
	    sbx_backend_need(be, SBX_CAP_SNAPSHOT, &err) < 0 ||
	    (memory && sbx_memory_snapshot_refusal(be, &err) < 0))
		sbx_die_err(&err);
	for (i = 0; prefix && i < (int)count; i++) {
		paths[i] = sbx_xasprintf("%s%d.json", prefix, i + 1);
		if (!access(paths[i], F_OK))
			sbx_die(SBX_EX_FAIL, "state file '%s' exists", paths[i]);
	}
	/* One snapshot, every copy's layer: nothing is copied per copy. */
	if (!(snap = be->ops->snapshot(ref, name, &err)))
		sbx_die_err(&err);
	sid = sbx_json_str(snap, "snapshot");
	if (make_copies(be, snap, (int)count, refs, paths, &err) < 0) {
		undo(be, refs, (int)count, sid, paths);
		sbx_die_err(&err);
	}
	for (i = 0; i < (int)count; i++) {
		json_t *o = json_deep_copy(refs[i]);

		json_object_set_new(o, "snapshot", json_string(sid));
		/* Files only: no memory snapshot, no process goes over. */
		json_object_set_new(o, "processes", json_false());
		if (paths[i])
			json_object_set_new(o, "state", json_string(paths[i]));
		sbx_out_json(o);
		json_decref(o);
		json_decref(refs[i]);
		free(paths[i]);
	}
	json_decref(snap);
	json_decref(ref);
	return sbx_out_close(SBX_EX_OK);
}
