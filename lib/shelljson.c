/* shelljson.c - a shell session's answer as sbx-shell prints it (apart
 * from lib/shell.c, which the static agent links without jansson) */
#include "sbx.h"

json_t *
sbx_shell_out_json(const struct sbx_shell_out *o)
{
	return json_pack("{s:s%,s:s,s:o,s:b}", "output",
	    o->output.data ? o->output.data : "", o->output.len, "status",
	    o->status, "exit_code", o->exit_code >= 0 ?
	    json_integer(o->exit_code) : json_null(), "truncated",
	    o->truncated);
}
