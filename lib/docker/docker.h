/* docker.h - the docker backend (containers of a Docker engine, driven
 * through its Engine API over libcurl, no docker CLI): what its files
 * share */
#ifndef SBX_DOCKER_DOCKER_H
#define SBX_DOCKER_DOCKER_H

#include <signal.h>
#include <string.h>

#include "../internal.h"

#define API_MAJOR 1
#define API_WANT 41   /* written against 1.41 (Docker 20.10) */
#define API_MIN 35    /* exec's WorkingDir */
#define DEFAULT_HOST "unix:///var/run/docker.sock"
#define MANAGED SBX_MANAGED
#define LABEL_PREFIX "io.sbx."
#define EXPIRED_CODE 124 /* how the keep-alive says the idle time ran out */
/* sbx-kill --keep ends the keep-alive with this signal, so that the exit
 * code tells it from a stop (sbx-pause) and from a death. */
#define KILLED_SIGNAL "SIGUSR1"
#define KILLED_CODE (128 + SIGUSR1)

struct dk {
	struct sbx_http *h;
	char *endpoint;
	int minor; /* the API version spoken: 1.minor */
};


/* client.c: the engine's API */
/* The engine's address: $SBX_DOCKER_HOST, else $DOCKER_HOST, else the
 * config file's docker.host, else the default socket. */
const char *sbx_docker_host(void);
/* Whether an engine answers there, within a second or two. */
int sbx_docker_answers(void);
/* Reach the engine of endpoint (NULL: sbx_docker_host) and agree on an
 * API version. */
int sbx_docker_open(struct dk *d, const char *endpoint, struct sbx_err *err);
void sbx_docker_close(struct dk *d);
/* A request to the versioned API; fmt gives the path. */
__attribute__((format(printf, 6, 7))) int sbx_docker_req(struct dk *d,
    const char *method, json_t *body, struct sbx_http_resp *rs,
    struct sbx_err *err, const char *fmt, ...);
/* The engine's own words for a failed request. */
const char *sbx_docker_msg(const struct sbx_http_resp *rs);
int sbx_docker_fail(const struct sbx_http_resp *rs, int code,
    const char *what, struct sbx_err *err);

/* The JSON stream of /images/create and /build: a message a line, each
 * given to on_msg; the first {"errorDetail": {"message"}} or {"error"}
 * kept in error, on one line. */
struct sbx_docker_stream {
	struct sbx_buf line;
	char error[400];
	int quiet;
	void (*on_msg)(struct sbx_docker_stream *s, const json_t *j);
};
/* An sbx_http_req's on_body (arg: the stream); 1 (stop) on a line over
 * 1 MiB. */
int sbx_docker_stream_body(const char *p, size_t n, void *arg);
/* The last line, when the stream did not end with a newline; then its
 * buffer released. */
void sbx_docker_stream_end(struct sbx_docker_stream *s);
/* Inspect the container a ref names, which must be one of ours: its
 * inspect object in *out, and the ref's id made its full one. */
int sbx_docker_find(struct dk *d, const json_t *ref, json_t **out,
    struct sbx_err *err);
/* sbx_docker_open on the ref's endpoint, then sbx_docker_find. */
int sbx_docker_ref_open(struct dk *d, const json_t *ref, json_t **c,
    struct sbx_err *err);
/* POST /containers/ID/VERB (lifecycle.c); 304 (nothing to do) is no
 * error, another failure is what, with the engine's words. */
int sbx_docker_post(struct dk *d, const char *id, const char *verb,
    const char *what, struct sbx_err *err);
/* "running", "paused", "stopped", "expired", ... of an inspect object. */
const char *sbx_docker_status_of(const json_t *c);
/* The listing entry, shaped as the local backend's. */
json_t *sbx_docker_info_of(const json_t *c, const char *endpoint);

/* exec.c: sbx-exec's transport */
int sbx_docker_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err);

/* net.c: the network with rules (sbx-netd on a container of NetworkMode
 * none). A container with rules has the label NET_LABEL: the directory
 * of the local store that holds its own, DIR/<container id>. */
#define NET_LABEL LABEL_PREFIX "net"
/* sbx_spec's start, as JSON: what a resume after a stop starts again. */
#define START_LABEL LABEL_PREFIX "start"
/* Whether a spec needs sbx-netd: rules, what the proxy adds, or --port
 * (with any network). */
int sbx_docker_net_wanted(const struct sbx_spec *spec);
/* $(local store)/.docker-net, where NET_LABEL points. */
char *sbx_docker_net_root(void);
/* Before anything is made (SBX_EX_USAGE): an engine on this machine, a
 * runtime on the kernel's network stack (info: the engine's /info),
 * valid rules. */
int sbx_docker_net_check(const struct dk *d, const json_t *info,
    const struct sbx_spec *spec, struct sbx_err *err);
/* The container of inspect c runs: its directory, its net.json from spec
 * (NULL: started again, the one it has), sbx-netd on its init's network
 * namespace, DIR/meta.json; with header injection at create, the CA
 * sbx-netd made in the container's trust store. Undoes what it did when
 * it fails. A no-op for a container without rules. */
int sbx_docker_net_start(struct dk *d, const json_t *c,
    const struct sbx_spec *spec, struct sbx_err *err);
/* Stop its sbx-netd; with remove, its directory goes too. */
void sbx_docker_net_stop(const json_t *c, int remove);
json_t *sbx_docker_net_rules(const json_t *ref, const json_t *set,
    struct sbx_err *err);
