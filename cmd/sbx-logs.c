/* sbx-logs - the commands run in a sandbox, as JSON lines, from the log
 * sbx-exec keeps on the host; a detached command's output */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx-logs [-fqv] [-b backend] [-I id | -s file] [-n count] "
    "[-o cmdid]\n"
    "                [sandbox]\n";

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"follow", no_argument, NULL, 'f'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"id", required_argument, NULL, 'I'},
	{"lines", required_argument, NULL, 'n'},
	{"output", required_argument, NULL, 'o'},
	{"quiet", no_argument, NULL, 'q'},
	{"state", required_argument, NULL, 's'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"follow", NULL, "go on printing what comes until the sandbox ends"},
	{"lines", NULL, "print the last count commands only"},
	{"output", NULL, "print a detached command's output ('last': the "
	    "latest)"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-logs -s .sbx/s.json -n 5\n"
	"  sbx-logs -s .sbx/s.json -f -o \"$(sbx-exec -d -- make test)\"",
	1,
};

#define POLL_MS 250
#define CHECK_MS 1000

struct logs {
	const struct sbx_backend *be;
	json_t *ref;
	char *path;
	int fd;
	struct sbx_buf part;  /* a line not yet whole */
	json_t *lines;        /* every line read, in order */
	int running;          /* the sandbox runs: its files can be read */
	int warned;
};

