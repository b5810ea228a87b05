/* sbx-create - create a sandbox and print its ref */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx.h"
#include "image/image.h"
#include "net/net.h"

static const char usage[] =
    "usage: sbx-create [-qv] [-b backend] [-s file] [-i image] [-m size] "
    "[-c cpus] [-p n]\n"
    "                  [-d size] [-n deny|allow] [-T duration] "
    "[-l key=value]...\n"
    "                  [-e name[=value]]... [-w dir] [-N name] [-r] "
    "[-R runtime] [-P]\n"
    "                  [-E url] [--allow-out dest]... [--deny-out dest]...\n"
    "                  [--port [hostport:]port]... "
    "[--inject-header host:name=source]...\n"
    "                  [--egress-proxy url] [--start cmd | --no-start] "
    "[--ready cmd]\n"
    "                  [--ready-timeout duration] [--post-create cmd]\n"
    "                  [--volume name:path]...\n"
    "                  [-B [-t name] [-f dockerfile] [-C context]] "
    "[-F snapshot]\n";

enum { OPT_ALLOW_OUT = 256, OPT_DENY_OUT, OPT_EGRESS_PROXY, OPT_PORT,
    OPT_INJECT_HEADER, OPT_START, OPT_NO_START, OPT_READY, OPT_READY_TIMEOUT,
    OPT_POST_CREATE, OPT_VOLUME };