int sbx_docker_net_log(const json_t *ref, int follow, struct sbx_err *err);
/* sbx-port: the ports sbx-netd publishes, as a local sandbox's. */
json_t *sbx_docker_ports(const json_t *ref, unsigned port, unsigned host_port,
    struct sbx_err *err);

/* volume.c: named volumes (sbx-volume; struct sbx_backend_ops's volume) */
int sbx_docker_volume(const char *op, const char *name,
    int (*fn)(json_t *vol, void *arg), void *arg, struct sbx_err *err);
/* The volume name, labelled as sbx's; an existing one is fine. Its entry
 * in *out when out is not NULL. */
int sbx_docker_volume_make(struct dk *d, const char *name, json_t **out,
    struct sbx_err *err);

/* stats.c: sbx-stats (struct sbx_backend_ops's stats) */
json_t *sbx_docker_stats(const json_t *ref, struct sbx_err *err);

/* ca.c: the sandbox's CA (DIR/ca.crt) into the trust store of container
 * id, through the archive API: /etc/ssl/certs/ca-certificates.crt (the
 * container's own, and the CA), sbx-ca.pem and its subject-hash link,
 * root's, 0644. */
int sbx_docker_ca_install(struct dk *d, const char *id, const char *dir,
    struct sbx_err *err);
/* Where the container's clients find it: the variables a local sandbox
 * gets too (lib/local/local.c). */
#define CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define CA_PEM "/etc/ssl/certs/sbx-ca.pem"

/* image.c: --image DIR, a root filesystem (with /bin/sh) imported as
 * the image IMPORT_REPO:<the first IMPORT_HASH bytes of a SHA-256 of
 * its entries, in hex>, or the image of that name when the engine has
 * it: *tag. A value that starts with '/' or '.', or ends with '/', is a
 * directory (an image reference never does). Weak: only sbx-create
 * links image.c (and libarchive); in the other tools, which never
 * create, it is NULL. */
#define IMPORT_REPO "sbx-import"
#define IMPORT_HASH 6
static inline int
image_is_dir(const char *s)
{
	return s[0] == '/' || s[0] == '.' || (*s && s[strlen(s) - 1] == '/');
}
__attribute__((weak)) int sbx_docker_import(struct dk *d, const char *dir,
    char **tag, struct sbx_err *err);

/* snapshot.c: snapshots, images of the engine labelled SNAP_LABEL=ID,
 * tagged SNAP_REPO:ID, their meta in SNAP_META_LABEL (sbx-snapshot(1)'s
 * OUTPUT, with base_size and base_layers: the bytes and layers of the
 * image below its own) */
#define SNAP_PREFIX "snp-"
#define SNAP_LABEL LABEL_PREFIX "snapshot"
#define SNAP_NAME_LABEL LABEL_PREFIX "snapshot.name"
#define SNAP_META_LABEL LABEL_PREFIX "snapshot.meta"
#define SNAP_REPO "sbx-snapshot"
/* The images with label (KEY or KEY=VALUE) as GET /images/json lists
 * them. */
json_t *sbx_docker_snap_images(struct dk *d, const char *label,
    struct sbx_err *err);
/* A snapshot's meta by id or name, with its "image_id" and "size";
 * SBX_EX_NOSANDBOX: none. */
json_t *sbx_docker_snap_find(struct dk *d, const char *id_or_name,
    struct sbx_err *err);
int sbx_docker_snapshots(const char *op, const char *id,
    int (*fn)(json_t *snap, void *arg), void *arg, struct sbx_err *err);
json_t *sbx_docker_snapshot(const json_t *ref, const char *name,
    struct sbx_err *err);
int sbx_docker_snap_export_op(const char *id_or_name, int fd,
    struct sbx_err *err);
/* snaptake.c (libarchive): weak, linked into sbx-snapshot and sbx-fork
 * alone (-u), NULL in the other tools. */
__attribute__((weak)) json_t *sbx_docker_snap_take(const json_t *ref,
    const char *name, struct sbx_err *err);
__attribute__((weak)) int sbx_docker_snap_export(const char *id_or_name,
    int fd, struct sbx_err *err);

/* agent.c: sbx-init as the container's PID 1, serving execs on a socket
 * in a directory of the host (the label AGENT_LABEL names it, DIR): the
 * binary bind-mounted read-only at AGENT_INIT, DIR/run at AGENT_RUN. */
#define AGENT_LABEL LABEL_PREFIX "agent"
#define AGENT_INIT "/dev/.sbx/init"
#define AGENT_RUN "/dev/.sbx/run"
/* The config key docker.agent is not "off". */
int sbx_docker_agent_on(void);
/* sbx-ls -B's words: how each runtime's execs go. */
json_t *sbx_docker_about(void);
/* For a create of spec on d: DIR made, and sbx-init's path, when the
 * agent can serve there (an engine of this machine, a runtime on this
 * kernel, docker.agent on); both NULL when not. */
int sbx_docker_agent_make(const struct dk *d, const struct sbx_spec *spec,
    char **dir, char **init, struct sbx_err *err);
/* DIR of the container of inspect c, or NULL: it has no agent. */
const char *sbx_docker_agent_dir(const json_t *c);
/* DIR removed, once its container is gone. */
void sbx_docker_agent_remove(const json_t *c);
/* sbx-gc (struct sbx_backend_ops's sweep): the directories of agents
 * whose container is gone (docker rm), made a minute before before. */
int sbx_docker_agent_sweep(long long before);
/* A connection to the agent of DIR; -1 with errno. */
int sbx_docker_agent_connect(const char *dir);

/* files.c: sbx-sync's transfers */
extern const struct sbx_files sbx_docker_files;

#endif
