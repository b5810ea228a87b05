/* ports.c - sbx-port on the daytona backend: a port's preview URL */
#include <stdlib.h>
#include <string.h>

#include "daytona.h"

/* GET /sandbox/ID/ports/P/preview-url: {"port","host","url","token"};
 * every port answers already at a URL of its own (no SBX_CAP_PUBLISH).
 * The token goes in an x-daytona-preview-token header (a public
 * sandbox's ports need none); Daytona makes a new one at each start. */
json_t *
sbx_dt_ports(const json_t *ref, unsigned port, unsigned host_port,
    struct sbx_err *err)
{
	struct sbx_http_resp rs;
	struct dt d;
	json_t *s, *out = NULL;
	const char *id, *url, *tok, *h;
	char *host;

	(void)host_port;
	if (!port) {
		sbx_err_set(err, SBX_EX_USAGE, "backend 'daytona' publishes no "
		    "ports to list: every port of a sandbox answers at its own "
		    "URL (name one: sbx-port PORT)");
		return NULL;
	}
	if (sbx_dt_ref_open(&d, ref, &id, &s, err) < 0)
		return NULL;
	json_decref(s);
	if (sbx_dt_req(&d, "GET", NULL, &rs, err, "/sandbox/%s/ports/%u/"
	    "preview-url", id, port) < 0) {
		sbx_dt_close(&d);
		return NULL;
	}
	url = sbx_json_str(rs.json, "url");
	tok = sbx_json_str(rs.json, "token");
	if (rs.status != 200 || !url) {
		if (rs.status == 200)
			sbx_err_set(err, SBX_EX_FAIL, "'%s' gave no preview URL "
			    "for port %u", d.endpoint, port);
		else
			sbx_dt_fail(&rs, "cannot get the port's URL", id, err);
	} else {
		/* The host of the URL: after "://", up to the path. */
		h = strstr(url, "://");
		h = h ? h + 3 : url;
		host = sbx_xasprintf("%.*s", (int)strcspn(h, "/"), h);
		out = json_pack("{sIssss}", "port", (json_int_t)port, "host",
		    host, "url", url);
		if (tok && *tok)
			json_object_set_new(out, "token", json_string(tok));
		free(host);
	}
	sbx_http_resp_release(&rs);
	sbx_dt_close(&d);
	return out;
}
