/* backend.c - the table of backends and their capabilities, built twice:
 * the static flavour of the tools has the operations of local only, the
 * remote flavour (linked with libcurl) those of all (-DSBX_REMOTE) */
#include <string.h>

#include "internal.h"

/* The operations of a backend the remote flavour alone links. */
#ifdef SBX_REMOTE
#define REMOTE(ops) (&(ops))
#else
#define REMOTE(ops) NULL
#endif

/* E2B's published prices (e2b.dev/pricing, December 2025), the defaults
 * of sbx-cost. */
#define SBX_E2B_VCPU_SECOND "0.000014"
#define SBX_E2B_GIB_SECOND "0.0000045"
/* Daytona's (daytona.io/pricing): a vCPU-, a GiB- and a disk GiB-second
 * of a running sandbox. */
#define SBX_DAYTONA_VCPU_SECOND "0.000014"
#define SBX_DAYTONA_GIB_SECOND "0.0000045"
#define SBX_DAYTONA_DISK_GIB_SECOND "0.00000003"

/* Every backend, as data; what sets one apart from another is said
 * here and nowhere else. */
static const struct sbx_backend backends[] = {
	{
		.name = "local",
		.caps = SBX_CAP_PTY | SBX_CAP_STDIN | SBX_CAP_NET_DENY |
		    SBX_CAP_NET_ALLOW | SBX_CAP_MEMORY | SBX_CAP_CPUS |
		    SBX_CAP_PIDS | SBX_CAP_TIMEOUT | SBX_CAP_SUSPEND |
		    SBX_CAP_STOP | SBX_CAP_FILES | SBX_CAP_IDLE |
		    SBX_CAP_ZSTD | SBX_CAP_NAME | SBX_CAP_KEEP |
		    SBX_CAP_NET_RULES | SBX_CAP_PORTS | SBX_CAP_PUBLISH |
		    SBX_CAP_DISK | SBX_CAP_SHELL | SBX_CAP_SNAPSHOT |
		    SBX_CAP_SNAP_EXPORT | SBX_CAP_VOLUMES,
		/* On this machine compression only costs time. */
		.compress = SBX_COMPRESS_NONE,
		/* The CPU time it uses, priced as E2B prices a vCPU-second
		 * (sbx-cost(1)). */
		.cpu_second_default = SBX_E2B_VCPU_SECOND,
		.in_store = 1,
		.ops = &sbx_local_ops,
	},
	{
		.name = "docker",
		/* The engine does not say when an exec last ran: no IDLE.
		 * Engines before Docker 23 cannot unpack a zstd tar (a 500
		 * "unexpected EOF"): no ZSTD. */
		.caps = SBX_CAP_PTY | SBX_CAP_STDIN | SBX_CAP_NET_DENY |
		    SBX_CAP_NET_ALLOW | SBX_CAP_MEMORY | SBX_CAP_CPUS |
		    SBX_CAP_PIDS | SBX_CAP_TIMEOUT | SBX_CAP_RUNTIME |
		    SBX_CAP_PULL | SBX_CAP_SUSPEND | SBX_CAP_STOP |
		    SBX_CAP_FILES | SBX_CAP_NAME | SBX_CAP_KEEP |
		    SBX_CAP_NET_RULES | SBX_CAP_PORTS | SBX_CAP_PUBLISH |
		    SBX_CAP_DISK | SBX_CAP_SHELL | SBX_CAP_VOLUMES |
		    SBX_CAP_SNAPSHOT | SBX_CAP_SNAP_EXPORT,
		.compress = SBX_COMPRESS_GZIP,
		.cpu_second_default = SBX_E2B_VCPU_SECOND,
		.ops = REMOTE(sbx_docker_ops),
	},
	{
		.name = "e2b",
		/* --cpus and --memory are checked against the template's
		 * size (size_check); no zstd (the template's tar may lack
		 * it). Every port of a sandbox answers at its own host of
		 * E2B's domain: ports, and nothing to publish. */
		.caps = SBX_CAP_PTY | SBX_CAP_PTY | SBX_CAP_STDIN | SBX_CAP_CPUS |
		    SBX_CAP_MEMORY | SBX_CAP_NET_DENY | SBX_CAP_NET_ALLOW |
		    SBX_CAP_TIMEOUT | SBX_CAP_SUSPEND | SBX_CAP_FILES |
		    SBX_CAP_NET_RULES | SBX_CAP_PORTS | SBX_CAP_DISK |
		    SBX_CAP_SHELL | SBX_CAP_SNAPSHOT | SBX_CAP_SNAP_EXPORT |
		    SBX_CAP_VOLUMES,
		.compress = SBX_COMPRESS_GZIP,
		.endpoint = 1,
		.template_sized = 1,
		/* E2B's published rates. */
		.vcpu_second_default = SBX_E2B_VCPU_SECOND,
		.gib_second_default = SBX_E2B_GIB_SECOND,
		.ops = REMOTE(sbx_e2b_ops),
	},
	{
		.name = "daytona",
		/* Idle: the sandbox's lastActivityAt. Pause is Daytona's
		 * stop (a container's processes end): no SUSPEND. Every
		 * port answers at a preview URL of its own: ports, and
		 * nothing to publish. Network rules: an allow-list
		 * (net.c says which). */
		.caps = SBX_CAP_PTY | SBX_CAP_STDIN | SBX_CAP_CPUS |
		    SBX_CAP_MEMORY | SBX_CAP_DISK | SBX_CAP_NET_DENY |
		    SBX_CAP_NET_ALLOW | SBX_CAP_TIMEOUT | SBX_CAP_STOP |
		    SBX_CAP_NAME | SBX_CAP_IDLE | SBX_CAP_FILES |
		    SBX_CAP_ARCHIVE | SBX_CAP_PORTS | SBX_CAP_SHELL |
		    SBX_CAP_NET_RULES,
		.compress = SBX_COMPRESS_GZIP,
		.endpoint = 1,
		.template_sized = 1,
		/* Daytona's published rates (daytona.io/pricing). */
		.vcpu_second_default = SBX_DAYTONA_VCPU_SECOND,
		.gib_second_default = SBX_DAYTONA_GIB_SECOND,
		.disk_gib_second_default = SBX_DAYTONA_DISK_GIB_SECOND,
		.ops = REMOTE(sbx_daytona_ops),
	},
	{
		.name = "qemu",
		/* A microVM per sandbox (lib/qemu): its size is the VM's
		 * (-m, -smp), no process limit inside it; with allow (or
		 * ports) a NIC whose way out is sbx-netd's (rules, log,
		 * ports through QEMU's hostfwd; no header injection). Pause: QMP stop (suspend), or the VM
		 * powered off, its disk kept (stop). Files: tar in the VM
		 * over its port. Snapshots: its disk's overlay, copied
		 * (its own, not the store's; exported by comparing a VM of
		 * it with one of its image). */
		.caps = SBX_CAP_PTY | SBX_CAP_STDIN | SBX_CAP_FILES |
		    SBX_CAP_NET_DENY | SBX_CAP_NET_ALLOW | SBX_CAP_NET_RULES |
		    SBX_CAP_MEMORY |
		    SBX_CAP_CPUS | SBX_CAP_TIMEOUT | SBX_CAP_NAME |
		    SBX_CAP_KEEP | SBX_CAP_SUSPEND | SBX_CAP_STOP |
		    SBX_CAP_SHELL | SBX_CAP_SNAPSHOT | SBX_CAP_SNAP_EXPORT |
		    SBX_CAP_IDLE | SBX_CAP_PORTS | SBX_CAP_PUBLISH,
		.compress = SBX_COMPRESS_NONE,
		/* Priced by its size, as E2B prices its microVMs. */
		.vcpu_second_default = SBX_E2B_VCPU_SECOND,
		.gib_second_default = SBX_E2B_GIB_SECOND,
		.in_store = 1,
		.ops = &sbx_qemu_ops,
	},
};

