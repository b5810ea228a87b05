/* lifecycle.c - the e2b backend's sandboxes: create (with its size check),
 * kill, info, list, pause and resume, and its table of operations */
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2b.h"

/* --disk against the template's disk (diskSizeMB): more than it has is
 * refused, as --cpus and --memory are. limits.disk's default is not
 * checked: the template decides. */
static int
disk_check(const json_t *s, const struct sbx_spec *spec,
    const struct sbx_err *gerr, const char *endpoint, const char *id,
    struct sbx_err *err)
{
	long long mb = s ? sbx_json_int(s, "diskSizeMB", 0) : 0;

	if (!spec->disk || spec->disk_default)
		return 0;
	if (mb <= 0) {
		if (gerr)
			return sbx_err_set(err, gerr->code, "%s", gerr->msg);
		return sbx_err_set(err, SBX_EX_USAGE, "'%s' did not say the "
		    "disk size of sandbox '%s' (--disk)", endpoint, id);
	}
	if (spec->disk > (uint64_t)mb << 20)
		return sbx_err_set(err, SBX_EX_USAGE, "template '%s' gives a "
		    "disk of %lld MiB, less than --disk asks: E2B sizes a "
		    "sandbox by its template (build one with more)",
		    sbx_json_str(s, "templateID") ? sbx_json_str(s,
		    "templateID") : "?", mb);
	return 0;
}

/* E2B sizes a sandbox by its template: the ref records what it got, for
 * sbx-cost's per vCPU and per GiB rates (null: not told). Less than
 * --cpus or --memory asks for is refused (the caller kills it); more is
 * said, since it is billed. */
static int
size_check(struct eb *e, const char *id, const struct sbx_spec *spec,
    json_t *ref, struct sbx_err *err)
{
	json_t *s = NULL;
	struct sbx_err gerr = {0};
	long long cpus = 0, mib = 0;
	const char *t;
	int few_cpus, few_mib;

	if (sbx_e2b_get(e, id, &s, &gerr) == 0) {
		cpus = sbx_json_int(s, "cpuCount", 0);
		mib = sbx_json_int(s, "memoryMB", 0);
	}
	t = s && sbx_json_str(s, "templateID") ? sbx_json_str(s,
	    "templateID") : "?";
	json_object_set_new(ref, "resources", json_pack("{s:o,s:o}", "vcpus",
	    cpus > 0 ? json_integer(cpus) : json_null(), "memory_mib",
	    mib > 0 ? json_integer(mib) : json_null()));
	if (disk_check(s, spec, gerr.code ? &gerr : NULL, e->endpoint, id,
	    err) < 0) {
		json_decref(s);
		return -1;
	}
	if ((spec->cpus_milli || spec->memory) && (cpus <= 0 || mib <= 0)) {
		json_decref(s);
		if (gerr.code)
			return sbx_err_set(err, gerr.code, "%s", gerr.msg);
		return sbx_err_set(err, SBX_EX_FAIL, "'%s' did not say the "
		    "size of sandbox '%s' (--cpus, --memory)", e->endpoint,
		    id);
	}
	few_cpus = spec->cpus_milli > (uint64_t)cpus * 1000;
	few_mib = spec->memory > (uint64_t)mib << 20;
	if (few_cpus || few_mib) {
		sbx_err_set(err, SBX_EX_USAGE, "template '%s' gives %lld vCPU "
		    "and %lld MiB, less than %s asks: E2B sizes a sandbox by "
		    "its template (build one with more)", t, cpus, mib,
		    few_cpus && few_mib ? "--cpus and --memory" : few_cpus ?
		    "--cpus" : "--memory");
		json_decref(s);
		return -1;
	}
	if ((spec->cpus_milli && spec->cpus_milli < (uint64_t)cpus * 1000) ||
	    (spec->memory && spec->memory < (uint64_t)mib << 20))
		sbx_warn("template '%s' gives %lld vCPU and %lld MiB, more than "
		    "--cpus/--memory ask, and is billed as such", t, cpus, mib);
	json_decref(s);
	return 0;
}

