/* pty.c - sbx-exec -t on the e2b backend: the terminal's size and TERM
 * in a process's Start */

#include "../execio.h"
#include "e2b.h"

/* The size of the caller's terminal, as a PTY message; 80x24 without
 * one (as sbxd and envd take a pty of no size). */
json_t *
sbx_e2b_pty_size(void)
{
	struct winsize ws;

	if (sbx_xs_winsize(&ws) < 0) {
		ws.ws_row = 24;
		ws.ws_col = 80;
	}
	return json_pack("{s{sisi}}", "size", "cols", (int)ws.ws_col, "rows",
	    (int)ws.ws_row);
}

/* A Start message's pty, and the caller's TERM inside unless -e set
 * one. */
void
sbx_e2b_pty_start_msg(json_t *msg)
{
	json_t *envs = json_object_get(json_object_get(msg, "process"),
	    "envs");

	if (!json_object_get(envs, "TERM"))
		json_object_set_new(envs, "TERM", json_string(sbx_xs_term()));
	json_object_set_new(msg, "pty", sbx_e2b_pty_size());
	json_object_set_new(msg, "stdin", json_true());
}
