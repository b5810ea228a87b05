/* inject.c - --inject-header HOST:NAME=SOURCE: checked, and its value read
 * from where SOURCE says, once, when the sandbox is created */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net.h"
#include "../secret.h"

#define VALUE_MAX 16384

static int
bad(struct sbx_err *err, const char *text, const char *why)
{
	return sbx_err_set(err, SBX_EX_USAGE, "invalid header injection "
	    "'%s': %s", text, why);
}

int
sbx_net_header_name_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > 256)
		return 0;
	for (i = 0; i < n; i++)
		if (!strchr("!#$%&'*+-.^_`|~", s[i]) &&
		    !(s[i] >= '0' && s[i] <= '9') &&
		    !(s[i] >= 'a' && s[i] <= 'z') &&
		    !(s[i] >= 'A' && s[i] <= 'Z'))
			return 0;
	return 1;
}

int
sbx_net_header_value_ok(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] == '\r' || s[i] == '\n' || s[i] == '\0')
			return 0;
	return n <= VALUE_MAX;
}

/* A 0600 regular file of ours, one trailing newline dropped. NULL with
 * err set otherwise; the message names the file, never its bytes. */
static char *
read_file(const char *text, const char *path, size_t *len,
    struct sbx_err *err)
{
	struct stat st;
	char *buf = NULL;
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC)) < 0) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid header injection "
		    "'%s': cannot open '%s':", text, path);
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (st.st_mode & 07777) != 0600 || st.st_uid != geteuid()) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid header injection "
		    "'%s': '%s' must be a regular file of mode 0600 owned by "
		    "you", text, path);
		goto out;
	}
	buf = sbx_xmalloc(VALUE_MAX + 2);
	*len = 0;
	while ((n = read(fd, buf + *len, VALUE_MAX + 1 - *len)) > 0)
		*len += (size_t)n;
	if (n < 0) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid header injection "
		    "'%s': cannot read '%s':", text, path);
		goto fail;
	}
	if (*len && buf[*len - 1] == '\n')
		(*len)--;
	buf[*len] = '\0';
	goto out;
fail:
	explicit_bzero(buf, VALUE_MAX + 2);
	free(buf);
	buf = NULL;
out:
	close(fd);
	return buf;
}

int
sbx_net_inject_parse(const char *text, json_t *list, struct sbx_err *err)
{
	struct sbx_net_rule r;
	const char *colon = strchr(text, ':'), *eq, *src;
	char host[256], name[257], *value = NULL;
	json_t *o, *v;
	size_t n, i, len = 0;
	int rc = -1;

	if (!colon || !(eq = strchr(colon + 1, '=')))
		return bad(err, text, "want HOST:NAME=SOURCE");
	n = (size_t)(colon - text);
	if (n == 0 || n >= sizeof host)
		return bad(err, text, "invalid host");
	memcpy(host, text, n);
	host[n] = '\0';
	if (sbx_net_rule_parse(host, &r, err) < 0 || (r.kind !=
	    SBX_NR_DOMAIN && r.kind != SBX_NR_WILDCARD))
		return bad(err, text, "the host must be a domain or *.domain");
	n = (size_t)(eq - colon - 1);
	if (!sbx_net_header_name_ok(colon + 1, n))
		return bad(err, text, "invalid header name");
	memcpy(name, colon + 1, n);
	name[n] = '\0';
	src = eq + 1;
	if (!strncmp(src, "env:", 4)) {
		const char *e = getenv(src + 4);

		if (!src[4])
			return bad(err, text, "env: needs a variable name");
		if (!e)
			return sbx_err_set(err, SBX_EX_USAGE, "--inject-header "
			    "'%s': %s is not set", text, src + 4);
		value = sbx_xstrdup(e);
		len = strlen(value);
	} else if (!strncmp(src, "file:", 5)) {
		if (!src[5])
			return bad(err, text, "file: needs a path");
		if (!(value = read_file(text, src + 5, &len, err)))
			return -1;
	} else if (!strncmp(src, "secret:", 7)) {
		char sname[65];
		json_t *info;

		if (sbx_secret_name(src + 7, sname, err) < 0)
			return bad(err, text, "invalid secret name");
		/* Read per request by sbx-netd; it must exist now. */
		if (!(info = sbx_secret_info(sname, err))) {
			char why[sizeof err->msg];

			snprintf(why, sizeof why, "%s", err->msg);
			return sbx_err_set(err, SBX_EX_USAGE, "--inject-header "
			    "'%s': %s", text, why);
		}
		json_decref(info);
		value = sbx_xasprintf("${e2b.secrets.%s}", sname);
		len = strlen(value);
	} else {
		return bad(err, text, "SOURCE is env:VAR, file:PATH or "
		    "secret:NAME");
	}
	if (len == 0) {
		bad(err, text, "the value is empty");
		goto out;
	}
	if (!sbx_net_header_value_ok(value, len)) {
		bad(err, text, "the value has a line break, a NUL or more "
		    "than 16384 bytes");
		goto out;
	}
	if (!(v = json_stringn(value, len))) {
		bad(err, text, "the value is not UTF-8");
		goto out;
	}
	/* As rules are matched: lower case, "*." kept. */
	snprintf(host, sizeof host, "%s%s", r.kind == SBX_NR_WILDCARD ?
	    "*." : "", r.domain);
	json_array_foreach(list, i, o)
		if (!strcmp(sbx_json_str(o, "host"), host) &&
		    !strcasecmp(sbx_json_str(o, "name"), name)) {
			json_decref(v);
			bad(err, text, "this host and header are given twice");
			goto out;
		}
	o = json_pack("{ssss}", "host", host, "name", name);
	json_object_set_new(o, !strncmp(src, "secret:", 7) ? "template" :
	    "value", v);
	json_array_append_new(list, o);
	rc = 0;
out:
	explicit_bzero(value, len);
	free(value);
	return rc;
}
