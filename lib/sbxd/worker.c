/* worker.c - the backend's lifecycle calls, each in a child of its own.
 *
 * The local backend starts a sandbox with a raw clone(2); a child cloned
 * from a process with threads inherits the locks those threads held
 * (malloc's, glibc's setxid broadcast) and hangs on them. So each call
 * runs in a child of the spawner (spawn.c), which has one thread; and
 * the sandbox's init is then the worker's child, not sbxd's: when the
 * worker exits it goes to pid 1 and is no zombie of sbxd. The answer
 * comes back as one length-prefixed JSON document. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbxd.h"

enum op { OP_CREATE, OP_KILL, OP_PAUSE, OP_RESUME, OP_NET, OP_STOP,
    OP_STATS, OP_OUTPUT, OP_SNAPSHOT, OP_VOLUME, OP_INFO };

/* A spec from JSON (sbx_spec_json's), its strings the JSON's. */
/* OP_VOLUME's fn: each entry into the array arg. */
static int
vol_each(json_t *vol, void *arg)
{
	json_array_append(arg, vol);
	return 0;
}

static void
spec_of(const json_t *j, struct sbx_spec *s)
{
	json_t *env = json_object_get(j, "env");
	size_t i;

	memset(s, 0, sizeof *s);
	s->image = sbx_json_str(j, "image");
	s->memory = (uint64_t)sbx_json_int(j, "memory", 0);
	s->cpus_milli = (uint64_t)sbx_json_int(j, "cpus_milli", 0);
	s->pids = (uint64_t)sbx_json_int(j, "pids", 0);
	s->limits_default = (unsigned)sbx_json_int(j, "limits_default", 0);
	s->disk = (uint64_t)sbx_json_int(j, "disk", 0);
	s->disk_default = json_is_true(json_object_get(j, "disk_default"));
	s->network = (enum sbx_net)sbx_json_int(j, "network", 0);
	s->timeout = (uint64_t)sbx_json_int(j, "timeout", 0);
	s->labels = json_object_get(j, "labels");
	s->env = sbx_xcalloc(json_array_size(env) + 1, sizeof *s->env);
	for (i = 0; i < json_array_size(env); i++)
		s->env[i] = (char *)json_string_value(json_array_get(env, i));
	s->workdir = sbx_json_str(j, "workdir");
	s->name = sbx_json_str(j, "name");
	s->runtime = sbx_json_str(j, "runtime");
	s->pull = json_is_true(json_object_get(j, "pull"));
	s->endpoint = sbx_json_str(j, "endpoint");
	/* None is null in the JSON. */
	s->net_rules = json_object_get(j, "net_rules");
	if (!json_is_object(s->net_rules))
		s->net_rules = NULL;
	s->net_inject = json_object_get(j, "net_inject");
	if (!json_is_array(s->net_inject))
		s->net_inject = NULL;
	s->egress_proxy = json_object_get(j, "egress_proxy");
	if (!json_is_object(s->egress_proxy))
		s->egress_proxy = NULL;
	s->ports = json_object_get(j, "ports");
	if (!json_is_array(s->ports))
		s->ports = NULL;
	s->from = sbx_json_str(j, "from");
	s->volumes = json_object_get(j, "volumes");
	if (!json_is_array(s->volumes))
		s->volumes = NULL;
	s->start = json_object_get(j, "start");
	if (!json_is_object(s->start))
		s->start = NULL;
}

/* OP_OUTPUT: the detached commands of lines (the sandbox's log's), each
 * with its end filled in from the sandbox and its output so far as
 * "output" (sbx-logs -o's, a MiB or so at most). */
static json_t *
detached_output(json_t *ref, json_t *lines, struct sbx_err *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct sbx_err e;
	uint64_t off;
	json_t *l;
	size_t i;
	int ended;

	if (!json_is_array(lines) || sbx_cmdlog_resolve(sbxd.be, ref, lines,
	    err) < 0)
		return NULL;
	json_array_foreach(lines, i, l) {
		off = 0;
		b.len = 0;
		memset(&e, 0, sizeof e);
		if (sbx_cmdlog_valid_cmd(sbx_json_str(l, "id")) &&
		    sbx_cmdlog_output(sbxd.be, ref, sbx_json_str(l, "id"), &off,
		    &ended, &b, &e) == 0)
			json_object_set_new(l, "output", sbx_json_bytes(b.len ?
			    b.data : "", b.len));
	}
	sbx_buf_release(&b);
	return json_incref(lines);
}

/* The spawner's child for a call (args: op, spec or ref); its answer on
 * fds[0]. */
