/* dockerfile.c - a Dockerfile read into instructions with their line
 * numbers: the "# escape=" directive, comments, continuations, flags and
 * the exec (JSON) form; what the local builder does not do is refused
 * here, naming it and its line, never skipped. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "image/builder.h"

/* What the builder does, and the flags each takes. */
static const struct {
	const char *cmd;
	const char *const flags[4];
} known[] = {
	{"FROM", {NULL}},
	{"RUN", {"network", NULL}},
	{"COPY", {"from", "chown", "chmod", NULL}},
	{"ADD", {"chown", "chmod", NULL}},
	{"ENV", {NULL}},
	{"ARG", {NULL}},
	{"WORKDIR", {NULL}},
	{"USER", {NULL}},
	{"LABEL", {NULL}},
	{"EXPOSE", {NULL}},
	{"SHELL", {NULL}},
	{"CMD", {NULL}},
	{"ENTRYPOINT", {NULL}},
};

/* Docker's, which this builder does not do. */
static const char *const unsupported[] = {
	"HEALTHCHECK", "ONBUILD", "STOPSIGNAL", "VOLUME", "MAINTAINER", NULL,
};

void
sbx_dockerfile_release(struct sbx_dockerfile *df)
{
	size_t i, j;

	for (i = 0; i < df->n; i++) {
		free(df->v[i].cmd);
		for (j = 0; j < df->v[i].nflags; j++)
			free(df->v[i].flags[j]);
		free(df->v[i].flags);
		free(df->v[i].args);
		json_decref(df->v[i].json);
	}
	free(df->v);
	memset(df, 0, sizeof *df);
}

/* Flag f ("--name=value" or "--name") of instruction cmd is one it takes. */
static int
flag_known(int k, const char *f)
{
	size_t n = strcspn(f + 2, "=");
	int i;

	for (i = 0; known[k].flags[i]; i++)
		if (strlen(known[k].flags[i]) == n &&
		    !strncmp(known[k].flags[i], f + 2, n) && f[2 + n] == '=')
			return 1;
	return 0;
}

/* One logical line (continuations joined) into an instruction. */
static int
instruction(struct sbx_dockerfile *df, int line, char *s,
    struct sbx_err *err)
{
	struct sbx_df_instr in = {0};
	char *p = s, *w;
	size_t n;
	int k;

	while (*p && !isspace((unsigned char)*p))
		p++;
	n = (size_t)(p - s);
	in.cmd = sbx_xmalloc(n + 1);
	for (size_t i = 0; i < n; i++)
		in.cmd[i] = (char)toupper((unsigned char)s[i]);
	in.cmd[n] = '\0';
	in.line = line;
	for (k = 0; k < (int)(sizeof known / sizeof known[0]); k++)
		if (!strcmp(known[k].cmd, in.cmd))
			break;
	if (k == (int)(sizeof known / sizeof known[0])) {
		for (int i = 0; unsupported[i]; i++)
			if (!strcmp(unsupported[i], in.cmd)) {
				sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: "
				    "%s is not supported", line, in.cmd);
				goto fail;
			}
		sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: unknown "
		    "instruction '%s'", line, in.cmd);
		goto fail;
	}
	while (isspace((unsigned char)*p))
		p++;
	/* Flags come first: --name=value words. */
	while (p[0] == '-' && p[1] == '-') {
		w = p;
		while (*p && !isspace((unsigned char)*p))
			p++;
		n = (size_t)(p - w);
		in.flags = sbx_xrealloc(in.flags, (in.nflags + 1) *
		    sizeof *in.flags);
		in.flags[in.nflags] = sbx_xmalloc(n + 1);
		memcpy(in.flags[in.nflags], w, n);
		in.flags[in.nflags][n] = '\0';
		if (!flag_known(k, in.flags[in.nflags++])) {
			sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: %s %.*s "
			    "is not supported", line, in.cmd, (int)n, w);
			goto fail;
		}
		while (isspace((unsigned char)*p))
			p++;
	}
	n = strlen(p);
	while (n && isspace((unsigned char)p[n - 1]))
		p[--n] = '\0';
	in.args = sbx_xstrdup(p);
	if (!*in.args && strcmp(in.cmd, "RUN") && strcmp(in.cmd, "CMD") &&
	    strcmp(in.cmd, "ENTRYPOINT")) {
		sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: %s needs "
		    "arguments", line, in.cmd);
		goto fail;
	}
	if ((!strcmp(in.cmd, "RUN") || !strcmp(in.cmd, "COPY") ||
	    !strcmp(in.cmd, "ADD")) && strstr(in.args, "<<")) {
		const char *h = strstr(in.args, "<<");

		if (h[2] == '-' || h[2] == '"' || h[2] == '\'' ||
		    isupper((unsigned char)h[2])) {
			sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: %s "
			    "heredoc is not supported", line, in.cmd);
			goto fail;
		}
	}
	if (in.args[0] == '[') {
		json_t *j = json_loads(in.args, 0, NULL);
		size_t i;
		json_t *v;
		int ok = json_is_array(j);

		json_array_foreach(j, i, v)
			if (!json_is_string(v))
				ok = 0;
		if (ok)
			in.json = j;
		else
			json_decref(j);
	}
	if (!strcmp(in.cmd, "SHELL") && (!in.json ||
	    json_array_size(in.json) == 0)) {
		sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: SHELL needs a "
		    "JSON array of strings", line);
		goto fail;
	}
	df->v = sbx_xrealloc(df->v, (df->n + 1) * sizeof *df->v);
	df->v[df->n++] = in;
	return 0;
