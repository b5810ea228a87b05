/* shelljson.c - a shell session's call and answer as they travel, and
 * the answer as sbx-shell prints it (apart from lib/shell.c, which the
 * static agent links without jansson) */
#include <string.h>

#include "internal.h"
#include "local/local.h"

json_t *
sbx_shell_out_json(const struct sbx_shell_out *o)
{
	return json_pack("{s:s%,s:s,s:o,s:b}", "output",
	    o->output.data ? o->output.data : "", o->output.len, "status",
	    o->status, "exit_code", o->exit_code >= 0 ?
	    json_integer(o->exit_code) : json_null(), "truncated",
	    o->truncated);
}

void
sbx_shell_frame(struct sbx_buf *b, const struct sbx_shell_req *rq)
{
	sbx_msg_put_str(b, rq->session);
	sbx_msg_put_str(b, rq->op);
	sbx_msg_put_bytes(b, rq->data, rq->data ? rq->len : 0);
	sbx_msg_put_u32(b, rq->wait_ms);
	sbx_msg_put_u32(b, (uint32_t)rq->limit);
}

/* The answer of an agent's sessions (lib/local/sessions.c, shell_reply). */
int
sbx_shell_answer(struct sbx_msg *m, const char *op, json_t **out,
    struct sbx_err *err)
{
	const char *msg, *name, *status, *data, *shell;
	uint32_t code, n, i, ec, trunc, bash;
	struct sbx_shell_out o = {SBX_BUF_INIT, NULL, -1, 0};
	size_t len;

	if (sbx_msg_get_u32(m, &code) < 0)
		goto bad;
	if (!strcmp(op, "list") && !code) {
		if (sbx_msg_get_u32(m, &n) < 0)
			goto bad;
		*out = json_array();
		for (i = 0; i < n; i++) {
			name = sbx_msg_get_str(m);
			status = sbx_msg_get_str(m);
			shell = sbx_msg_get_str(m);
			if (!name || !status || !shell ||
			    sbx_msg_get_u32(m, &ec) < 0)
				goto bad;
			json_array_append_new(*out, json_pack("{s:s,s:s,s:s,s:b}",
			    "session", name, "status", status, "shell", shell,
			    "waiting", ec));
		}
		return 0;
	}
	if (!(msg = sbx_msg_get_str(m)) || !(name = sbx_msg_get_str(m)) ||
	    !(status = sbx_msg_get_str(m)) || sbx_msg_get_u32(m, &ec) < 0 ||
	    sbx_msg_get_u32(m, &trunc) < 0 || sbx_msg_get_u32(m, &bash) < 0 ||
	    !(data = sbx_msg_get_bytes(m, &len)))
		goto bad;
	if (code) {
		if (*name)
			*out = json_pack("{s:s,s:s,s:s}", "error", msg, "session",
			    name, "status", status);
		return sbx_err_set(err, (int)code, "%s", msg);
	}
	if (!strcmp(status, "closed")) {
		*out = json_pack("{s:s,s:s}", "session", name, "status", status);
		return 0;
	}
	o.output.data = (char *)data;
	o.output.len = len;
	o.status = status;
	o.exit_code = ec ? (int)ec - 1 : -1;
	o.truncated = !!trunc;
	if (!(*out = sbx_shell_out_json(&o)))
		goto bad;
	json_object_set_new(*out, "session", json_string(name));
	if (!bash)
		json_object_set_new(*out, "shell", json_string("sh"));
	return 0;
bad:
	json_decref(*out);
	*out = NULL;
	return sbx_err_set(err, SBX_EX_FAIL, "malformed answer from the "
	    "sandbox's agent");
}