void
sbxd_worker_child(json_t *args, int *fds, int nfds)
{
	struct sbx_err err = {0};
	struct sbx_spec spec;
	json_t *out_ref = NULL, *j, *ref = json_object_get(args, "ref");
	json_t *set = json_object_get(args, "set"), *out = NULL;
	enum op op = (enum op)sbx_json_int(args, "op", -1);
	uint32_t len;
	char *s;
	int rc;

	if (nfds != 1)
		_exit(125);
	if (fds[0] != 3 && (dup2(fds[0], 3) < 0 || close(fds[0]) < 0))
		_exit(125);
	close_range(4, ~0U, 0);
	switch (op) {
	case OP_CREATE:
		spec_of(json_object_get(args, "spec"), &spec);
		rc = sbxd.be->ops->create(&spec, &out_ref, &err);
		/* A template's start command, and its ready command waited
		 * for, before the create is answered; a failure leaves no
		 * sandbox. */
		if (rc == 0 && spec.start && sbx_start_run(sbxd.be, out_ref,
		    spec.start, 1, &err) < 0) {
			struct sbx_err e2;

			sbxd.be->ops->kill(out_ref, 0, &e2);
			json_decref(out_ref);
			out_ref = NULL;
			rc = -1;
		}
		break;
	case OP_KILL:
		rc = sbxd.be->ops->kill(ref, 0, &err);
		break;
	case OP_PAUSE:
		rc = sbxd.be->ops->pause(ref, 0, &err);
		break;
	case OP_RESUME:
		rc = sbxd.be->ops->resume(ref, &err);
		break;
	case OP_STOP:
		rc = sbx_backend_need(sbxd.be, SBX_CAP_STOP, &err) < 0 ? -1 :
		    sbxd.be->ops->pause(ref, 1, &err);
		break;
	case OP_NET:
		if (!sbxd.be->ops->net_rules)
			rc = sbx_err_set(&err, SBX_EX_USAGE, "backend '%s' "
			    "cannot filter the network", sbxd.be->name);
		else
			rc = (out = sbxd.be->ops->net_rules(ref,
			    json_is_object(set) ? set : NULL, &err)) ? 0 : -1;
		break;
	case OP_STATS:
		if (!sbxd.be->ops->stats)
			rc = sbx_err_set(&err, SBX_EX_USAGE, "backend '%s' "
			    "cannot tell what a sandbox uses", sbxd.be->name);
		else
			rc = (out = sbxd.be->ops->stats(ref, &err)) ? 0 : -1;
		break;
	case OP_OUTPUT:
		rc = (out = detached_output(ref, set, &err)) ? 0 : -1;
		break;
	case OP_INFO:
		rc = (out = sbxd.be->ops->info(ref, &err)) ? 0 : -1;
		break;
	case OP_VOLUME:
		if (!sbxd.be->ops->volume)
			rc = sbx_err_set(&err, SBX_EX_USAGE, "backend '%s' "
			    "has no volumes", sbxd.be->name);
		else
			rc = sbxd.be->ops->volume(sbx_json_str(set, "op"),
			    sbx_json_str(set, "name"), vol_each,
			    (out = json_array()), &err);
		break;
	case OP_SNAPSHOT:
		if (!sbxd.be->ops->snapshot)
			rc = sbx_err_set(&err, SBX_EX_USAGE, "backend '%s' "
			    "cannot snapshot a sandbox", sbxd.be->name);
		else
			rc = (out = sbxd.be->ops->snapshot(ref,
			    sbx_json_str(set, "name"), &err)) ? 0 : -1;
		break;
	default:
		_exit(125);
	}
	j = json_pack("{s:i,s:i,s:s,s:O?,s:o?}", "rc", rc, "code", err.code,
	    "msg", rc < 0 ? err.msg : "", "ref", op == OP_CREATE ? out_ref :
	    ref, "out", out);
	s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!s)
		_exit(125);
	len = (uint32_t)strlen(s);
	if (sbx_write_all(3, &len, sizeof len) < 0 ||
	    sbx_write_all(3, s, len) < 0)
		_exit(125);
	_exit(0);
}

/* Read n bytes, watching the worker: should it end without writing
 * them, the read does not wait for ever. */