fail:
	df->v = sbx_xrealloc(df->v, (df->n + 1) * sizeof *df->v);
	df->v[df->n++] = in;
	return -1;
}

int
sbx_dockerfile_parse(const char *text, size_t len, struct sbx_dockerfile *df,
    struct sbx_err *err)
{
	const char *p = text, *end = text + len, *eol;
	char *logical = NULL, *t;
	size_t ln = 0, n;
	int line = 0, start = 0, directives = 1, cont;

	memset(df, 0, sizeof *df);
	df->escape = '\\';
	for (; p < end; p = eol < end ? eol + 1 : end) {
		eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		line++;
		while (p < eol && (*p == ' ' || *p == '\t'))
			p++;
		n = (size_t)(eol - p);
		while (n && (p[n - 1] == '\r' || p[n - 1] == ' ' ||
		    p[n - 1] == '\t'))
			n--;
		if (memchr(p, '\0', n)) {
			sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: a NUL "
			    "byte", line);
			goto fail;
		}
		if (n && *p == '#') {
			/* "# escape=`" before anything else. */
			if (directives && !logical) {
				const char *d = p + 1;

				while (d < p + n && isspace((unsigned char)*d))
					d++;
				if ((size_t)(p + n - d) > 7 &&
				    !strncasecmp(d, "escape", 6)) {
					const char *e = memchr(d, '=', (size_t)(p + n - d));

					if (e && e + 2 == p + n && (e[1] == '`' ||
					    e[1] == '\\')) {
						df->escape = e[1];
						continue;
					}
					if (e) {
						sbx_err_set(err, SBX_EX_USAGE,
						    "Dockerfile:%d: the escape "
						    "must be '\\' or '`'", line);
						goto fail;
					}
				}
			}
			directives = 0;
			continue;
		}
		if (!n)
			continue;
		directives = 0;
		cont = p[n - 1] == df->escape;
		if (cont)
			n--;
		if (!logical) {
			start = line;
			logical = sbx_xmalloc(1);
			ln = 0;
		}
		logical = sbx_xrealloc(logical, ln + n + 2);
		memcpy(logical + ln, p, n);
		ln += n;
		logical[ln] = '\0';
		if (cont && eol < end)
			continue;
		t = logical;
		logical = NULL;
		if (instruction(df, start, t, err) < 0) {
			free(t);
			goto fail;
		}
		free(t);
	}
	free(logical);
	if (df->n == 0 || strcmp(df->v[0].cmd, "FROM")) {
		size_t i;

		for (i = 0; i < df->n && !strcmp(df->v[i].cmd, "ARG"); i++)
			;
		if (i == df->n || strcmp(df->v[i].cmd, "FROM")) {
			sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: the "
			    "first instruction must be FROM (ARG may come "
			    "before it)", i < df->n ? df->v[i].line : line);
			goto fail;
		}
	}
	return 0;
