/* start.c - a sandbox's start, ready and post-create commands (sbx-create
 * --start, --ready, --post-create), through the backend contract alone,
 * so that every backend runs them the same way */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sbx.h"

/* How often --ready is tried. */
#define READY_POLL_MS 100

/* A JSON array of strings as a NULL-terminated argv (borrowed strings). */
static char **
argv_of(const json_t *a)
{
	char **v = sbx_xcalloc(json_array_size(a) + 1, sizeof *v);
	size_t i;

	for (i = 0; i < json_array_size(a); i++)
		v[i] = (char *)json_string_value(json_array_get(a, i));
	return v;
}

/* A command line the user typed, run as sbx-exec's users run one. */
static json_t *
sh_argv(const char *cmd)
{
	return json_pack("[sss]", "sh", "-c", cmd);
}

int
sbx_start_argv(const struct sbx_backend *be, const json_t *ref,
    const json_t *start, json_t **argv, struct sbx_err *err)
{
	const char *cmd = sbx_json_str(start, "cmd");

	*argv = NULL;
	if (cmd)
		*argv = sh_argv(cmd);
	else if (!json_is_true(json_object_get(start, "no_start")) &&
	    be->ops->image_cmd && !(*argv = be->ops->image_cmd(ref, err)) &&
	    err->code)
		return -1;
	return 0;
}

/* The start command, detached, with a line in the sandbox's log as
 * sbx-exec -d writes (its output: sbx-logs -o). */
static int
detach(const struct sbx_backend *be, const json_t *ref, const json_t *argv,
    struct sbx_err *err)
{
	struct sbx_exec_opts o = {0};
	char cid[SBX_CMDLOG_ID_LEN + 1], **av = argv_of(argv);
	long long t = sbx_now();
	json_t *line;
	struct sbx_err lerr = {0};

	sbx_cmdlog_new_id(cid);
	if (sbx_cmdlog_detach(be, ref, cid, av, &o, err) < 0) {
		err->code = SBX_EX_FAIL;
		free(av);
		return -1;
	}
	line = sbx_cmdlog_line(t, cid, av, NULL, 1);
	json_object_set_new(line, "start", json_true());
	if (sbx_cmdlog_append(be->name, sbx_json_str(ref, "id"), line,
	    &lerr) < 0)
		sbx_warn("not logged: %s", lerr.msg);
	json_decref(line);
	free(av);
	return 0;
}

/* One run of cmd, its output captured; its exit code, or -1. */
static int
run(const struct sbx_backend *be, const json_t *ref, const char *cmd,
    uint64_t timeout_ms, struct sbx_exec_result *r, struct sbx_err *err)
{
	struct sbx_exec_opts o = {.capture = 1, .max_output = 64u << 10};
	json_t *a = sh_argv(cmd);
	char **av = argv_of(a);
	int rc;

	o.timeout_ms = timeout_ms;
	memset(r, 0, sizeof *r);
	rc = be->ops->exec(ref, av, &o, r, err);
	free(av);
	json_decref(a);
	return rc < 0 ? -1 : r->exit_code;
}

static void
release(struct sbx_exec_result *r)
{
	sbx_buf_release(&r->out);
	sbx_buf_release(&r->err);
}

/* --ready: tried until it exits 0, for at most its timeout. */
static int
ready(const struct sbx_backend *be, const json_t *ref, const char *cmd,
    uint64_t secs, struct sbx_err *err)
{
	long long end = sbx_mono_ms() + (long long)secs * 1000, left;
	struct sbx_exec_result r;
	char d[SBX_DURATION_LEN];
	int c;

	for (;;) {
		left = end - sbx_mono_ms();
		c = run(be, ref, cmd, left > 1000 ? (uint64_t)left : 1000, &r,
		    err);
		release(&r);
		if (c < 0)
			return -1;
		if (c == 0)
			return 0;
		if (sbx_mono_ms() + READY_POLL_MS > end)
			break;
		sbx_sleep_ms(READY_POLL_MS);
	}
	return sbx_err_set(err, SBX_EX_FAIL, "the ready command did not "
	    "succeed within %s (its last exit status %d)",
	    sbx_fmt_duration(secs, d, sizeof d), c);
}

int
sbx_start_run(const struct sbx_backend *be, const json_t *ref,
    const json_t *start, int first, struct sbx_err *err)
{
	const char *post = sbx_json_str(start, "post_create");
	const char *rd = sbx_json_str(start, "ready");
	struct sbx_exec_result r;
	json_t *argv;
	int c, rc = -1;

	if (sbx_start_argv(be, ref, start, &argv, err) < 0)
		return -1;
	if (argv && detach(be, ref, argv, err) < 0)
		goto out;
	if (rd && ready(be, ref, rd, (uint64_t)sbx_json_int(start,
	    "ready_timeout", SBX_READY_TIMEOUT), err) < 0)
		goto out;
	if (first && post) {
		if ((c = run(be, ref, post, 0, &r, err)) < 0)
			goto out;
		if (c) {
			/* Its output is what says why. */
			fwrite(r.out.data ? r.out.data : "", 1, r.out.len,
			    stderr);
			fwrite(r.err.data ? r.err.data : "", 1, r.err.len,
			    stderr);
			release(&r);
			sbx_err_set(err, SBX_EX_FAIL, "the post-create command "
			    "failed (exit status %d)", c);
			goto out;
		}
		release(&r);
	}
	rc = 0;
out:
	json_decref(argv);
	return rc;
}

/* A shell and nothing else (debian's, ubuntu's, busybox's Cmd): it is
 * for `docker run -it`, and detached, without a terminal or input, it
 * would end at once: no start command. */
static int
bare_shell(const json_t *a)
{
	static const char *const shells[] = {"sh", "bash", "ash", "dash",
	    "zsh", "ksh", "fish"};
	const char *s = json_string_value(json_array_get(a, 0)), *b;
	size_t i;

	if (json_array_size(a) != 1 || !s)
		return 0;
	b = strrchr(s, '/') ? strrchr(s, '/') + 1 : s;
	for (i = 0; i < sizeof shells / sizeof *shells; i++)
		if (!strcmp(b, shells[i]))
			return 1;
	return 0;
}

json_t *
sbx_start_image_argv(const json_t *config)
{
	const json_t *ep = json_object_get(config, "Entrypoint");
	const json_t *cmd = json_object_get(config, "Cmd");
	json_t *a = json_array(), *v;
	size_t i;

	json_array_foreach(ep, i, v)
		if (json_is_string(v))
			json_array_append(a, v);
	json_array_foreach(cmd, i, v)
		if (json_is_string(v))
			json_array_append(a, v);
	if (!json_array_size(a) || bare_shell(a)) {
		json_decref(a);
		return NULL;
	}
	return a;
}

int
sbx_start_restart(const json_t *ref, const json_t *start,
    struct sbx_err *err)
{
	const struct sbx_backend *be;
	struct sbx_err e = {0};

	if (!start)
		return 0;
	if (!(be = sbx_backend_of(ref, &e)) || sbx_start_run(be, ref, start,
	    0, &e) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "'%s' was resumed, but "
		    "not its start command: %s", sbx_json_str(ref, "id"),
		    e.msg);
	return 0;
}

int
sbx_start_again(const json_t *ref, const char *js, struct sbx_err *err)
{
	json_t *start;
	int rc;

	if (!js || !(start = json_loads(js, 0, NULL)))
		return 0;
	rc = sbx_start_restart(ref, start, err);
	json_decref(start);
	return rc;
}
