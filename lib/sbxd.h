/* sbxd.h - the sandbox server's face (sbxd(8)): its options and its run;
 * lib/sbxd/sbxd.h is its inside */
#ifndef SBX_SBXD_H
#define SBX_SBXD_H

#include "sbx.h"

struct sbx_sbxd_opts {
	const char *listen;       /* "127.0.0.1:3000", "[::1]:3000" */
	const char *key_file;     /* API keys, one a line */
	const char *store;        /* sbxd's own records; NULL: default */
	const char *backend;      /* what it serves; NULL: local */
	const char *on_exit;      /* "leave", "kill" or "pause" */
	unsigned max_sandboxes;   /* 0: none */
	unsigned create_rate;     /* creates a second per key, 0: no limit */
	unsigned max_conns;       /* connections at a time, 0: no limit */
	unsigned max_per_addr;    /* of them from one address, 0: no limit */
	unsigned header_timeout;  /* seconds to send a whole request head */
	uint64_t max_body;        /* bytes of a JSON body */
	uint64_t max_upload;      /* bytes of a file upload, 0: none */
	uint64_t max_timeout;     /* seconds a sandbox may live */
	uint64_t dt_minute;       /* seconds of a Daytona interval minute */
	const char *domain;       /* in the Sandbox responses, or NULL */
	char **templates;         /* "NAME=IMAGE", NULL-terminated */
	int access_log;           /* a line per request on stderr */
	unsigned warm;            /* sandboxes made ahead, 0: none */
};

/* Serve until SIGTERM or SIGINT; SIGHUP reloads the key file. */
int sbx_sbxd_run(const struct sbx_sbxd_opts *o, struct sbx_err *err);

#endif
