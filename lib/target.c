/* target.c - what a command acts on: ids from the operands or stdin, a
 * state file, the sandboxes of a listing that carry some labels */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx.h"

static char *
trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int from_ref;
static const char *line_backend;

int
sbx_target_from_ref(void)
{
	return from_ref;
}

const char *
sbx_target_line_backend(void)
{
	return line_backend;
}

int
sbx_each_stdin_id(sbx_id_fn fn, void *arg, int *count)
{
	char *line = NULL, *s;
	size_t cap = 0;
	int rc = 0, r;

	*count = 0;
	while (getline(&line, &cap, stdin) > 0) {
		s = trim(line);
		if (!*s)
			continue;
		if (*s == '{') {
			json_t *o = json_loads(s, 0, NULL);
			const char *id = sbx_json_str(o, "id");

			if (!id) {
				sbx_warn("no \"id\" in input line '%.60s'", s);
				r = SBX_EX_DATA;
			} else {
				from_ref = 1;
				line_backend = sbx_json_str(o, "backend");
				r = fn(id, arg);
				from_ref = 0;
				line_backend = NULL;
				(*count)++;
			}
			json_decref(o);
		} else {
			r = fn(s, arg);
			(*count)++;
		}
		if (r > rc)
			rc = r;
	}
	free(line);
	return rc;
}


/* Ids may come down a pipe, a socket or from a file; never from a
 * terminal, and an empty stdin of a cron job must not count. */
int
sbx_stdin_has_ids(void)
{
	struct stat st;

	return fstat(0, &st) == 0 && (S_ISFIFO(st.st_mode) ||
	    S_ISSOCK(st.st_mode) || S_ISREG(st.st_mode));
}

int
sbx_each_target(const struct sbx_target *t, char *const *ids, int nids,
    sbx_id_fn on_id, int (*on_state)(const char *path, void *arg), void *arg,
    struct sbx_err *err)
{
	const char *path = t->state_path, *env = getenv("SBX_STATE");
	int i, r, rc = SBX_EX_OK, count;

	if (nids || t->id) {
		if (t->id && (r = on_id(t->id, arg)) > rc)
			rc = r;
		for (i = 0; i < nids; i++)
			if ((r = on_id(ids[i], arg)) > rc)
				rc = r;
		return rc;
	}
	/* Ids come down a pipe or from a file; an empty one means nothing
	 * to act on, never the sandbox of the current directory. */
	if (!sbx_ref_explicit(t) && sbx_stdin_has_ids()) {
		rc = sbx_each_stdin_id(on_id, arg, &count);
		if (!count)
			sbx_note("no ids on standard input");
		return rc;
	}
	if (!path)
		path = env && *env ? env : SBX_STATE_DEFAULT;
	if (!strcmp(path, SBX_STATE_DEFAULT) &&
	    access(SBX_STATE_DEFAULT, F_OK) < 0)
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: no ids, "
		    "no --state, and no '%s'", SBX_STATE_DEFAULT);
	return on_state(path, arg);
}

int
sbx_target_opt(int c, const char *arg, struct sbx_target *t)
{
	switch (c) {
	case 'b':
		t->backend = arg;
		return 1;
	case 'I':
		t->id = arg;
		return 1;
	case 's':
		t->state_path = arg;
		return 1;
	default:
		return 0;
	}
}

int
sbx_target_state_open(struct sbx_state *st, const char *path,
    const char *backend, struct sbx_err *err)
{
	if (sbx_state_open(st, path, err) < 0) {
		if (err && err->code == SBX_EX_NOSANDBOX)
			sbx_err_set(err, SBX_EX_NOSANDBOX,
			    "no sandbox: no state file '%s'", path);
		return -1;
	}
	/* Missing (opened as an empty object) or "{}": no sandbox, and
	 * neither the file nor its lock stays behind. */
	if (!json_object_size(st->root)) {
		unlink(path);
		sbx_state_release(st);
		return sbx_err_set(err, SBX_EX_NOSANDBOX,
		    "no sandbox: no state file '%s'", path);
	}
	if (sbx_ref_check_backend(json_object_get(st->root, "ref"), backend,
	    path, err) < 0) {
		sbx_state_release(st);
		return -1;
	}
	return 0;
}

int
sbx_target_state_close(struct sbx_state *st, const char *status,
    struct sbx_err *err)
{
	int rc = 0;

	if (status) {
		sbx_state_set_status(st->root, status);
		rc = sbx_state_save(st, err);
	}
	sbx_state_release(st);
	return rc;
}

int
sbx_target_labels_match(const json_t *info, const json_t *want)
{
	json_t *labels = json_object_get(info, "labels"), *v;
	const char *k;

	json_object_foreach((json_t *)want, k, v)
		if (!json_equal(json_object_get(labels, k), v))
			return 0;
	return 1;
}