static void
nap(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Whether the sandbox still is: 1 running, 2 paused (it comes back), 0
 * ended (listed still), -1 gone. */
static int
sandbox_state(struct logs *l, char **id, struct sbx_err *err)
{
	json_t *info = l->be->ops->info(l->ref, err);
	const char *s;
	int c;

	if (!info)
		return -1;
	if (id)
		*id = sbx_json_str(info, "id") ? sbx_xstrdup(sbx_json_str(info,
		    "id")) : NULL;
	s = sbx_json_str(info, "status");
	l->running = s && !strcmp(s, "running");
	c = l->running ? 1 : s && !strcmp(s, "paused") ? 2 : 0;
	json_decref(info);
	return c;
}

/* The whole lines appended since the last call, each added to l->lines
 * and, when out, into out too. */
static void
read_new(struct logs *l, json_t *out)
{
	char buf[65536], *p, *nl, *end;
	ssize_t n;
	json_t *o;

	if (l->fd < 0 && (l->fd = open(l->path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	while ((n = read(l->fd, buf, sizeof buf)) > 0)
		sbx_buf_add(&l->part, buf, (size_t)n);
	if (!l->part.len)
		return;
	end = l->part.data + l->part.len;
	for (p = l->part.data; (nl = memchr(p, '\n', (size_t)(end - p)));
	    p = nl + 1) {
		o = json_loadb(p, (size_t)(nl - p), 0, NULL);
		if (json_is_object(o) && sbx_json_str(o, "id")) {
			json_array_append(l->lines, o);
			if (out)
				json_array_append(out, o);
		}
		json_decref(o);
	}
	memmove(l->part.data, p, (size_t)(end - p));
	l->part.len = (size_t)(end - p);
}

/* Detached commands' ends, from the sandbox while it runs. */
static void
resolve(struct logs *l, json_t *lines)
{
	struct sbx_err err = {0};

	if (!l->running || !json_array_size(lines))
		return;
	if (sbx_cmdlog_resolve(l->be, l->ref, lines, &err) < 0 &&
	    !l->warned++)
		sbx_warn("cannot read detached commands' status: %s", err.msg);
}

static void
print(json_t *o)
{
	sbx_out_json(o);
	if (fflush(stdout) == EOF || ferror(stdout))
		exit(sbx_out_close(SBX_EX_FAIL));
}

static int
pending(const json_t *o)
{
	return json_is_true(json_object_get(o, "detached")) &&
	    !json_is_true(json_object_get(o, "ended"));
}

static int
show_log(struct logs *l, long long last, int follow)
{
	struct sbx_err err = {0};
	json_t *fresh = json_array(), *wait = json_array(), *o;
	long long next = 0;
	size_t i, from;
	int st;

	read_new(l, NULL);
	resolve(l, l->lines);
	from = last >= 0 && (size_t)last < json_array_size(l->lines) ?
	    json_array_size(l->lines) - (size_t)last : 0;
	json_array_foreach(l->lines, i, o) {
		if (i >= from)
			print(o);
		if (pending(o))
			json_array_append(wait, o);
	}
	while (follow) {
		nap(POLL_MS);
		json_array_clear(fresh);
		read_new(l, fresh);
		json_array_foreach(fresh, i, o) {
			print(o);
			if (pending(o))
				json_array_append(wait, o);
		}
		if (sbx_mono_ms() < next)
			continue;
		next = sbx_mono_ms() + CHECK_MS;
		if ((st = sandbox_state(l, NULL, &err)) < 0)
			break;
		/* A detached command that ended: its line again, whole. */
		resolve(l, wait);
		for (i = 0; i < json_array_size(wait);) {
			o = json_array_get(wait, i);
			if (pending(o)) {
				i++;
				continue;
			}
			print(o);
			json_array_remove(wait, i);
		}
		if (st == 0)
			break;
	}
	json_decref(fresh);
	json_decref(wait);
	return sbx_out_close(SBX_EX_OK);
}

static int
show_output(struct logs *l, const char *cid, int follow)
{
	struct sbx_err err = {0};
	const json_t *o, *it = NULL;
	uint64_t off = 0;
	int ended = 0;
	size_t i;

	read_new(l, NULL);
	json_array_foreach(l->lines, i, o)
		if (!strcmp(cid, "last") ? json_is_true(json_object_get(o,
		    "detached")) : !strcmp(sbx_json_str(o, "id"), cid))
			it = o;
	if (!it) {
		if (!strcmp(cid, "last"))
			sbx_die(SBX_EX_USAGE, "no detached command in the log "
			    "of '%s'", sbx_json_str(l->ref, "id"));
		sbx_die(SBX_EX_USAGE, "no command '%s' in the log of '%s'", cid,
		    sbx_json_str(l->ref, "id"));
	}
	cid = sbx_json_str(it, "id");
	if (!json_is_true(json_object_get(it, "detached")))
		sbx_die(SBX_EX_USAGE, "command '%s' was not detached: its "
		    "output went to its caller", cid);
	if (!l->running)
		sbx_die(SBX_EX_FAIL, "cannot read the output of '%s': sandbox "
		    "'%s' is not running", cid, sbx_json_str(l->ref, "id"));
	for (;;) {
		if (sbx_cmdlog_output(l->be, l->ref, cid, &off, &ended, NULL,
		    &err) < 0) {
			if (err.code == SBX_EX_OK)
				return SBX_EX_OK;
			sbx_die_err(&err);
		}
		if (!follow || ended)
			break;
		nap(CHECK_MS / 2);
		if (sandbox_state(l, NULL, &err) != 1)
			break;
	}
	return sbx_out_close(SBX_EX_OK);
}

int
main(int argc, char **argv)
{
	struct sbx_target t = {0};
	struct sbx_err err = {0};
	struct logs l = {.fd = -1, .part = SBX_BUF_INIT};
	const char *cid = NULL;
	char *id = NULL;
	long long last = -1;
	uint64_t v;
	int c, follow = 0, rc;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, "b:fhI:n:o:qs:vV", longopts,
	    NULL)) != -1) {
		switch (c) {
		case 'f':
			follow = 1;
			break;
		case 'n':
			if (sbx_parse_u64(optarg, 0, 1u << 30, &v) < 0)
				sbx_usage_error(usage, "invalid count '%s'",
				    optarg);
			last = (long long)v;
			break;
		case 'o':
			if (strcmp(optarg, "last") &&
			    !sbx_cmdlog_valid_cmd(optarg))
				sbx_usage_error(usage, "invalid command id "
				    "'%s'", optarg);
			cid = optarg;
			break;
		default:
			if (!sbx_opt_common(c, usage) &&
			    !sbx_target_opt(c, optarg, &t))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (argc - optind > 1)
		sbx_usage_error(usage, "unexpected argument '%s'",
		    argv[optind + 1]);
	if (optind < argc) {
		if (t.id || t.state_path)
			sbx_usage_error(usage, "a sandbox named twice: '%s' "
			    "and %s", argv[optind], t.id ? "--id" : "--state");
		t.id = argv[optind];
	}
	if (cid && last >= 0)
		sbx_usage_error(usage, "--output and --lines do not go "
		    "together");
	if (!(l.ref = sbx_ref_resolve(&t, NULL, &err)))
		sbx_die_err(&err);
	sbx_flavour_pick(sbx_json_str(l.ref, "backend"));
	if (!(l.be = sbx_backend_of(l.ref, &err)) ||
	    sandbox_state(&l, &id, &err) < 0) {
		json_decref(l.ref);
		sbx_die_err(&err);
	}
	if (!id || !(l.path = sbx_cmdlog_path(l.be->name, id)))
		sbx_die(SBX_EX_FAIL, "sandbox '%s' has no log",
		    sbx_json_str(l.ref, "id"));
	/* The sandbox's own id from here: a name may be taken again. */
	json_object_set_new(l.ref, "id", json_string(id));
	l.lines = json_array();
	if (cid)
		rc = show_output(&l, cid, follow);
	else
		rc = show_log(&l, last, follow);
	if (l.fd >= 0)
		close(l.fd);
	json_decref(l.lines);
	json_decref(l.ref);
	sbx_buf_release(&l.part);
	free(l.path);
	free(id);
	return rc;
}
