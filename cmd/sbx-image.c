/* sbx-image - images named by the hash of their build context: build a
 * Dockerfile only when its context changed, or say whether it is built */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"
#include "image/builder.h"

static const char usage[] =
    "usage: sbx-image build [-cqv] [-b backend] -t name [-f dockerfile] "
    "[-a key=value]...\n"
    "                       [context]\n"
    "       sbx-image hash [-qv] [-t name] [-f dockerfile] [context]\n"
    "       sbx-image pull [-qv] [-b backend] [-p os/arch] "
    "[--insecure-registry host]\n"
    "                      ref ...\n"
    "       sbx-image ls [-qv]\n"
    "       sbx-image prune [-qv] [--all]\n"
    "       sbx-image inspect | rm [-qv] ref ...\n"
    "       sbx-image import [-qv] [-t name] file | dir | -\n"
    "       sbx-image export [-qv] [-o file] ref\n";

enum { OPT_INSECURE = 256, OPT_ALL };

static const struct option longopts[] = {
	{"all", no_argument, NULL, OPT_ALL},
	{"backend", required_argument, NULL, 'b'},
	{"build-arg", required_argument, NULL, 'a'},
	{"check", no_argument, NULL, 'c'},
	{"file", required_argument, NULL, 'f'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"insecure-registry", required_argument, NULL, OPT_INSECURE},
	{"output", required_argument, NULL, 'o'},
	{"platform", required_argument, NULL, 'p'},
	{"quiet", no_argument, NULL, 'q'},
	{"tag", required_argument, NULL, 't'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* {"image": "NAME-HASH", "hash": ..., "backend": ..., and what the
 * command adds}. */
static json_t *
result(const char *name, const struct sbx_ctx *c, const char *backend)
{
	json_t *o = json_object();

	if (name) {
		char *img = sbx_xasprintf("%s-%s", name, c->hash);

		json_object_set_new(o, "image", json_string(img));
		free(img);
	}
	json_object_set_new(o, "hash", json_string(c->hash));
	if (backend)
		json_object_set_new(o, "backend", json_string(backend));
	return o;
}

static int
cmd_hash(const struct sbx_ctx *c, const char *name)
{
	json_t *o = result(name, c, NULL);

	json_object_set_new(o, "files", json_integer((json_int_t)c->n));
	sbx_out_json(o);
	json_decref(o);
	return SBX_EX_OK;
}

static int
cmd_build(const struct sbx_ctx *c, const char *name, const char *backend,
    const json_t *args, int check)
{
	struct sbx_err err = {0};
	json_t *o = result(name, c, backend);
	const char *img = json_string_value(json_object_get(o, "image"));
	int have, rc = SBX_EX_OK;

	int e2b = !strcmp(backend, "e2b");
	json_t *built = NULL;

	if (e2b ? !sbx_e2b_template_exists || !sbx_e2b_build :
	    !sbx_docker_image_exists || !sbx_docker_build)
		sbx_die(SBX_EX_FAIL, "this build of sbx-image has no %s "
		    "backend", backend);
	if ((have = e2b ? sbx_e2b_template_exists(img, &err) :
	    sbx_docker_image_exists(img, &err)) < 0)
		sbx_die_err(&err);
	if (check) {
		json_object_set_new(o, "present", json_boolean(have));
		rc = have ? SBX_EX_OK : SBX_EX_NOSANDBOX;
	} else {
		/* An unchanged context is the image already built. */
		if (!have && (e2b ? sbx_e2b_build(c, img, args, sbx_quiet,
		    &built, &err) : sbx_docker_build(c, img, args, sbx_quiet,
		    &err)) < 0)
			sbx_die_err(&err);
		if (built)
			json_object_update(o, built);
		json_decref(built);
		json_object_set_new(o, "built", json_boolean(!have));
	}
	sbx_out_json(o);
	json_decref(o);
	return rc;
}

/* build -b local: the image NAME-HASH of the local store. */
static int
cmd_build_local(const struct sbx_ctx *c, const char *name,
    const json_t *args, int check)
{
	struct sbx_err err = {0};
	struct sbx_image_use u;
	json_t *o = result(name, c, "local"), *built = NULL;
	const char *img = json_string_value(json_object_get(o, "image"));
	int have, rc = SBX_EX_OK;

	have = sbx_image_lookup(img, &u, &err) == 0;
	if (have)
		sbx_image_use_release(&u);
	if (check) {
		json_object_set_new(o, "present", json_boolean(have));
		rc = have ? SBX_EX_OK : SBX_EX_NOSANDBOX;
	} else {
		/* An unchanged context is the image already built. */
		if (!have) {
			/* The builder is the remote flavour's, beside the
			 * registry client a FROM may pull through. */
			if (!sbx_image_build_local) {
				sbx_flavour_pick_all();
				sbx_die(SBX_EX_FAIL, "build -b local needs the "
				    "remote flavour of sbx-image");
			}
			memset(&err, 0, sizeof err);
			if (sbx_image_build_local(c, img, args, sbx_quiet,
			    &built, &err) < 0)
				sbx_die_err(&err);
			json_object_set(o, "digest", json_object_get(built,
			    "digest"));
			json_decref(built);
		}
		json_object_set_new(o, "built", json_boolean(!have));
	}
	sbx_out_json(o);
	json_decref(o);
	return rc;
}

static int
store_cmd(const char *s)
{
	return !strcmp(s, "pull") || !strcmp(s, "ls") || !strcmp(s, "rm") ||
	    !strcmp(s, "inspect") || !strcmp(s, "prune") ||
	    !strcmp(s, "import") || !strcmp(s, "export");
}

/* pull, ls, inspect, rm, prune: the local image store (pull: or the
 * Docker engine's, backend "docker"). */
static int
cmd_store(const char *sub, char **refs, int n, const char *platform,
    const char *const *insecure, const char *backend, int all)
{
	struct sbx_registry_opts o = {insecure, platform,
	    !sbx_quiet && isatty(STDERR_FILENO)};
	struct sbx_err err = {0};
	json_t *out = NULL, *v;
	int i, rc = SBX_EX_OK, r;
	size_t k;

	if (!strcmp(sub, "ls") || !strcmp(sub, "prune")) {
		r = !strcmp(sub, "ls") ? sbx_image_list(&out, &err) :
		    sbx_image_prune(all, &out, &err);
		if (r < 0 && !out)
			sbx_die_err(&err);
		if (r < 0)
			sbx_warn("%s", err.msg);
		if (json_is_array(out))
			json_array_foreach(out, k, v)
				sbx_out_json(v);
		else
			sbx_out_json(out);
		json_decref(out);
		return r < 0 ? err.code : SBX_EX_OK;
	}
	for (i = 0; i < n; i++) {
		memset(&err, 0, sizeof err);
		if (!strcmp(sub, "pull") && backend)
			r = sbx_docker_pull(refs[i], sbx_quiet, &out, &err);
		else if (!strcmp(sub, "pull"))
			r = sbx_image_pull(refs[i], &o, &out, &err);
		else if (!strcmp(sub, "rm"))
			r = sbx_image_remove(refs[i], &out, &err);
		else
			r = sbx_image_inspect(refs[i], &out, &err);
		if (r < 0) {
			/* The next ones are still done; the first failure's
			 * code is ours. */
			sbx_warn("%s", err.msg);
			if (!rc)
				rc = err.code ? err.code : SBX_EX_FAIL;
			continue;
		}
		if (!sbx_quiet || strcmp(sub, "rm"))
			sbx_out_json(out);
		json_decref(out);
	}
	return rc;
}

/* export: the tar to file (whole, or not at all) or to stdout. */
static int
cmd_export(const char *ref, const char *file)
{
	struct sbx_err err = {0};
	char *tmp = NULL;
	int fd = STDOUT_FILENO;

	if (!file && isatty(STDOUT_FILENO))
		sbx_die(SBX_EX_USAGE, "refusing to write a tar to a terminal "
		    "(-o file, or a pipe)");
	if (file) {
		tmp = sbx_xasprintf("%s.tmp-XXXXXX", file);
		if ((fd = mkstemp(tmp)) < 0)
			sbx_die(SBX_EX_FAIL, "cannot create '%s':", tmp);
	}
	if (sbx_image_export(ref, fd, &err) < 0 || (file && (fsync(fd) < 0 ||
	    close(fd) < 0 || rename(tmp, file) < 0))) {
		if (file) {
			if (!err.msg[0])
				sbx_err_set(&err, SBX_EX_FAIL, "cannot write "
				    "'%s':", file);
			unlink(tmp);
		}
		free(tmp);
		sbx_die_err(&err);
	}
	free(tmp);
	return SBX_EX_OK;
}

static int
cmd_import(const char *src, const char *name)
{
	struct sbx_err err = {0};
	json_t *out = NULL;

	if (sbx_image_import(src, name, &out, &err) < 0)
		sbx_die_err(&err);
	if (!sbx_quiet)
		sbx_out_json(out);
	json_decref(out);
	return SBX_EX_OK;
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"all", NULL, "with prune: the build cache too"},
	{"backend", NULL, "local, docker or e2b (pull: local or docker)"},
	{"build-arg", NULL, "with build: a build argument (key: from env)"},
	{"check", NULL, "with build: exit 0 if the image is there, else 3"},
	{"file", NULL, "the Dockerfile (default: context/Dockerfile)"},
	{"insecure-registry", NULL, "with pull: plain HTTP to this registry"},
	{"output", NULL, "with export: the tar's file (default: stdout)"},
	{"platform", NULL, "with pull: which of a multi-platform image"},
	{"tag", NULL, "the image's name; build adds the hash: name-HASH"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-image build -b docker -t myagent .\n"
	"  sbx-image build -b docker --check -t myagent . || echo missing",
	1,
};

static const char shortopts[] = "a:b:cf:ho:p:t:qvV";

int
main(int argc, char **argv)
{
	struct sbx_ctx ctx;
	struct sbx_err err = {0};
	const char *sub = NULL, *backend = NULL, *name = NULL, *file = NULL;
	const char *dir = ".";
	const char *platform = NULL, **insecure = NULL, *output = NULL;
	json_t *args = NULL;
	char *kv, *eq;
	int c, check = 0, rc, ninsecure = 0, all = 0;

	sbx_prog_set(argv);
	/* Options may come before the command too. */
	sbx_opt_cmd_first(argc, argv, shortopts, longopts);
	if (argc > 1 && (!strcmp(argv[1], "build") ||
	    !strcmp(argv[1], "hash") || store_cmd(argv[1]))) {
		/* getopt's argv without the command; the flavour's
		 * re-exec wants the one we were given. */
		char **av = sbx_xcalloc((size_t)argc, sizeof *av);

		sub = argv[1];
		av[0] = argv[0];
		memcpy(av + 1, argv + 2, (size_t)(argc - 2) * sizeof *av);
		argv = av;
		argc--;
	}
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, shortopts, longopts,
	    NULL)) != -1) {
		switch (c) {
		case OPT_ALL:
			all = 1;
			break;
		case OPT_INSECURE:
			insecure = sbx_xrealloc(insecure, (size_t)(ninsecure +
			    2) * sizeof *insecure);
			insecure[ninsecure++] = optarg;
			insecure[ninsecure] = NULL;
			break;
		case 'o':
			output = optarg;
			break;
		case 'p':
			platform = optarg;
			break;
		case 'a':
			if (!(kv = sbx_parse_env(optarg, &err)))
				sbx_usage_error(usage, "--build-arg: %s",
				    err.msg);
			eq = strchr(kv, '=');
			*eq = '\0';
			if (!args)
				args = json_object();
			json_object_set_new(args, kv, json_string(eq + 1));
			free(kv);
			break;
		case 'b':
			backend = optarg;
			break;
		case 'c':
			check = 1;
			break;
		case 'f':
			file = optarg;
			break;
		case 't':
			name = optarg;
			break;
		default:
			if (!sbx_opt_common(c, usage))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (!sub)
		sbx_usage_error(usage, optind < argc ? "unknown command '%s'" :
		    "a command is required (build, hash, pull, ls, inspect, "
		    "rm, prune, import or export)", argv[optind]);
	if (store_cmd(sub)) {
		if (args || check || file || (name && strcmp(sub, "import")) ||
		    (backend && strcmp(sub, "pull")))
			sbx_usage_error(usage, "--%s is for sbx-image build",
			    backend && strcmp(sub, "pull") ? "backend" : args ?
			    "build-arg" : check ? "check" : file ? "file" :
			    "tag");
		if (backend && strcmp(backend, "local") && strcmp(backend,
		    "docker"))
			sbx_die(SBX_EX_USAGE, "pull supports backends local and "
			    "docker, not '%s'", backend);
		if (backend && !strcmp(backend, "local"))
			backend = NULL;
		if (backend && (platform || insecure))
			sbx_usage_error(usage, "--%s is for the local store's "
			    "pull (the engine has its own settings)", platform ?
			    "platform" : "insecure-registry");
		if (all && strcmp(sub, "prune"))
			sbx_usage_error(usage, "--all is for sbx-image prune");
		if (output && strcmp(sub, "export"))
			sbx_usage_error(usage, "--output is for sbx-image export");
		if ((platform || insecure) && strcmp(sub, "pull"))
			sbx_usage_error(usage, "--%s is for sbx-image pull",
			    platform ? "platform" : "insecure-registry");
		if (!strcmp(sub, "ls") || !strcmp(sub, "prune")) {
			if (optind < argc)
				sbx_usage_error(usage, "unexpected argument "
				    "'%s'", argv[optind]);
		} else if (optind == argc) {
			sbx_usage_error(usage, "%s needs an image", sub);
		} else if ((!strcmp(sub, "import") || !strcmp(sub, "export")) &&
		    argc - optind > 1) {
			sbx_usage_error(usage, "unexpected argument '%s'",
			    argv[optind + 1]);
		}
		if (!strcmp(sub, "import") || !strcmp(sub, "export")) {
			rc = !strcmp(sub, "import") ? cmd_import(argv[optind],
			    name) : cmd_export(argv[optind], output);
			free(insecure);
			return sbx_out_close(rc);
		}
		/* The registry client is the remote flavour's (libcurl). */
		if (!strcmp(sub, "pull") && (backend ? !sbx_docker_pull :
		    !sbx_image_pull)) {
			sbx_flavour_pick_all();
			sbx_die(SBX_EX_FAIL, "pull needs the remote flavour of "
			    "sbx-image");
		}
		rc = cmd_store(sub, argv + optind, argc - optind, platform,
		    insecure, backend, all);
		free(insecure);
		return sbx_out_close(rc);
	}
	if (output)
		sbx_usage_error(usage, "--output is for sbx-image export");
	if (all)
		sbx_usage_error(usage, "--all is for sbx-image prune");
	if (platform || insecure)
		sbx_usage_error(usage, "--%s is for sbx-image pull",
		    platform ? "platform" : "insecure-registry");
	if (argc - optind > 1)
		sbx_usage_error(usage, "unexpected argument '%s'",
		    argv[optind + 1]);
	if (optind < argc)
		dir = argv[optind];
	if (name && !sbx_imgref_valid_name(name))
		sbx_usage_error(usage, "bad image name '%s' (lowercase letters, "
		    "digits, '.', '_', '-' and '/'; no tag)", name);
	if (!strcmp(sub, "hash")) {
		if (backend || args || check)
			sbx_usage_error(usage, "--%s is for sbx-image build",
			    backend ? "backend" : args ? "build-arg" : "check");
	} else {
		if (!name)
			sbx_usage_error(usage, "build needs -t name");
		if (!backend)
			backend = sbx_backend_default();
		if (strcmp(backend, "docker") && strcmp(backend, "local") &&
		    strcmp(backend, "e2b"))
			sbx_die(SBX_EX_USAGE, "build supports backends local, "
			    "docker and e2b, not '%s'", backend);
		sbx_flavour_pick(backend);
	}
	if (sbx_ctx_load(&ctx, dir, file, &err) < 0)
		sbx_die_err(&err);
	if (!strcmp(sub, "hash"))
		rc = cmd_hash(&ctx, name);
	else if (!strcmp(backend, "local"))
		rc = cmd_build_local(&ctx, name, args, check);
	else
		rc = cmd_build(&ctx, name, backend, args, check);
	sbx_ctx_release(&ctx);
	json_decref(args);
	return sbx_out_close(rc);
}