#define NBACKENDS (sizeof backends / sizeof backends[0])

const char *
sbx_backend_default(void)
{
	return sbx_config_get("backend", "local");
}

const struct sbx_backend *
sbx_backend_find(const char *name)
{
	size_t i;

	for (i = 0; name && i < NBACKENDS; i++)
		if (!strcmp(backends[i].name, name))
			return &backends[i];
	return NULL;
}

const struct sbx_backend *
sbx_backend_get(const char *name, struct sbx_err *err)
{
	const struct sbx_backend *be = sbx_backend_find(name);

	if (!be) {
		sbx_err_set(err, SBX_EX_USAGE, "unknown backend '%s'", name);
		return NULL;
	}
	if (!be->ops) {
		sbx_err_set(err, SBX_EX_FAIL, "backend '%s' needs the remote "
		    "flavour of %s", name, sbx_prog_get());
		return NULL;
	}
	return be;
}

const char *
sbx_backend_endpoint_names(char *buf, size_t n)
{
	size_t i, len = 0;

	buf[0] = '\0';
	for (i = 0; i < NBACKENDS; i++)
		if (backends[i].endpoint && len < n)
			len += (size_t)snprintf(buf + len, n - len, "%s'%s'",
			    len ? " or " : "", backends[i].name);
	return buf;
}