fail:
	free(logical);
	sbx_dockerfile_release(df);
	return -1;
}

struct wbuf {
	char *s;
	size_t n, cap;
};

static void
wput(struct wbuf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		b->s = sbx_xrealloc(b->s, b->cap);
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = '\0';
}

/* $NAME or ${NAME...} at *pp (just past the '$'): its value into b. */
static int
subst(const char **pp, struct wbuf *b, const json_t *vars, char escape,
    int line, struct sbx_err *err)
{
	const char *p = *pp, *name, *v;
	char key[256], op = 0;
	size_t n;
	int brace = *p == '{';

	if (brace)
		p++;
	name = p;
	while (isalnum((unsigned char)*p) || *p == '_')
		p++;
	n = (size_t)(p - name);
	if (n == 0 || n >= sizeof key) {
		if (brace)
			return sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: "
			    "bad substitution", line);
		wput(b, "$", 1);
		return 0;
	}
	memcpy(key, name, n);
	key[n] = '\0';
	v = json_string_value(json_object_get(vars, key));
	if (brace) {
		struct wbuf word = {0};

		if (p[0] == ':' && (p[1] == '-' || p[1] == '+')) {
			op = p[1];
			p += 2;
			while (*p && *p != '}') {
				if (*p == escape && p[1])
					p++;
				if (*p == '$') {
					p++;
					if (subst(&p, &word, vars, escape, line,
					    err) < 0) {
						free(word.s);
						return -1;
					}
					continue;
				}
				wput(&word, p++, 1);
			}
		}
		if (*p != '}') {
			free(word.s);
			return sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: "
			    "bad substitution", line);
		}
		p++;
		if (op == '-' && (!v || !*v))
			v = word.s ? word.s : "";
		else if (op == '+')
			v = v && *v ? (word.s ? word.s : "") : "";
		if (v)
			wput(b, v, strlen(v));
		free(word.s);
		*pp = p;
		return 0;
	}
	if (v)
		wput(b, v, strlen(v));
	*pp = p;
	return 0;
}

void
sbx_df_words_free(char **w)
{
	for (size_t i = 0; w && w[i]; i++)
		free(w[i]);
	free(w);
}

char **
sbx_df_words(const char *s, char escape, const json_t *vars, int line,
    struct sbx_err *err)
{
	char **w = sbx_xcalloc(1, sizeof *w);
	struct wbuf b = {0};
	size_t n = 0;
	int inword = 0;
	char q = 0;

	for (const char *p = s;;) {
		if (!*p || (!q && isspace((unsigned char)*p))) {
			if (inword) {
				w = sbx_xrealloc(w, (n + 2) * sizeof *w);
				w[n++] = b.s ? b.s : sbx_xstrdup("");
				w[n] = NULL;
				memset(&b, 0, sizeof b);
				inword = 0;
			}
			if (!*p)
				break;
			p++;
			continue;
		}
		inword = 1;
		if (q != '\'' && *p == escape && p[1]) {
			wput(&b, p + 1, 1);
			p += 2;
		} else if (!q && (*p == '"' || *p == '\'')) {
			q = *p++;
			wput(&b, "", 0);
		} else if (q && *p == q) {
			q = 0;
			p++;
		} else if (q != '\'' && *p == '$') {
			p++;
			if (subst(&p, &b, vars, escape, line, err) < 0)
				goto fail;
			if (!b.s)
				wput(&b, "", 0);
		} else {
			wput(&b, p++, 1);
		}
		if (q && !*p) {
			sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: unclosed "
			    "quote", line);
			goto fail;
		}
	}
	return w;
fail:
	free(b.s);
	sbx_df_words_free(w);
	return NULL;
}

const char *
sbx_df_flag(const struct sbx_df_instr *in, const char *name)
{
	size_t n = strlen(name), i;

	for (i = 0; i < in->nflags; i++)
		if (!strncmp(in->flags[i] + 2, name, n) &&
		    in->flags[i][2 + n] == '=')
			return in->flags[i] + 3 + n;
	return NULL;
}
