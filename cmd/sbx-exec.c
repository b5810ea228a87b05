/* sbx-exec - run one command in a sandbox and exit with its status */
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx-exec [-dijRtqv] [-b backend] [-I id | -s file] [-w dir] "
    "[-e name[=value]]...\n"
    "                [-u user[:group]] [-T duration] [-M bytes] [--] command "
    "[arg ...]\n";

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"detach", no_argument, NULL, 'd'},
	{"env", required_argument, NULL, 'e'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"id", required_argument, NULL, 'I'},
	{"interactive", no_argument, NULL, 'i'},
	{"json", no_argument, NULL, 'j'},
	{"max-output", required_argument, NULL, 'M'},
	{"quiet", no_argument, NULL, 'q'},
	{"resume", no_argument, NULL, 'R'},
	{"state", required_argument, NULL, 's'},
	{"timeout", required_argument, NULL, 'T'},
	{"tty", no_argument, NULL, 't'},
	{"user", required_argument, NULL, 'u'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{"workdir", required_argument, NULL, 'w'},
	{NULL, 0, NULL, 0},
};

/* Our own failures use env(1)'s codes, so they cannot pass for the
 * command's: 125 for a usage error too. */
static void __attribute__((noreturn))
fail(int json, const struct sbx_err *err)
{
	int code = err->code;

	if (code < SBX_EX_TIMEOUT)
		code = SBX_EX_EXECFAIL;
	fprintf(stderr, "%s: %s\n", sbx_prog_get(), err->msg);
	if (json) {
		json_t *o = json_pack("{sisnsssssbsbsbsi}", "exit_code", code,
		    "signal", "stdout", "", "stderr", "", "stdout_truncated", 0,
		    "stderr_truncated", 0, "timed_out", 0, "duration_ms", 0);

		json_object_set_new(o, "error", json_string(err->msg));
		sbx_out_json(o);
		json_decref(o);
	}
	exit(sbx_out_close(code));
}

static void __attribute__((noreturn, format(printf, 1, 2)))
bad(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", sbx_prog_get());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(SBX_EX_EXECFAIL);
}

static void
print_json(const struct sbx_exec_result *r)
{
	json_t *o = json_object();

	json_object_set_new(o, "exit_code", json_integer(r->exit_code));
	json_object_set_new(o, "signal", r->signal ? json_integer(r->signal) :
	    json_null());
	json_object_set_new(o, "stdout", sbx_json_bytes(r->out.data ?
	    r->out.data : "", r->out.len));
	json_object_set_new(o, "stderr", sbx_json_bytes(r->err.data ?
	    r->err.data : "", r->err.len));
	json_object_set_new(o, "stdout_truncated",
	    json_boolean(r->out.truncated));
	json_object_set_new(o, "stderr_truncated",
	    json_boolean(r->err.truncated));
	json_object_set_new(o, "timed_out", json_boolean(r->timed_out));
	json_object_set_new(o, "duration_ms", json_integer(r->duration_ms));
	sbx_out_json(o);
	json_decref(o);
}

/* --resume: as sbx-pause --resume does, state file included (its status
 * and billable segments). */
static int
resume_first(const struct sbx_backend *be, json_t *ref, const char *state,
    struct sbx_err *err)
{
	struct sbx_state st;
	const char *s;

	if (be->ops->resume(ref, err) < 0)
		return -1;
	if (!state || sbx_state_open(&st, state, err) < 0)
		return 0;
	s = sbx_json_str(st.root, "status");
	if (s && (!strcmp(s, "paused") || !strcmp(s, "stopped"))) {
		sbx_state_set_status(st.root, "running");
		if (sbx_state_save(&st, err) < 0)
			sbx_warn("%s", err->msg);
	}
	sbx_state_release(&st);
	return 0;
}

/* The sandbox's own id, for its log: a ref from -b and -I may hold a
 * name or a prefix. */
