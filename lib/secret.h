/* secret.h - sbx's secret store (sbx-secret, --inject-header secret:NAME,
 * sbxd's /secrets, ${e2b.secrets.NAME} in injected headers).
 *
 * Under the credentials directory ($XDG_CONFIG_HOME/sbx/credentials, else
 * ~/.config/sbx/credentials), in secrets/ (0700): NAME holds the value
 * (0600, the bytes as given), NAME.json its metadata (0600):
 *   {"name":"NAME","version":N,"created_at":"RFC3339","updated_at":"...",
 *    "metadata":{...strings...}}
 * Names: [a-z0-9_-], 1..64, lower-cased on the way in (E2B's rule); the
 * "sec_" prefix is reserved. A value never appears in a message.
 * A value file that is not 0600 or not the user's is refused
 * (SBX_EX_CRED); changes hold a lock (flock) on secrets/. */
#ifndef SBX_SECRET_H
#define SBX_SECRET_H

#include <stddef.h>

#include <jansson.h>

#include "sbx.h"

/* The largest value (bytes): a header's worth, with room. */
#define SBX_SECRET_MAX 65536

/* The store's directory (allocated), made 0700 when make is set. */
char *sbx_secret_dir(int make, struct sbx_err *err);
/* Lower-case name into out (65 bytes); SBX_EX_USAGE when invalid. */
int sbx_secret_name(const char *name, char *out, struct sbx_err *err);
/* The value of NAME (allocated, NUL-terminated, *len its length); a
 * missing secret is SBX_EX_CRED (5), "no secret 'NAME'". */
char *sbx_secret_get(const char *name, size_t *len, struct sbx_err *err);
/* Create NAME or give it a new version (value replaced atomically);
 * metadata: an object of strings or NULL (kept as it was). The new
 * metadata object (as in NAME.json) or NULL. */
json_t *sbx_secret_set(const char *name, const char *value, size_t len,
    const json_t *metadata, struct sbx_err *err);
/* Every secret's metadata, by name (never values). */
json_t *sbx_secret_list(struct sbx_err *err);
/* One secret's metadata; SBX_EX_CRED when there is none. */
json_t *sbx_secret_info(const char *name, struct sbx_err *err);
int sbx_secret_rm(const char *name, struct sbx_err *err);

#endif