static int
read_worker(int fd, struct sbxd_child *c, void *buf, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		struct pollfd p = {fd, POLLIN, 0};
		int pr = poll(&p, 1, 200);

		if (pr < 0 && errno != EINTR)
			return -1;
		if (pr <= 0) {
			/* Gone: what it wrote is in the pipe. */
			if (sbxd_child_wait(c, 0) != 0 && !(poll(&p, 1, 0) >
			    0))
				return -1;
			continue;
		}
		r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static int
call(enum op op, json_t *spec, json_t **ref,
    const json_t *set, json_t **out, struct sbx_err *err)
{
	struct sbxd_child c;
	int fds[2], rc = -1;
	uint32_t len = 0;
	char *s = NULL;
	json_t *j = NULL, *r, *args;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot make a pipe:");
	args = json_pack("{s:i}", "op", (int)op);
	if (op == OP_CREATE)
		json_object_set(args, "spec", spec);
	else
		json_object_set(args, "ref", *ref);
	if (set)
		json_object_set(args, "set", (json_t *)set);
	rc = sbxd_spawn("worker", args, &fds[1], 1, &c, err);
	/* It holds the values of the sandbox's env (and the set a proxy's
	 * password, which is the caller's to wipe). */
	json_object_clear(args);
	json_decref(args);
	close(fds[1]);
	if (rc < 0) {
		close(fds[0]);
		return -1;
	}
	rc = -1;
	if (read_worker(fds[0], &c, &len, sizeof len) == 0 &&
	    len < (1u << 24)) {
		s = sbx_xmalloc((size_t)len + 1);
		if (read_worker(fds[0], &c, s, len) == 0)
			j = json_loadb(s, len, 0, NULL);
	}
	close(fds[0]);
	sbxd_child_release(&c);
	free(s);
	if (!json_is_object(j)) {
		sbx_err_set(err, SBX_EX_FAIL, "the backend's worker ended "
		    "early");
		goto out;
	}
	rc = (int)sbx_json_int(j, "rc", -1);
	if (rc < 0) {
		err->code = (int)sbx_json_int(j, "code", SBX_EX_FAIL);
		snprintf(err->msg, sizeof err->msg, "%s",
		    sbx_json_str(j, "msg") ? sbx_json_str(j, "msg") : "");
		goto out;
	}
	r = json_object_get(j, "ref");
	if (out)
		*out = json_incref(json_object_get(j, "out"));
	if (op == OP_CREATE)
		*ref = json_incref(r);
	else if (json_is_object(r) && json_is_object(*ref))
		json_object_update(*ref, r);
out:
	json_decref(j);
	return rc;
}

int
sbxd_be_create(const struct sbx_spec *spec, json_t **ref,
    struct sbx_err *err)
{
	json_t *sj = sbx_spec_json(spec);
	int rc;

	*ref = NULL;
	rc = call(OP_CREATE, sj, ref, NULL, NULL, err);
	json_decref(sj);
	return rc;
}

int
sbxd_be_create_json(json_t *spec, json_t **ref, struct sbx_err *err)
{
	*ref = NULL;
	return call(OP_CREATE, spec, ref, NULL, NULL, err);
}

int
sbxd_be_kill(json_t *ref, struct sbx_err *err)
{
	return call(OP_KILL, NULL, &ref, NULL, NULL, err);
}

int
sbxd_be_pause(json_t *ref, struct sbx_err *err)
{
	return call(OP_PAUSE, NULL, &ref, NULL, NULL, err);
}

int
sbxd_be_stop(json_t *ref, struct sbx_err *err)
{
	return call(OP_STOP, NULL, &ref, NULL, NULL, err);
}

int
sbxd_be_resume(json_t *ref, struct sbx_err *err)
{
	return call(OP_RESUME, NULL, &ref, NULL, NULL, err);
}

json_t *
sbxd_be_stats(json_t *ref, struct sbx_err *err)
{
	json_t *out = NULL;

	if (call(OP_STATS, NULL, &ref, NULL, &out, err) < 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

json_t *
sbxd_be_info(json_t *ref, struct sbx_err *err)
{
	json_t *out = NULL;

	if (call(OP_INFO, NULL, &ref, NULL, &out, err) < 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

json_t *
sbxd_be_output(json_t *ref, const json_t *lines, struct sbx_err *err)
{
	json_t *out = NULL;

	if (call(OP_OUTPUT, NULL, &ref, lines, &out, err) < 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

json_t *
sbxd_be_snapshot(json_t *ref, const char *name, struct sbx_err *err)
{
	json_t *out = NULL, *set = json_pack("{s:s?}", "name", name);
	int rc = call(OP_SNAPSHOT, NULL, &ref, set, &out, err);

	json_decref(set);
	if (rc < 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

json_t *
sbxd_be_volume(const char *op, const char *name, struct sbx_err *err)
{
	json_t *out = NULL, *set = json_pack("{s:s,s:s?}", "op", op, "name",
	    name), *ref = json_object();
	int rc = call(OP_VOLUME, NULL, &ref, set, &out, err);

	json_decref(set);
	json_decref(ref);
	if (rc < 0) {
		json_decref(out);
		return NULL;
	}
	return out ? out : json_array();
}

json_t *
sbxd_be_net_rules(json_t *ref, const json_t *set, struct sbx_err *err)
{
	json_t *out = NULL;

	if (call(OP_NET, NULL, &ref, set, &out, err) < 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}
