/* qmp.c - a command to a qemu sandbox's QEMU over its monitor (QMP, JSON
 * lines on DIR/qmp.sock): its greeting, qmp_capabilities, the command,
 * its answer; the events that come meanwhile are skipped. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "qemu.h"

#define QMP_MS 10000           /* QEMU answers at once, even under TCG */
#define QMP_LINE_MAX (1u << 20)

/* DIR/qmp.sock, reached through the directory's fd: the path may be
 * longer than a socket address holds. */
static int
qmp_connect(const char *dir)
{
	struct timeval tv = {QMP_MS / 1000, 0};
	int fd = sbx_local_connect_to(dir, "qmp.sock");

	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	}
	return fd;
}

/* The next message: a JSON object on a line of its own. */
static json_t *
next_msg(int fd, struct sbx_buf *in, long long end)
{
	char buf[4096], *nl;
	json_t *o;
	size_t n;
	ssize_t r;

	for (;;) {
		while (in->len && (nl = memchr(in->data, '\n', in->len))) {
			n = (size_t)(nl - in->data) + 1;
			o = json_loadb(in->data, n, 0, NULL);
			memmove(in->data, in->data + n, in->len - n);
			in->len -= n;
			if (json_is_object(o))
				return o;
			json_decref(o);
		}
		if (in->len > QMP_LINE_MAX || sbx_mono_ms() >= end) {
			errno = ETIMEDOUT;
			return NULL;
		}
		r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = ECONNRESET;
			return NULL;
		}
		sbx_buf_add(in, buf, (size_t)r);
	}
}

/* cmd sent (with args, when not NULL), and its answer read: 0 (its
 * "return" in *ret, when not NULL), or -1 with err. */
static int
call(int fd, struct sbx_buf *in, const char *cmd, const json_t *args,
    json_t **ret, long long end, struct sbx_err *err)
{
	json_t *q = json_pack("{ss}", "execute", cmd), *o, *e;
	char *line;
	size_t n;
	int rc = -1;

	if (args)
		json_object_set(q, "arguments", (json_t *)args);
	line = json_dumps(q, JSON_COMPACT);
	json_decref(q);
	if (!line)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot make a QMP "
		    "command");
	n = strlen(line);
	line[n] = '\n';
	if (send(fd, line, n + 1, MSG_NOSIGNAL) != (ssize_t)(n + 1)) {
		free(line);
		return sbx_err_set(err, SBX_EX_FAIL, "QEMU's monitor:");
	}
	free(line);
	while ((o = next_msg(fd, in, end))) {
		if (json_object_get(o, "return")) {
			if (ret)
				*ret = json_incref(json_object_get(o,
				    "return"));
			json_decref(o);
			return 0;
		}
		if ((e = json_object_get(o, "error"))) {
			sbx_err_set(err, SBX_EX_FAIL, "QEMU refused '%s': %s",
			    cmd, sbx_json_str(e, "desc") ? sbx_json_str(e,
			    "desc") : "(no reason)");
			json_decref(o);
			return -1;
		}
		/* An event. */
		json_decref(o);
	}
	sbx_err_set(err, SBX_EX_FAIL, "QEMU's monitor did not answer '%s':",
	    cmd);
	return rc;
}

int
sbx_qemu_qmp_call(const char *dir, const char *cmd, const json_t *args,
    json_t **ret, struct sbx_err *err)
{
	struct sbx_buf in = SBX_BUF_INIT;
	long long end = sbx_mono_ms() + QMP_MS;
	json_t *hello;
	int fd, rc = -1;

	if (ret)
		*ret = NULL;
	if ((fd = qmp_connect(dir)) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot reach QEMU's "
		    "monitor:");
	if (!(hello = next_msg(fd, &in, end)))
		sbx_err_set(err, SBX_EX_FAIL, "QEMU's monitor did not greet "
		    "us:");
	else if (!json_object_get(hello, "QMP"))
		sbx_err_set(err, SBX_EX_FAIL, "QEMU's monitor did not greet "
		    "us");
	else if (call(fd, &in, "qmp_capabilities", NULL, NULL, end,
	    err) == 0 && call(fd, &in, cmd, args, ret, end, err) == 0)
		rc = 0;
	json_decref(hello);
	sbx_buf_release(&in);
	close(fd);
	return rc;
}

int
sbx_qemu_qmp(const char *dir, const char *cmd, struct sbx_err *err)
{
	return sbx_qemu_qmp_call(dir, cmd, NULL, NULL, err);
}

char *
sbx_qemu_hmp(const char *dir, const char *line, struct sbx_err *err)
{
	json_t *args = json_pack("{ss}", "command-line", line), *ret = NULL;
	char *out = NULL;

	if (sbx_qemu_qmp_call(dir, "human-monitor-command", args, &ret,
	    err) == 0)
		out = sbx_xstrdup(json_is_string(ret) ? json_string_value(ret) :
		    "");
	json_decref(args);
	json_decref(ret);
	return out;
}
