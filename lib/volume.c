/* volume.c - named volumes' names and sbx-create's --volume NAME:/path */
#include <stdlib.h>
#include <string.h>

#include "sbx.h"
#include "internal.h"

int
sbx_volume_valid_name(const char *name)
{
	size_t i;

	if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' &&
	    name[0] <= 'Z') || (name[0] >= '0' && name[0] <= '9')))
		return 0;
	for (i = 1; name[i]; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "0123456789_.-", name[i]) || i > 63)
			return 0;
	return 1;
}

/* Absolute, not the root, no empty, "." or ".." component, no ','. */
static int
plain_abs(const char *p)
{
	const char *c = p, *e;

	if (p[0] != '/' || !p[1] || strlen(p) >= 1024 || strchr(p, ','))
		return 0;
	while (*c == '/') {
		c++;
		e = strchrnul(c, '/');
		if (e == c || (e - c == 1 && c[0] == '.') || (e - c == 2 &&
		    c[0] == '.' && c[1] == '.'))
			return 0;
		c = e;
	}
	return 1;
}

int
sbx_volume_parse(const char *text, json_t **vols, struct sbx_err *err)
{
	const char *colon = strchr(text, ':'), *path;
	json_t *v;
	char *name;
	size_t i;
	int rc = 0;

	if (!colon)
		return sbx_err_set(err, SBX_EX_USAGE, "invalid volume '%s' "
		    "(want NAME:/path)", text);
	path = colon + 1;
	name = sbx_xasprintf("%.*s", (int)(colon - text), text);
	if (!sbx_volume_valid_name(name))
		rc = sbx_err_set(err, SBX_EX_USAGE, "invalid volume name '%s' "
		    "(want [a-zA-Z0-9][a-zA-Z0-9_.-]{0,63})", name);
	else if (!plain_abs(path))
		rc = sbx_err_set(err, SBX_EX_USAGE, "invalid volume path '%s' "
		    "(want an absolute, plain path)", path);
	json_array_foreach(*vols, i, v)
		if (!rc && !strcmp(sbx_json_str(v, "path"), path))
			rc = sbx_err_set(err, SBX_EX_USAGE, "two volumes on "
			    "'%s'", path);
	if (!rc) {
		if (!*vols)
			*vols = json_array();
		json_array_append_new(*vols, json_pack("{ssss}", "name", name,
		    "path", path));
	}
	free(name);
	return rc;
}

/* The names of a volume's users, ", "-separated, in buf. */
void
sbx_volume_users_text(const json_t *ids, char *buf, size_t n)
{
	size_t i, len = 0;
	json_t *v;

	buf[0] = '\0';
	json_array_foreach(ids, i, v)
		if (len < n)
			len += (size_t)snprintf(buf + len, n - len, "%s%s",
			    i ? ", " : "", json_string_value(v));
}
