/* net.c - the docker backend's network with rules: the container on
 * NetworkMode none, and sbx-netd attached to its network namespace as to
 * a local sandbox's (lib/local/net.c, lib/netd), its directory in the
 * local store */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "docker.h"

int
sbx_docker_net_wanted(const struct sbx_spec *spec)
{
	/* --port: with network deny too, sbx-netd letting those in and
	 * nothing out. */
	return spec->ports || (spec->network == SBX_NET_ALLOW &&
	    (spec->net_rules || spec->net_inject || spec->egress_proxy));
}

char *
sbx_docker_net_root(void)
{
	return sbx_xasprintf("%s/.docker-net", sbx_local_root());
}

/* Runtimes whose containers use the kernel's network stack, in the
 * namespace the engine made: the rules sbx-netd loads there apply.
 * gVisor (runsc) has a stack of its own that takes the namespace's
 * addresses and routes once, at start; a VM (kata) sees none of it. */
static int
kernel_stack(const char *path)
{
	static const char *const ok[] = {"runc", "crun", "youki"};
	const char *base = path ? strrchr(path, '/') : NULL;
	size_t i;

	base = base ? base + 1 : path;
	for (i = 0; base && i < sizeof ok / sizeof ok[0]; i++)
		if (!strcmp(base, ok[i]))
			return 1;
	return 0;
}

int
sbx_docker_net_check(const struct dk *d, const json_t *info,
    const struct sbx_spec *spec, struct sbx_err *err)
{
	const char *rt = spec->runtime ? spec->runtime : sbx_json_str(info,
	    "DefaultRuntime");
	json_t *r = json_object_get(json_object_get(info, "Runtimes"),
	    rt ? rt : "");

	/* sbx-netd joins the namespace of the container's init, by its
	 * pid: the engine must run on this machine. */
	if (strncmp(d->endpoint, "unix://", 7))
		return sbx_err_set(err, SBX_EX_USAGE, "network rules and ports on "
		    "backend 'docker' need an engine on this machine (a unix "
		    "socket, not '%s')", d->endpoint);
	if (!kernel_stack(sbx_json_str(r, "path")))
		return sbx_err_set(err, SBX_EX_USAGE, "runtime '%s' has a "
		    "network stack of its own: sbx cannot enforce network "
		    "rules there", rt ? rt : "?");
	return sbx_local_net_check(spec, err);
}

/* DIR of a container with rules: the label's directory and its id. */
static char *
net_dir_of(const json_t *c)
{
	const json_t *labels = json_object_get(json_object_get(c, "Config"),
	    "Labels");
	const char *root = sbx_json_str(labels, NET_LABEL);
	const char *id = sbx_json_str(c, "Id");

	if (!root || root[0] != '/' || !id || strchr(id, '/'))
		return NULL;
	return sbx_xasprintf("%s/%s", root, id);
}

/* Whether pid is a process of container id on this machine: its cgroup
 * path names the container (cgroupfs and systemd drivers alike). */
static int
in_container(pid_t pid, const char *id)
{
	char p[64], buf[4096];
	size_t n;
	FILE *f;

	snprintf(p, sizeof p, "/proc/%d/cgroup", (int)pid);
	if (!(f = fopen(p, "re")))
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, id) != NULL;
}

static int
write_meta(const char *dir, pid_t pid, pid_t netd, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/meta.json", dir), *text;
	json_t *m = json_pack("{sIsIsIsI}", "pid", (json_int_t)pid,
	    "starttime", (json_int_t)sbx_local_starttime(pid), "net_pid",
	    (json_int_t)netd, "net_starttime", (json_int_t)
	    sbx_local_starttime(netd));
	int rc;

	text = json_dumps(m, JSON_COMPACT | JSON_PRESERVE_ORDER);
	rc = sbx_file_write_atomic(p, text, strlen(text), 0600, 0, err);
	free(text);
	json_decref(m);
	free(p);
	return rc;
}

static json_t *
load_meta(const char *dir)
{
	char *p = sbx_xasprintf("%s/meta.json", dir);
	json_t *m = json_load_file(p, 0, NULL);

	free(p);
	return m;
}

static void
stop_dir(const char *dir)
{
	json_t *m = load_meta(dir);

	sbx_local_net_stop_of(m);
	json_decref(m);
}