/* A sandbox made for nothing goes again. */
static void
discard(struct eb *e, const char *id)
{
	struct sbx_http_resp rs;
	struct sbx_err err;

	if (sbx_e2b_req(e, "DELETE", NULL, &rs, &err, "/sandboxes/%s", id) == 0)
		sbx_http_resp_release(&rs);
}

/* --- create --------------------------------------------------------------- */

/* The workdir, made in the new sandbox (a template has /home/user). */
static int
make_workdir(const json_t *ref, const char *dir, struct sbx_err *err)
{
	char *argv[] = {"mkdir", "-p", "--", (char *)dir, NULL};
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4096,
	    .cwd = "/", .timeout_ms = 30000};
	struct sbx_exec_result res;
	int rc = 0;

	if (sbx_e2b_exec(ref, argv, &o, &res, err) < 0)
		return -1;
	if (res.exit_code)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot make the workdir "
		    "'%s': %.*s", dir, (int)strcspn(res.err.data ?
		    res.err.data : "", "\n"), res.err.data ? res.err.data :
		    "");
	sbx_buf_release(&res.out);
	sbx_buf_release(&res.err);
	return rc;
}

/* "user@host", who made a sandbox. */
static char *
owner(void)
{
	struct passwd *pw = getpwuid(geteuid());
	char host[256] = "";

	if (gethostname(host, sizeof host - 1) < 0)
		host[0] = '\0';
	return sbx_xasprintf("%s@%s", pw && pw->pw_name ? pw->pw_name : "?",
	    *host ? host : "?");
}

static json_t *
create_body(const struct sbx_spec *spec, json_t *net)
{
	json_t *b = json_object(), *meta = json_object(), *env = json_object();
	char t[32], *k;
	size_t i;
	uint64_t timeout = spec->timeout ? spec->timeout : DEFAULT_TIMEOUT;

	snprintf(t, sizeof t, "%llu", (unsigned long long)spec->timeout);
	json_object_update(meta, spec->labels);
	json_object_set_new(meta, MANAGED, json_string("1"));
	json_object_set_new(meta, "io.sbx.timeout", json_string(t));
	/* Who made it, and when (startedAt may be a resume's): E2B's own
	 * tools show them; sbx-ls and sbx-gc date it by the latter. */
	snprintf(t, sizeof t, "%lld", sbx_now());
	json_object_set_new(meta, CREATED, json_string(t));
	k = owner();
	json_object_set_new(meta, OWNER, json_string(k));
	free(k);
	if (spec->workdir)
		json_object_set_new(meta, WORKDIR, json_string(spec->workdir));
	for (i = 0; spec->env && spec->env[i]; i++) {
		k = sbx_xstrdup(spec->env[i]);
		k[strcspn(k, "=")] = '\0';
		json_object_set_new(env, k, json_string(spec->env[i] +
		    strlen(k) + (spec->env[i][strlen(k)] == '=')));
		free(k);
	}
	/* A snapshot is a template (sbx-create --from). */
	json_object_set_new(b, "templateID", json_string(spec->from ?
	    spec->from : !spec->image || !strcmp(spec->image, "host") ?
	    DEFAULT_TEMPLATE : spec->image));
	json_object_set_new(b, "timeout", json_integer((json_int_t)timeout));
	json_object_set_new(b, "metadata", meta);
	json_object_set_new(b, "envVars", env);
	json_object_set_new(b, "secure", json_true());
	json_object_set_new(b, "allow_internet_access",
	    json_boolean(spec->network == SBX_NET_ALLOW));
	/* --volume NAME:PATH as E2B's volumeMounts (made first: E2B mounts
	 * only what exists). */
	if (json_array_size(spec->volumes))
		json_object_set(b, "volumeMounts", spec->volumes);
	if (net)
		json_object_set_new(b, "network", net);
	return b;
}