static const struct option longopts[] = {
	{"allow-out", required_argument, NULL, OPT_ALLOW_OUT},
	{"deny-out", required_argument, NULL, OPT_DENY_OUT},
	{"egress-proxy", required_argument, NULL, OPT_EGRESS_PROXY},
	{"backend", required_argument, NULL, 'b'},
	{"build", no_argument, NULL, 'B'},
	{"context", required_argument, NULL, 'C'},
	{"cpus", required_argument, NULL, 'c'},
	{"disk", required_argument, NULL, 'd'},
	{"endpoint", required_argument, NULL, 'E'},
	{"env", required_argument, NULL, 'e'},
	{"file", required_argument, NULL, 'f'},
	{"from", required_argument, NULL, 'F'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"image", required_argument, NULL, 'i'},
	{"inject-header", required_argument, NULL, OPT_INJECT_HEADER},
	{"label", required_argument, NULL, 'l'},
	{"memory", required_argument, NULL, 'm'},
	{"name", required_argument, NULL, 'N'},
	{"network", required_argument, NULL, 'n'},
	{"no-start", no_argument, NULL, OPT_NO_START},
	{"pids", required_argument, NULL, 'p'},
	{"port", required_argument, NULL, OPT_PORT},
	{"post-create", required_argument, NULL, OPT_POST_CREATE},
	{"pull", no_argument, NULL, 'P'},
	{"quiet", no_argument, NULL, 'q'},
	{"ready", required_argument, NULL, OPT_READY},
	{"ready-timeout", required_argument, NULL, OPT_READY_TIMEOUT},
	{"reuse", no_argument, NULL, 'r'},
	{"runtime", required_argument, NULL, 'R'},
	{"start", required_argument, NULL, OPT_START},
	{"state", required_argument, NULL, 's'},
	{"tag", required_argument, NULL, 't'},
	{"template", required_argument, NULL, 'i'},
	{"timeout", required_argument, NULL, 'T'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{"volume", required_argument, NULL, OPT_VOLUME},
	{"workdir", required_argument, NULL, 'w'},
	{NULL, 0, NULL, 0},
};

static int
valid_name(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789_.-");

	return n == strlen(s) && n > 0 && n < 64 && s[0] != '.' && s[0] != '-';
}

/* A state file may be reused only when its sandbox is no more. */
static void
check_state_free(struct sbx_state *st)
{
	json_t *ref = json_object_get(st->root, "ref"), *info;
	const struct sbx_backend *be;
	const char *status;
	struct sbx_err err = {0};

	if (!ref || !(be = sbx_backend_of(ref, &err)))
		return;
	if (!(info = be->ops->info(ref, &err)))
		return;
	status = sbx_json_str(info, "status");
	if (status && (!strcmp(status, "running") || !strcmp(status,
	    "paused")))
		sbx_die(SBX_EX_FAIL,
		    "state file '%s' tracks %s sandbox '%s'; kill it first",
		    st->path, status, sbx_json_str(ref, "id"));
	json_decref(info);
}

/* --reuse: a sandbox that lives is kept (a paused one resumed), and
 * its ref printed; 1 then, 0 when a new one must be made. */
static int
reuse_state(struct sbx_state *st)
{
	json_t *ref = json_object_get(st->root, "ref"), *info, *out;
	const struct sbx_backend *be;
	const char *status;
	struct sbx_err err = {0};
	int live = 0;

	if (!json_is_object(ref) || !(be = sbx_backend_of(ref, &err)))
		return 0;
	if (!(info = be->ops->info(ref, &err)))
		return 0;
	status = sbx_json_str(info, "status");
	out = json_deep_copy(ref);
	if (status && !strcmp(status, "running")) {
		live = 1;
	} else if (status && (!strcmp(status, "paused") ||
	    !strcmp(status, "stopped"))) {
		if (be->ops->resume(ref, &err) < 0)
			sbx_die(err.code ? err.code : SBX_EX_FAIL, "cannot "
			    "resume '%s': %s", sbx_json_str(ref, "id"), err.msg);
		sbx_state_set_status(st->root, "running");
		if (sbx_state_save(st, &err) < 0)
			sbx_die_err(&err);
		json_object_set_new(out, "resumed", json_true());
		live = 1;
	} else {
		/* Ended: what is left of it goes before its replacement. */
		be->ops->kill(ref, 0, &err);
	}
	if (live) {
		json_object_set_new(out, "replaced", json_false());
		sbx_out_json(out);
		sbx_state_release(st);
	}
	json_decref(out);
	json_decref(info);
	return live;
}

/* A replacement keeps what the budget needs: the old sandbox's billable
 * segments (closed now) and money, and a record that it was lost. */
static void
replaced(json_t *root, json_t *old)
{
	json_t *segs, *nsegs = json_object_get(root, "segments"), *list;
	char ts[32];
	size_t i;

	sbx_state_set_status(old, "lost");
	segs = json_deep_copy(json_object_get(old, "segments"));
	if (!json_is_array(segs))
		segs = json_array();
	for (i = 0; i < json_array_size(nsegs); i++)
		json_array_append(segs, json_array_get(nsegs, i));
	json_object_set_new(root, "segments", segs);
	json_object_set(root, "accrued_cost", json_object_get(old,
	    "accrued_cost"));
	json_object_set(root, "cost_alerted", json_object_get(old,
	    "cost_alerted"));
	list = json_deep_copy(json_object_get(old, "replaced"));
	if (!json_is_array(list))
		list = json_array();
	sbx_time_fmt(sbx_now(), ts, sizeof ts);
	json_array_append_new(list, json_pack("{sOssss}", "ref",
	    json_object_get(old, "ref"), "status", "lost", "at", ts));
	json_object_set_new(root, "replaced", list);
}

/* --allow-out and --deny-out: checked now, kept as given. */
static void
add_rule(json_t **rules, const char *list, const char *text)
{
	struct sbx_net_rule r;
	struct sbx_err err = {0};
	json_t *a;

	if (sbx_net_rule_parse(text, &r, &err) < 0)
		sbx_die_err(&err);
	if (!*rules)
		*rules = json_pack("{s[]s[]}", "allow_out", "deny_out");
	a = json_object_get(*rules, list);
	json_array_append_new(a, json_string(text));
}

/* --egress-proxy: the URL checked now; the password of its user from the
 * environment or the credentials file (never argv), taken out of the
 * environment so that no process started from here inherits it. */
static json_t *
egress_proxy(const char *url)
{
	struct sbx_net_proxy p;
	struct sbx_err err = {0};
	char *pw = NULL, *where = NULL;
	json_t *o;

	if (sbx_net_proxy_parse(url, &p, &err) < 0)
		sbx_die_err(&err);
	if (*p.user && !(pw = sbx_cred_get("SBX_EGRESS_PROXY_PASSWORD",
	    "egress-proxy", &where)))
		sbx_die(SBX_EX_CRED, "no password for the egress proxy's user "
		    "'%s' (set SBX_EGRESS_PROXY_PASSWORD or write it to '%s')",
		    p.user, where);
	free(where);
	unsetenv("SBX_EGRESS_PROXY_PASSWORD");
	if (pw && strlen(pw) > 255)
		sbx_die(SBX_EX_USAGE, "the egress proxy's password is longer "
		    "than SOCKS5's 255 bytes");
	o = json_pack("{s:s,s:s?}", "url", url, "password", pw);
	if (pw) {
		explicit_bzero(pw, strlen(pw));
		free(pw);
	}
	return o;
}

/* The spec's copy of a password, wiped before it goes. */
static void
egress_proxy_free(json_t *o)
{
	json_t *pw = json_object_get(o, "password");

	if (json_is_string(pw))
		explicit_bzero((char *)json_string_value(pw),
		    json_string_length(pw));
	json_decref(o);
}

/* --port: published on the host's loopback (-p is --pids). */
static void
add_port(json_t **ports, const char *text)
{
	struct sbx_err err = {0};
	unsigned port, host_port;

	if (sbx_net_port_parse(text, &port, &host_port, &err) < 0)
		sbx_die_err(&err);
	if (!*ports)
		*ports = json_array();
	json_array_append_new(*ports, json_pack("{sIsI}", "port",
	    (json_int_t)port, "host_port", (json_int_t)host_port));
}

/* --disk, else limits.disk (a default: dropped, never refused, where it
 * cannot apply); 0 is no quota. */
static void
disk_limit(struct sbx_spec *spec, const char *arg)
{
	const char *v = arg ? arg : sbx_config_get("limits.disk",
	    SBX_DISK_DEFAULT);

	if (sbx_parse_size(v, &spec->disk) < 0 || (spec->disk &&
	    (spec->disk < SBX_DISK_MIN || spec->disk > SBX_DISK_MAX))) {
		if (arg)
			sbx_usage_error(usage, "invalid disk size '%s' (0, or "
			    "16M to 8T)", arg);
		sbx_die(SBX_EX_USAGE, "invalid limits.disk '%s' in the "
		    "configuration (0, or 16M to 8T)", v);
	}
	spec->disk_default = !arg;
}

/* The state file's directory when it is a .sbx/ that is not there yet
 * (sbx_state_dir_prepare makes it, with its .gitignore); NULL else. */
static char *
new_sbx_dir(const char *state)
{
	char *dir = sbx_xstrdup(state), *slash = strrchr(dir, '/');
	const char *base;
	struct stat st;

	if (slash) {
		*slash = '\0';
		base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
		if (!strcmp(base, ".sbx") && lstat(dir, &st) < 0 &&
		    errno == ENOENT)
			return dir;
	}
	free(dir);
	return NULL;
}

/* A failed create leaves no .sbx/ that it made, if nothing but its
 * .gitignore came to be there. */
static void
drop_sbx_dir(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	char *ign;
	int other = 0;

	if (!dp)
		return;
	while ((de = readdir(dp)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, ".gitignore"))
			other = 1;
	closedir(dp);
	if (other)
		return;
	ign = sbx_xasprintf("%s/.gitignore", dir);
	unlink(ign);
	free(ign);
	rmdir(dir);
}

/* --start, --ready, --post-create, --no-start, --ready-timeout: kept in
 * start (sbx_spec's) as they are given. */
static void
start_opt(json_t *start, int c, const char *arg)
{
	struct sbx_err err = {0};
	uint64_t v;

	if (c != OPT_NO_START && c != OPT_READY_TIMEOUT && !*arg)
		sbx_usage_error(usage, "an empty command for --%s", c ==
		    OPT_START ? "start" : c == OPT_READY ? "ready" :
		    "post-create");
	switch (c) {
	case OPT_START:
		json_object_set_new(start, "cmd", json_string(arg));
		break;
	case OPT_NO_START:
		json_object_set_new(start, "no_start", json_true());
		break;
	case OPT_READY:
		json_object_set_new(start, "ready", json_string(arg));
		if (!json_object_get(start, "ready_timeout"))
			json_object_set_new(start, "ready_timeout",
			    json_integer(SBX_READY_TIMEOUT));
		break;
	case OPT_READY_TIMEOUT:
		if (sbx_opt_duration("--ready-timeout", arg, 1,
		    SBX_TIMEOUT_MAX, &v, &err) < 0)
			sbx_die_err(&err);
		json_object_set_new(start, "ready_timeout",
		    json_integer((json_int_t)v));
		break;
	default:
		json_object_set_new(start, "post_create", json_string(arg));
	}
}

/* --build: sbx-image build of the context on backend, its image
 * (NAME-HASH, built only when missing) for --image (malloc'd). */
static char *
build_image(const char *backend, const char *tag, const char *file,
    const char *context)
{
	char *tool = sbx_sibling("sbx-image"), *argv[14], *image = NULL;
	struct sbx_buf out = SBX_BUF_INIT;
	char buf[4096];
	json_t *o;
	ssize_t n;
	int p[2], st, i = 0;
	pid_t pid;

	if (!tool)
		sbx_die(SBX_EX_FAIL, "cannot find sbx-image beside %s:",
		    sbx_prog_get());
	argv[i++] = "sbx-image";
	argv[i++] = "build";
	if (sbx_quiet)
		argv[i++] = "-q";
	argv[i++] = "-b";
	argv[i++] = (char *)backend;
	argv[i++] = "-t";
	argv[i++] = (char *)tag;
	if (file) {
		argv[i++] = "-f";
		argv[i++] = (char *)file;
	}
	argv[i++] = "--";
	argv[i++] = (char *)context;
	argv[i] = NULL;
	if (pipe2(p, O_CLOEXEC) < 0 || (pid = fork()) < 0)
		sbx_die(SBX_EX_FAIL, "cannot run '%s':", tool);
	if (pid == 0) {
		if (dup2(p[1], 1) < 0)
			_exit(SBX_EX_FAIL);
		execv(tool, argv);
		sbx_warn("cannot run '%s': %s", tool, strerror(errno));
		_exit(SBX_EX_FAIL);
	}
	close(p[1]);
	while ((n = read(p[0], buf, sizeof buf)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		sbx_buf_add(&out, buf, (size_t)n);
	}
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			sbx_die(SBX_EX_FAIL, "cannot wait for sbx-image:");
	/* sbx-image said why. */
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		exit(WIFEXITED(st) ? WEXITSTATUS(st) : SBX_EX_FAIL);
	o = out.len ? json_loadb(out.data, out.len, JSON_DISABLE_EOF_CHECK,
	    NULL) : NULL;
	if (sbx_json_str(o, "image"))
		image = sbx_xstrdup(sbx_json_str(o, "image"));
	json_decref(o);
	sbx_buf_release(&out);
	free(tool);
	if (!image)
		sbx_die(SBX_EX_FAIL, "sbx-image build said no image");
	return image;
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"allow-out", NULL, "let the sandbox connect to dest (repeatable)"},
	{"backend", NULL, "where: local, docker, e2b or daytona"},
	{"build", NULL, "build the context's image when missing"},
	{"context", NULL, "with --build: the build context (default: .)"},
	{"cpus", NULL, "limit to this many CPUs (0.5, 2; 0 for none)"},
	{"deny-out", NULL, "deny connections to dest (repeatable)"},
	{"disk", NULL, "a quota on what the sandbox writes"},
	{"egress-proxy", NULL, "send allowed TCP through a SOCKS5 proxy"},
	{"endpoint", NULL, "(e2b, daytona) the API's URL, such as sbxd's"},
	{"env", NULL, "set a variable for every command (repeatable)"},
	{"file", NULL, "with --build: the Dockerfile"},
	{"from", NULL, "start with a snapshot's files (sbx-snapshot)"},
	{"image", NULL, "the root filesystem (host, a dir, an image)"},
	{"inject-header", NULL, "add a header to HTTP requests to host"},
	{"label", NULL, "attach a label (repeatable)"},
	{"memory", NULL, "limit memory (512M, 2G; 0 for none)"},
	{"name", NULL, "a name any tool accepts in place of the id"},
	{"network", NULL, "deny (loopback only, default) or allow"},
	{"no-start", NULL, "start not the image's Entrypoint and Cmd"},
	{"pids", NULL, "allow at most n processes (0 for no limit)"},
	{"port", NULL, "publish a TCP port on 127.0.0.1 (repeatable)"},
	{"post-create", NULL, "run this shell command once it is ready"},
	{"pull", NULL, "(docker) pull the image first"},
	{"ready", NULL, "wait until this shell command succeeds"},
	{"ready-timeout", NULL, "wait that long for --ready (60s)"},
	{"reuse", NULL, "keep the state file's sandbox if it still runs"},
	{"runtime", NULL, "(docker) the OCI runtime, such as runsc"},
	{"start", NULL, "run this shell command for the sandbox's life"},
	{"state", NULL, "write the sandbox's state file there"},
	{"tag", NULL, "with --build: the image's name (NAME-HASH)"},
	{"template", NULL, "the same as --image (E2B's word)"},
	{"timeout", NULL, "kill the sandbox once idle this long"},
	{"volume", NULL, "mount a named volume there (made at first use)"},
	{"workdir", NULL, "the commands' working directory (/workspace)"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-create --memory 512M --timeout 600 --label owner=me \\\n"
	    "      --state .sbx/s.json",
	1,
};

int
main(int argc, char **argv)
{
	struct sbx_spec spec = {0};
	struct sbx_state st = {0};
	struct sbx_err err = {0};
	const struct sbx_backend *be;
	const char *backend = NULL, *state = NULL;
	char **env = NULL, names[128], *newdir = NULL;
	size_t nenv = 0;
	json_t *ref = NULL, *old = NULL;
	const char *proxy = NULL;
	struct sbx_net_proxy np;
	int c, rc = SBX_EX_OK, reuse = 0, taken = 0;
	const char *disk_arg = NULL;
	unsigned given = 0; /* the limits a flag set */
	const char *from = NULL;
	json_t *snap = NULL;
	int workdir_given = 0, build = 0, image_given = 0;
	char *image_workdir = NULL, *built = NULL;
	const char *tag = NULL, *dockerfile = NULL, *context = NULL;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	spec.labels = json_object();
	spec.start = json_object();
	spec.image = "host";
	spec.workdir = "/workspace";
	if (sbx_opt_duration("timeout in the configuration", sbx_config_get(
	    "timeout", "3600"), 0, SBX_TIMEOUT_MAX, &spec.timeout, &err) < 0)
		sbx_die_err(&err);
	while ((c = getopt_long(argc, argv, "Bb:C:c:d:E:e:F:f:hi:l:m:N:n:Pp:qR:rs:T:t:vVw:",
	    longopts, NULL)) != -1) {
		switch (c) {
		case OPT_VOLUME:
			if (sbx_volume_parse(optarg, &spec.volumes, &err) < 0)
				sbx_die_err(&err);
			break;
		case OPT_ALLOW_OUT:
			add_rule(&spec.net_rules, "allow_out", optarg);
			break;
		case OPT_DENY_OUT:
			add_rule(&spec.net_rules, "deny_out", optarg);
			break;
		case OPT_INJECT_HEADER:
			/* The value is read now, from here on never shown. */
			if (!spec.net_inject)
				spec.net_inject = json_array();
			if (sbx_net_inject_parse(optarg, spec.net_inject,
			    &err) < 0)
				sbx_die_err(&err);
			break;
		case OPT_EGRESS_PROXY:
			if (sbx_net_proxy_parse(optarg, &np, &err) < 0)
				sbx_die_err(&err);
			proxy = optarg;
			break;
		case OPT_PORT:
			add_port(&spec.ports, optarg);
			break;
		case OPT_START:
		case OPT_READY:
		case OPT_POST_CREATE:
		case OPT_NO_START:
		case OPT_READY_TIMEOUT:
			start_opt(spec.start, c, optarg);
			break;
		case 'b':
			backend = optarg;
			break;
		case 'B':
			build = 1;
			break;
		case 'C':
			context = optarg;
			break;
		case 'f':
			dockerfile = optarg;
			break;
		case 'F':
			from = optarg;
			break;
		case 't':
			tag = optarg;
			break;
		case 'c':
			if (sbx_limits_parse(SBX_CAP_CPUS, optarg, &spec) < 0)
				sbx_usage_error(usage, "invalid cpus '%s'", optarg);
			given |= SBX_CAP_CPUS;
			break;
		case 'd':
			disk_arg = optarg;
			break;
		case 'E':
			spec.endpoint = optarg;
			break;
		case 'e':
			env = sbx_xrealloc(env, (nenv + 2) * sizeof *env);
			if (!(env[nenv++] = sbx_parse_env(optarg, &err)))
				sbx_die_err(&err);
			env[nenv] = NULL;
			break;
		case 'i':
			spec.image = optarg;
			image_given = 1;
			break;
		case 'l':
			if (sbx_parse_label(optarg, spec.labels, &err) < 0)
				sbx_die_err(&err);
			break;
		case 'm':
			if (sbx_limits_parse(SBX_CAP_MEMORY, optarg, &spec) < 0)
				sbx_usage_error(usage, "invalid memory size '%s' "
				    "(at least 4M, or 0 for none)", optarg);
			given |= SBX_CAP_MEMORY;
			break;
		case 'N':
			if (!valid_name(optarg))
				sbx_usage_error(usage, "invalid name '%s'", optarg);
			spec.name = optarg;
			break;
		case 'n':
			if (!strcmp(optarg, "deny"))
				spec.network = SBX_NET_DENY;
			else if (!strcmp(optarg, "allow"))
				spec.network = SBX_NET_ALLOW;
			else
				sbx_usage_error(usage,
				    "invalid network '%s' (deny or allow)", optarg);
			break;
		case 'p':
			if (sbx_limits_parse(SBX_CAP_PIDS, optarg, &spec) < 0)
				sbx_usage_error(usage, "invalid pids '%s'", optarg);
			given |= SBX_CAP_PIDS;
			break;
		case 'P':
			spec.pull = 1;
			break;
		case 'R':
			if (!valid_name(optarg))
				sbx_usage_error(usage, "invalid runtime '%s'",
				    optarg);
			spec.runtime = optarg;
			break;
		case 'r':
			reuse = 1;
			break;
		case 's':
			state = optarg;
			break;
		case 'T':
			if (sbx_opt_duration("--timeout", optarg, 0,
			    SBX_TIMEOUT_MAX, &spec.timeout, &err) < 0)
				sbx_die_err(&err);
			break;
		case 'w':
			/* "/workspace/" as a shell completes it: the same
			 * directory. */
			sbx_path_trim(optarg);
			spec.workdir = optarg;
			workdir_given = 1;
			break;
		default:
			if (!sbx_opt_common(c, usage))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (optind < argc)
		sbx_usage_error(usage, "unexpected argument '%s'", argv[optind]);
	if (sbx_json_str(spec.start, "cmd") && json_object_get(spec.start,
	    "no_start"))
		sbx_usage_error(usage, "--start and --no-start do not go "
		    "together");
	if (build && (!tag || image_given))
		sbx_usage_error(usage, "--build %s", image_given ? "and --image "
		    "exclude each other" : "needs -t name");
	if (!build && (tag || dockerfile || context))
		sbx_usage_error(usage, "--%s is for --build", tag ? "tag" :
		    dockerfile ? "file" : "context");
	spec.env = env;
	disk_limit(&spec, disk_arg);
	if (!backend)
		backend = sbx_backend_default();
	if (spec.endpoint && (!(be = sbx_backend_find(backend)) ||
	    !be->endpoint))
		sbx_usage_error(usage, "--endpoint is for backend %s",
		    sbx_backend_endpoint_names(names, sizeof names));
	if (!state && getenv("SBX_STATE") && *getenv("SBX_STATE"))
		state = getenv("SBX_STATE");
	/* Where every other tool looks first; "-" for no state file. */
	if (!state)
		state = SBX_STATE_DEFAULT;
	else if (!strcmp(state, "-"))
		state = NULL;
	/* A state file's sandbox is looked at too, on its own backend. */
	sbx_flavour_pick(backend);
	if (state)
		sbx_flavour_pick_state(state);
	/* Built only when the context's hash is new. */
	if (build)
		spec.image = built = build_image(backend, tag, dockerfile,
		    context ? context : ".");
	/* Checked as a flag first; the password only once all is well. */
	spec.egress_proxy = proxy ? json_object() : NULL;
	if (!(be = sbx_backend_get(backend, &err)))
		sbx_die_err(&err);
	/* The local store's snapshots are the local backend's; another
	 * backend's are its own (docker: images with their meta; e2b:
	 * templates, by id). */
	if (from && (build || sbx_backend_need(be, SBX_CAP_SNAPSHOT, &err) <
	    0 || (!(snap = sbx_backend_snap_get(be, from, &err)) &&
	    err.code))) {
		if (build)
			sbx_usage_error(usage, "--from and --build exclude each "
			    "other");
		sbx_die_err(&err);
	}
	if (from && !snap)
		spec.from = from;
	if (snap) {
		/* Its image, workdir, labels and limits, unless flags say
		 * otherwise. */
		sbx_snap_spec(snap, &spec, &given, image_given, workdir_given);
		workdir_given |= spec.workdir != NULL;
	}
	if (sbx_limits_default(be, &spec, given, &err) < 0 ||
	    sbx_backend_check_spec(be, &spec, &err) < 0)
		sbx_die_err(&err);
	if (proxy) {
		json_decref(spec.egress_proxy);
		spec.egress_proxy = egress_proxy(proxy);
	}
	if (reuse && !state)
		sbx_usage_error(usage, "--reuse needs a state file (not -s -)");
	/* An image of the local store: its WorkingDir is the sandbox's, as
	 * the state file will say, unless -w says otherwise. */
	if (!workdir_given && be->in_store)
		image_workdir = sbx_image_workdir(spec.image);
	if (image_workdir)
		spec.workdir = image_workdir;
	if (state) {
		newdir = new_sbx_dir(state);
		if (sbx_state_dir_prepare(state, &err) < 0 ||
		    sbx_state_open(&st, state, &err) < 0)
			sbx_die_err(&err);
		if (!reuse)
			check_state_free(&st);
		else if (reuse_state(&st))
			goto done;
		else if (json_object_get(st.root, "ref") && (!sbx_json_str(
		    st.root, "status") || strcmp(sbx_json_str(st.root,
		    "status"), "killed")))
			/* Lost, not killed on purpose: replaced, and the
			 * budget goes on. A killed one starts afresh. */
			old = json_incref(st.root);
	}
	/* One made ahead (local.warm), else a new one. */
	if ((be->ops->warm_take && (taken = be->ops->warm_take(&spec, &ref,
	    &err)) < 0) || (!taken && be->ops->create(&spec, &ref,
	    &err) < 0)) {
		/* No state file came of it: no lock file is left either. */
		if (state)
			sbx_state_release(&st);
		if (newdir)
			drop_sbx_dir(newdir);
		sbx_die_err(&err);
	}
	/* Up only once its start command is ready: else nothing is left. */
	if (sbx_start_run(be, ref, spec.start, 1, &err) < 0) {
		struct sbx_err kerr;

		be->ops->kill(ref, 0, &kerr);
		sbx_cmdlog_remove(be->name, sbx_json_str(ref, "id"));
		if (state)
			sbx_state_release(&st);
		if (newdir)
			drop_sbx_dir(newdir);
		sbx_die_err(&err);
	}
	if (state) {
		json_decref(st.root);
		st.root = sbx_state_new_root(ref, &spec);
		if (old)
			replaced(st.root, old);
		/* No fsync for a sandbox of this host's store (1-15 ms of a
		 * create): its processes end with the host, so a state lost
		 * to a crash names nothing alive, and sbx-gc takes what is
		 * left of it for dead. A remote one outlives the host: its
		 * state must not be lost. */
		st.lazy = be->in_store;
		if (sbx_state_save(&st, &err) < 0) {
			struct sbx_err kerr;

			/* No sandbox without its state: it would be lost. */
			be->ops->kill(ref, 0, &kerr);
			sbx_state_release(&st);
			if (newdir)
				drop_sbx_dir(newdir);
			sbx_die_err(&err);
		}
		sbx_state_release(&st);
	}
	if (old) {
		/* Printed, not kept: the state holds the ref itself. */
		json_t *out = json_deep_copy(ref);

		json_object_set_new(out, "replaced", json_true());
		sbx_out_json(out);
		json_decref(out);
	} else
		sbx_out_json(ref);
	/* Made full again for the creates to come, once this one is out. */
	if (be->ops->warm_fill)
		be->ops->warm_fill(&spec);
done:
	json_decref(ref);
	json_decref(old);
	json_decref(snap);
	json_decref(spec.labels);
	json_decref(spec.start);
	json_decref(spec.net_rules);
	json_decref(spec.net_inject);
	egress_proxy_free(spec.egress_proxy);
	json_decref(spec.ports);
	json_decref(spec.volumes);
	free(newdir);
	free(image_workdir);
	free(built);
	for (nenv = 0; env && env[nenv]; nenv++)
		free(env[nenv]);
	free(env);
	return sbx_out_close(rc);
}