const struct sbx_backend *
sbx_backend_of(const json_t *ref, struct sbx_err *err)
{
	const char *name = sbx_json_str(ref, "backend");

	if (!name) {
		sbx_err_set(err, SBX_EX_DATA, "ref names no backend");
		return NULL;
	}
	return sbx_backend_get(name, err);
}

static const struct {
	unsigned cap;
	const char *name;  /* in sbx-ls --backends */
	const char *what;  /* in "backend 'B' cannot WHAT" */
} caps[] = {
	{SBX_CAP_PTY, "pty", "give a command a terminal (-t)"},
	{SBX_CAP_STDIN, "stdin", "forward standard input (-i)"},
	{SBX_CAP_NET_DENY, "network_deny", "deny the network (--network "
	    "deny)"},
	{SBX_CAP_NET_ALLOW, "network_allow", "allow the network (--network "
	    "allow)"},
	{SBX_CAP_MEMORY, "memory", "limit memory (--memory)"},
	{SBX_CAP_CPUS, "cpus", "limit CPUs (--cpus)"},
	{SBX_CAP_PIDS, "pids", "limit processes (--pids)"},
	{SBX_CAP_TIMEOUT, "timeout", "end an idle sandbox (--timeout)"},
	{SBX_CAP_RUNTIME, "runtime", "choose a runtime (--runtime)"},
	{SBX_CAP_PULL, "pull", "pull images (--pull)"},
	{SBX_CAP_SUSPEND, "suspend", "suspend a sandbox (--mode suspend)"},
	{SBX_CAP_STOP, "stop", "stop a sandbox and keep its files (--mode "
	    "stop)"},
	{SBX_CAP_FILES, "files", "move files (sbx-sync)"},
	{SBX_CAP_IDLE, "idle", "tell how long a sandbox was idle "
	    "(--idle-for)"},
	{SBX_CAP_ZSTD, "zstd", "take a zstd stream (--compress zstd)"},
	{SBX_CAP_NAME, "name", "name a sandbox (--name)"},
	{SBX_CAP_KEEP, "keep", "keep a killed sandbox's files (--keep)"},
	{SBX_CAP_NET_RULES, "network_rules", "filter the network "
	    "(--allow-out, --deny-out, --egress-proxy, sbx-net)"},
	{SBX_CAP_PORTS, "ports", "reach a sandbox's ports (sbx-port)"},
	{SBX_CAP_PUBLISH, "publish", "publish ports (--port, sbx-port "
	    "HOSTPORT:PORT)"},
	{SBX_CAP_DISK, "disk", "limit what a sandbox writes (--disk)"},
	{SBX_CAP_SHELL, "shell", "keep shell sessions (sbx-shell)"},
	{SBX_CAP_SNAPSHOT, "snapshot", "snapshot a sandbox's files "
	    "(sbx-snapshot, sbx-fork, --from)"},
	{SBX_CAP_VOLUMES, "volumes", "mount volumes (--volume, sbx-volume)"},
	{SBX_CAP_ARCHIVE, "archive", "archive a sandbox (--mode archive)"},
	{SBX_CAP_SNAP_EXPORT, "snapshot_export", "export its snapshots "
	    "(sbx-snapshot export)"},
};

int
sbx_backend_need(const struct sbx_backend *be, unsigned want,
    struct sbx_err *err)
{
	size_t i;

	for (i = 0; i < sizeof caps / sizeof caps[0]; i++)
		if ((want & caps[i].cap) && !(be->caps & caps[i].cap))
			return sbx_err_set(err, SBX_EX_USAGE, "backend '%s' "
			    "cannot %s", be->name, caps[i].what);
	return 0;
}