static char *
log_id(const struct sbx_backend *be, const json_t *ref,
    const struct sbx_target *t)
{
	struct sbx_err err = {0};
	json_t *info;
	char *id;

	if (!(t->id && t->backend))
		return sbx_xstrdup(sbx_json_str(ref, "id"));
	if (!(info = be->ops->info(ref, &err)))
		return NULL;
	id = sbx_json_str(info, "id") ? sbx_xstrdup(sbx_json_str(info, "id")) :
	    NULL;
	json_decref(info);
	return id;
}

/* One line in the sandbox's log on the host (sbx-logs(1)); a failure to
 * write it is said, never the command's status. */
static void
log_line(const struct sbx_backend *be, const json_t *ref,
    const struct sbx_target *t, json_t *line)
{
	struct sbx_err err = {0};
	char *id = log_id(be, ref, t);

	if (!id || sbx_cmdlog_append(be->name, id, line, &err) < 0)
		sbx_warn("not logged: %s", id ? err.msg :
		    "cannot find the sandbox's id");
	free(id);
}

/* -d: started, logged, its id printed. */
static int
detach(const struct sbx_backend *be, const json_t *ref,
    const struct sbx_target *t, char *const argv[],
    const struct sbx_exec_opts *o, int json)
{
	char cid[SBX_CMDLOG_ID_LEN + 1];
	struct sbx_err err = {0};
	long long start = sbx_now();
	json_t *line;

	sbx_cmdlog_new_id(cid);
	if (sbx_cmdlog_detach(be, ref, cid, argv, o, &err) < 0)
		fail(json, &err);
	line = sbx_cmdlog_line(start, cid, argv, o->env, 1);
	log_line(be, ref, t, line);
	json_decref(line);
	if (json) {
		line = json_pack("{sssb}", "id", cid, "detached", 1);
		sbx_out_json(line);
		json_decref(line);
	} else {
		printf("%s\n", cid);
	}
	return 0;
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"detach", NULL, "start the command, print its id, and return at once"},
	{"env", NULL, "set a variable for the command (repeatable)"},
	{"interactive", NULL, "forward standard input to the command"},
	{"json", NULL, "print one JSON object: output and status"},
	{"max-output", NULL, "with -j, keep at most this much of each stream"},
	{"resume", NULL, "resume the sandbox first if it is paused"},
	{"timeout", NULL, "kill the command after this long (exit 124)"},
	{"tty", NULL, "run the command on a terminal"},
	{"user", NULL, "run the command as this user (a name or a uid)"},
	{"workdir", NULL, "the command's working directory"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-exec -s .sbx/s.json -- sh -c 'echo hi; exit 7'",
	1,
};