static int
e2b_create(const struct sbx_spec *spec, json_t **ref, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct eb e;
	json_t *body = NULL, *net = NULL;
	const char *id;
	const char *api = sbx_e2b_endpoint_config();
	int rc = -1;

	*ref = NULL;
	if (spec->workdir && !sbx_path_plain(spec->workdir))
		return sbx_err_set(err, SBX_EX_USAGE, "invalid workdir '%s' "
		    "(want an absolute, plain path)", spec->workdir);
	if ((spec->net_rules || spec->egress_proxy || spec->net_inject) &&
	    !(net = sbx_e2b_net_body(spec->net_rules, spec->egress_proxy,
	    spec->net_inject, err)))
		return -1;
	if (sbx_e2b_open(&e, spec->endpoint, err) < 0) {
		sbx_e2b_body_free(net);
		return -1;
	}
	/* Its volumes made first, as docker makes one at first use. */
	for (size_t i = 0; i < json_array_size(spec->volumes); i++)
		if (sbx_e2b_volume("create", sbx_json_str(json_array_get(
		    spec->volumes, i), "name"), NULL, NULL, err) < 0) {
			sbx_e2b_close(&e);
			sbx_e2b_body_free(net);
			return -1;
		}
	body = create_body(spec, net);
	if (sbx_e2b_req(&e, "POST", body, &rs, err, "/sandboxes") < 0)
		goto out;
	if (rs.status != 201 && rs.status != 200) {
		sbx_e2b_fail(&rs, "cannot create a sandbox", NULL, err);
		goto out;
	}
	id = sbx_json_str(rs.json, "sandboxID");
	if (!sbx_e2b_valid_id(id)) {
		sbx_err_set(err, SBX_EX_FAIL, "'%s' created a sandbox but did "
		    "not say its id", e.endpoint);
		goto out;
	}
	*ref = json_pack("{ssssss}", "backend", "e2b", "id", id, "endpoint",
	    e.endpoint);
	json_object_set_new(*ref, "timeout", json_integer((json_int_t)(
	    spec->timeout ? spec->timeout : DEFAULT_TIMEOUT)));
	sbx_e2b_envd_where(*ref, id, spec->endpoint || (api && *api),
	    e.endpoint,
	    rs.json);
	if (size_check(&e, id, spec, *ref, err) < 0) {
		discard(&e, id);
		json_decref(*ref);
		*ref = NULL;
		goto out;
	}
	if (spec->workdir && make_workdir(*ref, spec->workdir, err) < 0) {
		/* Not made whole: not made. */
		discard(&e, id);
		json_decref(*ref);
		*ref = NULL;
		goto out;
	}
	rc = 0;
out:
	sbx_http_resp_release(&rs);
	/* It holds the values of --env, a proxy's password and injected
	 * headers: the last two are wiped. */
	if (body)
		sbx_e2b_body_free(body);
	sbx_e2b_close(&e);
	return rc;
}

/* --- kill, info, list, pause ---------------------------------------------- */

static int
e2b_kill(json_t *ref, int keep, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	struct eb e;
	json_t *s;
	const char *id;
	int rc = 0;

	(void)keep; /* no KEEP: the caps say so */
	if (sbx_e2b_ref_open(&e, ref, &id, &s, err) < 0)
		return -1;
	json_decref(s);
	if (sbx_e2b_req(&e, "DELETE", NULL, &rs, err, "/sandboxes/%s",
	    id) < 0) {
		sbx_e2b_close(&e);
		return -1;
	}
	if (rs.status >= 300)
		rc = sbx_e2b_fail(&rs, "cannot kill the sandbox", id, err);
	sbx_http_resp_release(&rs);
	sbx_e2b_close(&e);
	return rc;
}