int
sbx_backend_check_spec(const struct sbx_backend *be,
    const struct sbx_spec *spec, struct sbx_err *err)
{
	unsigned want = spec->network == SBX_NET_ALLOW ? SBX_CAP_NET_ALLOW :
	    SBX_CAP_NET_DENY;

	want |= spec->memory ? SBX_CAP_MEMORY : 0;
	want |= spec->cpus_milli ? SBX_CAP_CPUS : 0;
	want |= spec->pids ? SBX_CAP_PIDS : 0;
	want |= spec->timeout ? SBX_CAP_TIMEOUT : 0;
	want |= spec->runtime ? SBX_CAP_RUNTIME : 0;
	want |= spec->pull ? SBX_CAP_PULL : 0;
	want |= spec->name ? SBX_CAP_NAME : 0;
	want |= spec->net_rules || spec->net_inject || spec->egress_proxy ?
	    SBX_CAP_NET_RULES : 0;
	want |= spec->ports ? SBX_CAP_PUBLISH : 0;
	want |= spec->from ? SBX_CAP_SNAPSHOT : 0;
	want |= spec->volumes ? SBX_CAP_VOLUMES : 0;
	/* limits.disk's default is dropped where it cannot apply. */
	want |= spec->disk && !spec->disk_default ? SBX_CAP_DISK : 0;
	if (spec->net_rules && spec->network != SBX_NET_ALLOW)
		return sbx_err_set(err, SBX_EX_USAGE, "--allow-out and "
		    "--deny-out need --network allow");
	if (spec->net_inject && spec->network != SBX_NET_ALLOW)
		return sbx_err_set(err, SBX_EX_USAGE, "--inject-header needs "
		    "--network allow");
	if (spec->egress_proxy && spec->network != SBX_NET_ALLOW)
		return sbx_err_set(err, SBX_EX_USAGE, "--egress-proxy needs "
		    "--network allow");
	if (spec->ports && (be->caps & SBX_CAP_PORTS) &&
	    !(be->caps & SBX_CAP_PUBLISH))
		return sbx_err_set(err, SBX_EX_USAGE, "backend '%s' publishes "
		    "no ports (--port): every port of its sandboxes answers at "
		    "a URL of its own, which sbx-port prints", be->name);
	return sbx_backend_need(be, want, err);
}

static int
snap_got(json_t *snap, void *arg)
{
	json_t **out = arg;

	*out = json_incref(snap);
	return 0;
}

json_t *
sbx_backend_snap_get(const struct sbx_backend *be, const char *id_or_name,
    struct sbx_err *err)
{
	json_t *m = NULL;

	if (!be->ops->snapshots)
		return sbx_snap_get(id_or_name, err);
	err->code = 0;
	if (be->ops->snapshots("get", id_or_name, snap_got, &m, err) < 0) {
		json_decref(m);
		return NULL;
	}
	return m;
}

const char *
sbx_backend_pause_default(const struct sbx_backend *be)
{
	return be->caps & SBX_CAP_SUSPEND ? "suspend" :
	    be->caps & SBX_CAP_STOP ? "stop" : "none";
}

int
sbx_backend_each(int (*fn)(json_t *o, void *arg), void *arg)
{
	const char *dflt = sbx_backend_default();
	size_t i, k;
	json_t *o, *c;
	int rc = 0;

	for (i = 0; !rc && i < NBACKENDS; i++) {
		if (!backends[i].ops)
			continue;
		c = json_object();
		for (k = 0; k < sizeof caps / sizeof caps[0]; k++)
			json_object_set_new(c, caps[k].name, json_boolean(
			    backends[i].caps & caps[k].cap));
		o = json_pack("{sssbssso}", "backend", backends[i].name,
		    "default", !strcmp(backends[i].name, dflt), "pause",
		    sbx_backend_pause_default(&backends[i]), "caps", c);
		if (backends[i].ops->about)
			json_object_update_new(o, backends[i].ops->about());
		rc = fn(o, arg);
		json_decref(o);
	}
	return rc;
}

const struct sbx_backend *
sbx_backend_at(size_t i)
{
	return i < NBACKENDS ? &backends[i] : NULL;
}

/* A spec as JSON (sbxd's workers, local.warm's pool keys). */
json_t *
sbx_spec_json(const struct sbx_spec *s)
{
	json_t *env = json_array();
	size_t i;

	for (i = 0; s->env && s->env[i]; i++)
		json_array_append_new(env, json_string(s->env[i]));
	return json_pack("{s:s?,s:I,s:I,s:I,s:i,s:I,s:b,s:i,s:I,s:O?,s:o,"
	    "s:s?,s:s?,s:s?,s:b,s:s?,s:O?,s:O?,s:O?,s:O?,s:O?,s:s?,s:O?}",
	    "image",
	    s->image,
	    "memory", (json_int_t)s->memory, "cpus_milli",
	    (json_int_t)s->cpus_milli, "pids", (json_int_t)s->pids,
	    "limits_default", (int)s->limits_default, "disk",
	    (json_int_t)s->disk, "disk_default", s->disk_default, "network",
	    (int)s->network, "timeout", (json_int_t)s->timeout, "labels",
	    s->labels, "env", env, "workdir", s->workdir, "name", s->name,
	    "runtime", s->runtime, "pull", s->pull, "endpoint", s->endpoint,
	    "net_rules", s->net_rules, "net_inject", s->net_inject,
	    "egress_proxy", s->egress_proxy, "ports", s->ports, "start",
	    s->start, "from", s->from, "volumes", s->volumes);
}
