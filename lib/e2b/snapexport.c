/* snapexport.c - sbx-snapshot export of an e2b snapshot: its record
 * (sbx-snapshot's, which names the template it came from) found here,
 * the export made by lib/snapdiff.c, through two sandboxes. */
#include <stdlib.h>

#include "e2b.h"

/* The snapshot's id (id or name) and its record; NULL with err. */
static json_t *
resolve(const char *id_or_name, char **sid, struct sbx_err *err)
{
	struct eb e;
	json_t *r = NULL;
	char *id = NULL;
	int found;

	if (sbx_e2b_open(&e, NULL, err) < 0)
		return NULL;
	if ((found = sbx_e2b_snap_find(&e, id_or_name, &id, err)) < 0)
		goto out;
	if (found == 1)
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no snapshot '%s'",
		    id_or_name);
	else if (!(r = sbx_e2b_snap_record(id, e.endpoint)))
		sbx_err_set(err, SBX_EX_FAIL, "snapshot '%s' cannot be exported: "
		    "it was not taken by sbx-snapshot here, and E2B cannot say "
		    "which template it came from", id_or_name);
	else if (sbx_json_str(r, "unexportable")) {
		sbx_err_set(err, SBX_EX_FAIL, "snapshot '%s' cannot be exported: "
		    "%s", id_or_name, sbx_json_str(r, "unexportable"));
		json_decref(r);
		r = NULL;
	} else
		*sid = id, id = NULL;
out:
	free(id);
	sbx_e2b_close(&e);
	return r;
}

int
sbx_e2b_snap_export(const char *id_or_name, int fd, struct sbx_err *err)
{
	json_t *rec;
	char *sid = NULL;
	int rc;

	if (!(rec = resolve(id_or_name, &sid, err)))
		return -1;
	rc = sbx_snap_export_diff("e2b", sid, rec, fd, err);
	json_decref(rec);
	free(sid);
	return rc;
}