int
main(int argc, char **argv)
{
	struct sbx_target t = {0};
	struct sbx_exec_opts o = {0};
	struct sbx_exec_result r;
	struct sbx_err err = {0};
	const struct sbx_backend *be;
	uint64_t v;
	char **env = NULL;
	size_t nenv = 0;
	json_t *ref, *line;
	int c, json = 0, resume = 0, detached = 0;
	long long start;
	char cid[SBX_CMDLOG_ID_LEN + 1];
	const char *state = NULL;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	/* A closed 0, 1 or 2 must not be taken by our own socket and then
	 * handed to the command as its stdio: fill it with /dev/null. */
	for (c = 0; c < 3; c++)
		if (fcntl(c, F_GETFD) < 0 && open("/dev/null", c ? O_WRONLY :
		    O_RDONLY) != c)
			exit(SBX_EX_EXECFAIL);
	o.max_output = 1u << 20;
	while ((c = getopt_long(argc, argv, "+b:de:hI:ijM:qRs:tT:u:vVw:", longopts,
	    NULL)) != -1) {
		switch (c) {
		case 'd':
			detached = 1;
			break;
		case 'e':
			env = sbx_xrealloc(env, (nenv + 2) * sizeof *env);
			if (!(env[nenv++] = sbx_parse_env(optarg, &err)))
				fail(json, &err);
			env[nenv] = NULL;
			break;
		case 'i':
			o.interactive = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'M':
			if (sbx_parse_size(optarg, &v) < 0 || v > (1u << 30))
				bad("invalid max-output '%s'",
				    optarg);
			o.max_output = (size_t)v;
			break;
		case 't':
			o.tty = 1;
			break;
		case 'T':
			if (sbx_opt_duration("--timeout", optarg, 1,
			    SBX_TIMEOUT_MAX, &v, &err) < 0)
				bad("%s", err.msg);
			o.timeout_ms = v * 1000;
			break;
		case 'u':
			if (!*optarg)
				bad("invalid user '' (want name, uid, "
				    "name:group or uid:gid)");
			o.user = optarg;
			break;
		case 'w':
			o.cwd = optarg;
			break;
		case 'R':
			resume = 1;
			break;
		default:
			if (sbx_opt_common(c, usage) ||
			    sbx_target_opt(c, optarg, &t))
				break;
			exit(SBX_EX_EXECFAIL); /* getopt said why */
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "%s: no command given (see --help)\n",
		    sbx_prog_get());
		exit(SBX_EX_EXECFAIL);
	}
	if (json && o.tty) {
		fprintf(stderr, "%s: --json and --tty do not go together\n",
		    sbx_prog_get());
		exit(SBX_EX_EXECFAIL);
	}
	/* A detached command has no terminal, stdin or caller to time it
	 * out or to take its output. */
	if (detached && (o.tty || o.interactive || o.timeout_ms ||
	    o.max_output != 1u << 20 || o.user)) {
		fprintf(stderr, "%s: --detach does not go with %s\n",
		    sbx_prog_get(), o.tty ? "--tty" : o.interactive ?
		    "--interactive" : o.timeout_ms ? "--timeout" : o.user ?
		    "--user" : "--max-output");
		exit(SBX_EX_EXECFAIL);
	}
	if (o.cwd && o.cwd[0] != '/') {
		fprintf(stderr, "%s: workdir '%s' is not absolute\n",
		    sbx_prog_get(), o.cwd);
		exit(SBX_EX_EXECFAIL);
	}
	o.env = env;
	o.capture = json && !detached;
	if (!(ref = sbx_ref_resolve(&t, &state, &err)))
		fail(json, &err);
	sbx_flavour_pick(sbx_json_str(ref, "backend"));
	if (!(be = sbx_backend_of(ref, &err)) || sbx_backend_need(be,
	    (o.tty ? SBX_CAP_PTY : 0) | (o.interactive ? SBX_CAP_STDIN : 0),
	    &err) < 0)
		fail(json, &err);
	if (resume && be->ops->resume && resume_first(be, ref, state, &err) < 0)
		fail(json, &err);
	if (detached) {
		r = (struct sbx_exec_result){0};
		r.exit_code = detach(be, ref, &t, argv + optind, &o, json);
		goto out;
	}
	start = sbx_now();
	if (be->ops->exec(ref, argv + optind, &o, &r, &err) < 0)
		fail(json, &err);
	sbx_cmdlog_new_id(cid);
	line = sbx_cmdlog_line(start, cid, argv + optind, env, 0);
	sbx_cmdlog_ended(line, &r);
	log_line(be, ref, &t, line);
	json_decref(line);
	if (json)
		print_json(&r);
	else if (r.timed_out)
		sbx_warn("'%s' timed out after %llu s", argv[optind],
		    (unsigned long long)(o.timeout_ms / 1000));
out:
	sbx_buf_release(&r.out);
	sbx_buf_release(&r.err);
	json_decref(ref);
	for (nenv = 0; env && env[nenv]; nenv++)
		free(env[nenv]);
	free(env);
	return sbx_out_close(r.exit_code);
}
