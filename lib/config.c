/* config.c - settings: SBX_* environment > config files > defaults */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx.h"

static json_t *settings; /* key -> value from the config files */

static void
load_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL, *k, *v, *e;
	size_t cap = 0;

	if (!f)
		return;
	while (getline(&line, &cap, f) > 0) {
		k = line;
		while (isspace((unsigned char)*k))
			k++;
		if (*k == '#' || *k == ';' || !*k || !(v = strchr(k, '=')))
			continue;
		for (e = v; e > k && isspace((unsigned char)e[-1]); e--)
			;
		*e = '\0';
		for (v++; isspace((unsigned char)*v); v++)
			;
		for (e = v + strlen(v); e > v && isspace((unsigned char)e[-1]);
		    e--)
			;
		*e = '\0';
		/* The first file read wins: it has the higher precedence. */
		if (*k && !json_object_get(settings, k))
			json_object_set_new(settings, k, json_string(v));
	}
	free(line);
	fclose(f);
}

static void
load(void)
{
	const char *x = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	char *p = NULL;

	settings = json_object();
	if (x && *x)
		p = sbx_xasprintf("%s/sbx/config", x);
	else if (home && *home)
		p = sbx_xasprintf("%s/.config/sbx/config", home);
	if (p)
		load_file(p);
	free(p);
	load_file(".sbxrc");
}

char *
sbx_config_cred_dir(void)
{
	const char *x = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");

	if (x && *x)
		return sbx_xasprintf("%s/sbx/credentials", x);
	if (home && *home)
		return sbx_xasprintf("%s/.config/sbx/credentials", home);
	return NULL;
}

int
sbx_config_env(const char *key, char *env, size_t n)
{
	size_t i;

	if (snprintf(env, n, "SBX_%s", key) >= (int)n)
		return -1;
	for (i = 4; env[i]; i++)
		env[i] = env[i] == '.' ? '_' :
		    (char)toupper((unsigned char)env[i]);
	return 0;
}

const char *
sbx_config_get(const char *key, const char *def)
{
	char env[64];
	const char *v;

	if (sbx_config_env(key, env, sizeof env) < 0)
		return def;
	if ((v = getenv(env)) && *v)
		return v;
	if (!settings)
		load();
	v = sbx_json_str(settings, key);
	return v ? v : def;
}

char *
sbx_cred_get(const char *env, const char *name, char **where)
{
	const char *v = env ? getenv(env) : NULL;
	char *dir, *path = NULL, *line = NULL, *val = NULL;
	size_t cap = 0;
	struct stat sb;
	FILE *f;

	if (where)
		*where = NULL;
	if (v && *v)
		return sbx_xstrdup(v);
	if ((dir = sbx_config_cred_dir()))
		path = sbx_xasprintf("%s/%s", dir, name);
	free(dir);
	if (path && (f = fopen(path, "re"))) {
		if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & 077))
			sbx_warn("credentials file '%s' is readable by others "
			    "(want mode 0600)", path);
		if (getline(&line, &cap, f) > 0) {
			line[strcspn(line, "\r\n")] = '\0';
			if (*line)
				val = sbx_xstrdup(line);
			explicit_bzero(line, cap);
		}
		free(line);
		fclose(f);
	}
	if (where)
		*where = path ? path : sbx_xasprintf("$XDG_CONFIG_HOME/sbx/"
		    "credentials/%s", name);
	else
		free(path);
	return val;
}

char *
sbx_abs_path(const char *path)
{
	char *cwd, *abs;

	if (*path == '/' || !(cwd = getcwd(NULL, 0)))
		return sbx_xstrdup(path);
	abs = sbx_xasprintf("%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", path);
	free(cwd);
	return abs;
}

char *
sbx_config_dir(const char *key, const char *sub, int state)
{
	const char *x, *home, *xdg = state ? "XDG_STATE_HOME" :
	    "XDG_DATA_HOME";

	/* A relative one is the current directory's, made absolute once:
	 * what records it (a state file's dir) is read from other
	 * directories, and the helpers that outlive us do not keep the
	 * caller's. */
	if ((x = sbx_config_get(key, NULL)) && *x)
		return sbx_abs_path(x);
	if (geteuid() == 0)
		return sbx_xasprintf("/var/lib/sbx/%s", sub);
	if ((x = getenv(xdg)) && *x == '/')
		return sbx_xasprintf("%s/sbx/%s", x, sub);
	if ((home = getenv("HOME")) && *home)
		return sbx_xasprintf("%s/.local/%s/sbx/%s", home, state ?
		    "state" : "share", sub);
	return sbx_xasprintf("/tmp/sbx-%u/%s", (unsigned)geteuid(), sub);
}

char *
sbx_cred_key(const char *env, const char *name, const char *what,
    struct sbx_err *err)
{
	char *where = NULL, *key = sbx_cred_get(env, name, &where);
	size_t n;

	if (key) {
		n = strlen(key);
		while (n && isspace((unsigned char)key[n - 1]))
			key[--n] = '\0';
		if (!n) {
			free(key);
			key = NULL;
		}
	}
	if (!key)
		sbx_err_set(err, SBX_EX_CRED, "no %s API key (set %s or write "
		    "it to '%s')", what, env, where);
	free(where);
	return key;
}