int
sbx_docker_net_start(struct dk *d, const json_t *c,
    const struct sbx_spec *spec, struct sbx_err *err)
{
	const char *id = sbx_json_str(c, "Id");
	pid_t pid = (pid_t)sbx_json_int(json_object_get(c, "State"), "Pid", 0);
	char *dir = net_dir_of(c), *p = NULL, *root;
	pid_t netd = 0;
	struct stat st;
	int made = 0, rc = -1;

	if (!dir)
		return 0;
	if (pid <= 0 || !in_container(pid, id)) {
		sbx_err_set(err, SBX_EX_FAIL, "the init of container '%.12s' "
		    "(pid %d) is not on this machine: network rules need the "
		    "engine here", id, (int)pid);
		goto out;
	}
	root = sbx_docker_net_root();
	rc = sbx_mkdirs(root, 0700, err);
	free(root);
	if (rc < 0)
		goto out;
	rc = -1;
	if (mkdir(dir, 0700) == 0)
		made = 1;
	else if (errno != EEXIST) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", dir);
		goto out;
	}
	/* Started again (sbx-pause -m stop, then resume): the rules are
	 * the ones it had, never none. */
	p = sbx_xasprintf("%s/net.json", dir);
	if (!spec && stat(p, &st) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot find '%s':", p);
		goto out;
	}
	stop_dir(dir);
	if (sbx_local_net_start(dir, id, NULL, pid, spec ? spec :
	    &(struct sbx_spec){.network = SBX_NET_ALLOW}, &netd, err) < 0 ||
	    write_meta(dir, pid, netd, err) < 0)
		goto out;
	/* sbx-netd made the CA (DIR/ca.crt) before it was ready. Started
	 * again, the container still has it: the engine keeps its files,
	 * and sbx-netd its key. */
	if (spec && json_array_size(spec->net_inject) &&
	    sbx_docker_ca_install(d, id, dir, err) < 0)
		goto out;
	rc = 0;
out:
	if (rc < 0 && netd)
		sbx_local_net_stop(netd, sbx_local_starttime(netd));
	if (rc < 0 && made)
		sbx_rmtree(dir);
	free(p);
	free(dir);
	return rc;
}

void
sbx_docker_net_stop(const json_t *c, int remove)
{
	char *dir = net_dir_of(c);

	if (!dir)
		return;
	stop_dir(dir);
	if (remove)
		sbx_rmtree(dir);
	free(dir);
}

/* --- sbx-net, sbx-port ------------------------------------------------- */

/* Whether DIR/net.json says network deny: sbx-netd for --port alone. */
static int
dir_deny(const char *dir)
{
	char *p = sbx_xasprintf("%s/net.json", dir);
	json_t *o = json_load_file(p, 0, NULL);
	const char *net = sbx_json_str(o, "network");
	int deny = net && !strcmp(net, "deny");

	json_decref(o);
	free(p);
	return deny;
}

/* The DIR of the sandbox of ref, for its rules and log (ports 0) or its
 * ports (1); its container id in *id. */
static char *
ref_net_dir(const json_t *ref, int ports, char **id, struct sbx_err *err)
{
	struct dk d;
	json_t *c;
	char *dir;
	const char *mode, *cid;
	int none;

	*id = NULL;
	if (sbx_docker_ref_open(&d, ref, &c, err) < 0)
		return NULL;
	cid = sbx_json_str(c, "Id");
	mode = sbx_json_str(json_object_get(c, "HostConfig"), "NetworkMode");
	none = mode && !strcmp(mode, "none");
	dir = net_dir_of(c);
	if (dir && !ports && dir_deny(dir)) {
		free(dir);
		dir = NULL;
	}
	if (dir)
		*id = sbx_xstrdup(cid ? cid : "");
	else if (ports)
		sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' %s: publish its "
		    "ports with --port at sbx-create", cid, none ? "has network "
		    "deny and no published port" : "uses Docker's bridge");
	else if (none)
		sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' has network deny: "
		    "rules need --network allow", cid);
	else
		sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' uses Docker's "
		    "bridge: rules need --allow-out or --deny-out at "
		    "sbx-create", cid);
	json_decref(c);
	sbx_docker_close(&d);
	return dir;
}

json_t *
sbx_docker_net_rules(const json_t *ref, const json_t *set, struct sbx_err *err)
{
	const char *want = set ? sbx_json_str(set, "network") : NULL;
	json_t *out, *cut = NULL;
	char *id, *dir = ref_net_dir(ref, 0, &id, err);

	/* -n: only a container that has sbx-netd (created with rules) can
	 * be cut off (every connection denied) and opened again; a
	 * container's network mode is set at its create. */
	if (!dir && want) {
		sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s': the docker "
		    "backend turns a network on or off only for a container "
		    "created with rules (--allow-out or --deny-out)",
		    sbx_json_str(ref, "id") ? sbx_json_str(ref, "id") : "?");
		return NULL;
	}
	if (!dir)
		return NULL;
	if (want && !strcmp(want, "deny"))
		set = cut = json_pack("{s[]s[s]sns[]}", "allow_out",
		    "deny_out", "all", "egress_proxy", "inject");
	if ((out = sbx_local_net_dir_rules(dir, set, err)) && cut) {
		json_decref(out);
		out = json_pack("{s[]s[]}", "allow_out", "deny_out");
	}
	json_decref(cut);
	free(dir);
	free(id);
	return out;
}

int
sbx_docker_net_log(const json_t *ref, int follow, struct sbx_err *err)
{
	char *id, *dir = ref_net_dir(ref, 0, &id, err);
	int rc;

	if (!dir)
		return -1;
	rc = sbx_local_net_dir_log(dir, follow, err);
	free(dir);
	free(id);
	return rc;
}

json_t *
sbx_docker_ports(const json_t *ref, unsigned port, unsigned host_port,
    struct sbx_err *err)
{
	char *id, *dir = ref_net_dir(ref, 1, &id, err);
	json_t *out;

	if (!dir)
		return NULL;
	out = sbx_local_net_dir_ports(dir, id, port, host_port, err);
	free(dir);
	free(id);
	return out;
}