static json_t *
e2b_info(const json_t *ref, struct sbx_err *err)
{
	struct eb e;
	json_t *s, *o;
	const char *id;

	if (sbx_e2b_ref_open(&e, ref, &id, &s, err) < 0)
		return NULL;
	o = sbx_e2b_info_of(s, e.endpoint);
	json_decref(s);
	sbx_e2b_close(&e);
	return o;
}

struct listing {
	int (*fn)(json_t *info, void *arg);
	void *arg;
	const char *endpoint;
};

static int
list_one(json_t *one, void *arg)
{
	struct listing *l = arg;
	json_t *o;
	int rc;

	if (sbx_labels_ours(json_object_get(one, "metadata"), NULL, NULL,
	    NULL) < 0)
		return 0;
	o = sbx_e2b_info_of(one, l->endpoint);
	rc = l->fn(o, l->arg);
	json_decref(o);
	return rc;
}

/* GET /v2/sandboxes, running and paused, page after page, with the
 * metadata filter for sbx's own (encoded twice, as the SDKs do). */
static int
e2b_list(int (*fn)(json_t *info, void *arg), void *arg, struct sbx_err *err)
{
	struct listing l = {fn, arg, NULL};
	struct eb e;
	char *q, *path;
	int rc;

	if (sbx_e2b_open(&e, NULL, err) < 0)
		return -1;
	l.endpoint = e.endpoint;
	q = sbx_http_escape(MANAGED "=1");
	path = sbx_xasprintf("/v2/sandboxes?metadata=%s&state=running,paused"
	    "&limit=100", q);
	rc = sbx_e2b_pages(&e, path, "cannot list sandboxes", list_one, &l,
	    err);
	free(path);
	free(q);
	sbx_e2b_close(&e);
	return rc;
}

static int
e2b_pause(json_t *ref, int stop, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	struct eb e;
	json_t *s;
	const char *id;
	int rc = 0;

	(void)stop; /* only suspend: the caps say so */
	if (sbx_e2b_ref_open(&e, ref, &id, &s, err) < 0)
		return -1;
	if (!strcmp(sbx_json_str(s, "state") ? sbx_json_str(s, "state") : "",
	    "paused"))
		goto out;
	if (sbx_e2b_req(&e, "POST", NULL, &rs, err, "/sandboxes/%s/pause",
	    id) < 0) {
		rc = -1;
		goto out;
	}
	/* 409: paused already, or on its way. */
	if (rs.status >= 300 && rs.status != 409)
		rc = sbx_e2b_fail(&rs, "cannot pause the sandbox", id, err);
	sbx_http_resp_release(&rs);
out:
	json_decref(s);
	sbx_e2b_close(&e);
	return rc;
}

static int
e2b_resume(json_t *ref, struct sbx_err *err)
{
	struct eb e;
	json_t *s;
	const char *id;
	int rc;

	if (sbx_e2b_ref_open(&e, ref, &id, &s, err) < 0)
		return -1;
	json_decref(s);
	rc = sbx_e2b_connect(&e, ref, id, NULL, err);
	sbx_e2b_close(&e);
	return rc;
}

const struct sbx_backend_ops sbx_e2b_ops = {
	.create = e2b_create,
	.exec = sbx_e2b_exec,
	.shell = sbx_shell_remote,
	.kill = e2b_kill,
	.info = e2b_info,
	.pause = e2b_pause,
	.resume = e2b_resume,
	.list = e2b_list,
	.files = &sbx_e2b_files,
	.net_rules = sbx_e2b_net_rules,
	.ports = sbx_e2b_ports,
	.stats = sbx_e2b_stats,
	.snapshot = sbx_e2b_snapshot,
	.snapshots = sbx_e2b_snapshots,
	.snap_export = sbx_e2b_snap_export_op,
	.volume = sbx_e2b_volume,
	.answers = sbx_e2b_answers,
	/* E2B keeps no log of the sandbox's connections: net_log NULL. */
};
