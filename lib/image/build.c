/* build.c - the Dockerfile front end of the local builder: each
 * instruction of the parsed Dockerfile (dockerfile.c) as a step of
 * builder.c, ARG and ENV substituted, stages by name and number, the
 * last stage committed as the image. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/builder.h"

struct stage {
	char *name;             /* AS name, or NULL */
	struct sbx_stage *st;
};

struct build {
	const struct sbx_ctx *ctx;
	const json_t *args;     /* --build-arg */
	json_t *meta;           /* ARGs before the first FROM: name -> value */
	json_t *vars;           /* this stage's ARGs */
	struct stage *stages;
	size_t nstages;
	struct sbx_dockerfile df;
	int quiet;
	int cmd_set;            /* this stage has a CMD */
	char step[64];
};

static int
bad(struct sbx_err *err, const struct sbx_df_instr *in, const char *what)
{
	return sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: %s %s",
	    in->line, in->cmd, what);
}

/* What $VAR reads in this stage: its ARGs, then its ENV over them. */
static json_t *
vars_of(struct build *b, struct sbx_stage *st)
{
	json_t *v = json_deep_copy(b->vars), *e;
	size_t i;

	if (!st)
		return v;
	json_array_foreach(json_object_get(sbx_stage_config(st), "Env"), i,
	    e) {
		const char *s = json_string_value(e), *eq;

		if (s && (eq = strchr(s, '='))) {
			char *k = sbx_xstrdup(s);

			k[eq - s] = '\0';
			json_object_set_new(v, k, json_string(eq + 1));
			free(k);
		}
	}
	return v;
}


/* ARG NAME[=default]: into vars (meta before FROM). */
static int
do_arg(struct build *b, const struct sbx_df_instr *in, json_t *into,
    struct sbx_stage *st, struct sbx_err *err)
{
	json_t *v = vars_of(b, st);
	char **w = sbx_df_words(in->args, b->df.escape, v, in->line, err);
	const char *given, *eq;
	int rc = 0;

	json_decref(v);
	if (!w)
		return -1;
	for (size_t i = 0; w[i]; i++) {
		char *k = sbx_xstrdup(w[i]);

		eq = strchr(w[i], '=');
		if (eq)
			k[eq - w[i]] = '\0';
		if (!*k) {
			free(k);
			rc = bad(err, in, "needs a name");
			break;
		}
		if ((given = json_string_value(json_object_get(b->args, k))))
			json_object_set_new(into, k, json_string(given));
		else if (eq)
			json_object_set_new(into, k, json_string(eq + 1));
		else if (into != b->meta && json_object_get(b->meta, k))
			json_object_set(into, k, json_object_get(b->meta, k));
		free(k);
	}
	sbx_df_words_free(w);
	return rc;
}

/* ENV and LABEL: KEY=VALUE..., or the old "KEY VALUE". */
static json_t *
pairs(struct build *b, const struct sbx_df_instr *in, struct sbx_stage *st,
    struct sbx_err *err)
{
	json_t *v = vars_of(b, st), *out;
	char **w = sbx_df_words(in->args, b->df.escape, v, in->line, err);
	size_t i;

	json_decref(v);
	if (!w)
		return NULL;
	out = json_array();
	if (w[0] && !strchr(w[0], '=')) {
		struct sbx_buf val = SBX_BUF_INIT;

		for (i = 1; w[i]; i++) {
			if (i > 1)
				sbx_buf_add(&val, " ", 1);
			sbx_buf_add(&val, w[i], strlen(w[i]));
		}
		sbx_buf_add(&val, "", 1);
		if (i < 2) {
			bad(err, in, "needs KEY=VALUE");
			json_decref(out);
			out = NULL;
		} else {
			json_array_append_new(out, json_pack("[s,s]", w[0],
			    val.data));
		}
		sbx_buf_release(&val);
	} else {
		for (i = 0; w[i]; i++) {
			char *k = sbx_xstrdup(w[i]), *eq = strchr(k, '=');

			if (!eq || eq == k) {
				free(k);
				bad(err, in, "needs KEY=VALUE");
				json_decref(out);
				out = NULL;
				break;
			}
			*eq = '\0';
			json_array_append_new(out, json_pack("[s,s]", k,
			    eq + 1));
			free(k);
		}
	}
	sbx_df_words_free(w);
	return out;
}

static void
env_set(json_t *cfg, const char *k, const char *v)
{
	json_t *env = json_object_get(cfg, "Env"), *e;
	size_t i, n = strlen(k);
	char *kv = sbx_xasprintf("%s=%s", k, v);

	if (!json_is_array(env)) {
		env = json_array();
		json_object_set_new(cfg, "Env", env);
	}
	json_array_foreach(env, i, e) {
		const char *s = json_string_value(e);

		if (s && !strncmp(s, k, n) && s[n] == '=') {
			json_array_set_new(env, i, json_string(kv));
			free(kv);
			return;
		}
	}
	json_array_append_new(env, json_string(kv));
	free(kv);
}

/* CMD, ENTRYPOINT, RUN: the exec form, or the shell form through the
 * stage's SHELL. */
static json_t *
command(const struct sbx_df_instr *in, json_t *cfg)
{
	json_t *sh = json_object_get(cfg, "Shell"), *a;

	if (in->json)
		return json_incref(in->json);
	a = json_is_array(sh) && json_array_size(sh) ? json_deep_copy(sh) :
	    json_pack("[s,s]", "/bin/sh", "-c");
	json_array_append_new(a, json_string(in->args));
	return a;
}

static struct sbx_stage *
stage_named(struct build *b, const char *name)
{
	char *end;
	long n;

	for (size_t i = b->nstages; i-- > 0;)
		if (b->stages[i].name && !strcmp(b->stages[i].name, name))
			return b->stages[i].st;
	n = strtol(name, &end, 10);
	if (*name && !*end && n >= 0 && (size_t)n < b->nstages)
		return b->stages[n].st;
	return NULL;
}

/* The context's files that source pattern p takes, each with where it
 * goes below dest: a file itself (its name when todir), or the files of
 * a directory (their path below it). */
static int
expand(const struct sbx_ctx *ctx, const char *p, const char *dest, int todir,
    char ***src, char ***to, size_t *n, int *isdir)
{
	char buf[4096];
	int found = 0;

	while (p[0] == '.' && p[1] == '/')
		p += 2;
	while (*p == '/')
		p++;
	snprintf(buf, sizeof buf, "%s", p);
	for (size_t k = strlen(buf); k > 1 && buf[k - 1] == '/'; k--)
		buf[k - 1] = '\0';
	if (!strcmp(buf, "."))
		buf[0] = '\0';
	for (size_t i = 0; i < ctx->n; i++) {
		const char *f = ctx->files[i], *rest = NULL, *s;
		char pre[4096];

		if (!*buf) {
			rest = f;
		} else if (!fnmatch(buf, f, FNM_PATHNAME)) {
			const char *base = strrchr(f, '/');

			*src = sbx_xrealloc(*src, (*n + 2) * sizeof **src);
			*to = sbx_xrealloc(*to, (*n + 2) * sizeof **to);
			(*src)[*n] = sbx_xstrdup(f);
			(*to)[*n] = todir ? sbx_xasprintf("%s/%s", dest, base ?
			    base + 1 : f) : sbx_xstrdup(dest);
			(*src)[++*n] = NULL;
			(*to)[*n] = NULL;
			found = 1;
			continue;
		} else {
			for (s = f; (s = strchr(s, '/')); s++) {
				snprintf(pre, sizeof pre, "%.*s", (int)(s - f),
				    f);
				if (!fnmatch(buf, pre, FNM_PATHNAME)) {
					rest = s + 1;
					break;
				}
			}
		}
		if (!rest)
			continue;
		*isdir = 1;
		*src = sbx_xrealloc(*src, (*n + 2) * sizeof **src);
		*to = sbx_xrealloc(*to, (*n + 2) * sizeof **to);
		(*src)[*n] = sbx_xstrdup(f);
		(*to)[*n] = sbx_xasprintf("%s/%s", dest, rest);
		(*src)[++*n] = NULL;
		(*to)[*n] = NULL;
		found = 1;
	}
	return found;
}

/* COPY and ADD. */
static int
do_copy(struct build *b, const struct sbx_df_instr *in, struct sbx_stage *st,
    const char *text, struct sbx_err *err)
{
	struct sbx_copy c = {0};
	struct sbx_stage *from = NULL, *img = NULL;
	json_t *v = vars_of(b, st);
	char **w = NULL, **src = NULL, **to = NULL, *dest = NULL;
	const char *f, *cm;
	size_t n = 0, nw;
	int rc = -1, cached, isdir = 0, todir;

	c.chmod = -1;
	if (in->json) {
		size_t i;
		json_t *e;

		w = sbx_xcalloc(json_array_size(in->json) + 1, sizeof *w);
		json_array_foreach(in->json, i, e)
			w[i] = sbx_xstrdup(json_string_value(e));
	} else if (!(w = sbx_df_words(in->args, b->df.escape, v, in->line,
	    err))) {
		goto out;
	}
	for (nw = 0; w[nw]; nw++)
		;
	if (nw < 2) {
		bad(err, in, "needs a source and a destination");
		goto out;
	}
	for (size_t i = 0; i + 1 < nw; i++)
		if (strstr(w[i], "://") || !strncmp(w[i], "git@", 4)) {
			sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: %s of a "
			    "URL is not supported ('%s')", in->line, in->cmd,
			    w[i]);
			goto out;
		}
	if ((cm = sbx_df_flag(in, "chmod"))) {
		char *end;
		long m = strtol(cm, &end, 8);

		if (!*cm || *end || m < 0 || m > 07777) {
			bad(err, in, "--chmod wants an octal mode");
			goto out;
		}
		c.chmod = (int)m;
	}
	c.chown = sbx_df_flag(in, "chown");
	if (c.chown && !*c.chown) {
		bad(err, in, "--chown wants user[:group]");
		goto out;
	}
	dest = sbx_xstrdup(w[nw - 1]);
	todir = dest[strlen(dest) - 1] == '/' || nw > 2;
	if ((f = sbx_df_flag(in, "from"))) {
		if (!(from = stage_named(b, f))) {
			if (!(img = sbx_stage_from(f, err)))
				goto out;
			from = img;
		}
		c.from = from;
		free(w[nw - 1]);
		w[nw - 1] = NULL;
		c.src = w;
	} else {
		for (size_t i = 0; i + 1 < nw; i++)
			if (!expand(b->ctx, w[i], dest[0] ? dest : ".", todir,
			    &src, &to, &n, &isdir)) {
				sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: "
				    "%s: no '%s' in the context", in->line,
				    in->cmd, w[i]);
				goto out;
			}
		/* A directory's files go below dest, not as it. */
		if (n > 1 && !todir && !isdir) {
			bad(err, in, "of several files needs a destination "
			    "ending in '/'");
			goto out;
		}
		c.root = b->ctx->root;
		c.src = src;
		c.to = to;
		free(w[nw - 1]);
		w[nw - 1] = NULL;
	}
	c.dest = dest;
	c.extract = !strcmp(in->cmd, "ADD");
	rc = sbx_stage_copy(st, text, &c, &cached, err);
out:
	sbx_df_words_free(w);
	sbx_df_words_free(src);
	sbx_df_words_free(to);
	sbx_stage_free(img);
	free(dest);
	json_decref(v);
	return rc;
}

/* One instruction of stage st. */
static int
step(struct build *b, const struct sbx_df_instr *in, struct sbx_stage *st,
    struct sbx_err *err)
{
	json_t *cfg = sbx_stage_config(st), *v, *p, *a;
	char *text, **w = NULL;
	size_t i;
	int rc = -1, cached;

	{
		struct sbx_buf t = SBX_BUF_INIT;

		/* As written: the flags are part of its cache key. */
		sbx_buf_add(&t, in->cmd, strlen(in->cmd));
		for (i = 0; i < in->nflags; i++) {
			sbx_buf_add(&t, " ", 1);
			sbx_buf_add(&t, in->flags[i], strlen(in->flags[i]));
		}
		if (*in->args)
			sbx_buf_add(&t, " ", 1);
		sbx_buf_add(&t, in->args, strlen(in->args) + 1);
		text = sbx_xstrdup(t.data);
		sbx_buf_release(&t);
	}
	if (!strcmp(in->cmd, "RUN")) {
		char **argv;
		const char *k;
		json_t *extra = json_array();

		if ((k = sbx_df_flag(in, "network")) && strcmp(k, "none") &&
		    strcmp(k, "default")) {
			json_decref(extra);
			free(text);
			return bad(err, in, "--network other than none is not "
			    "supported");
		}
		/* The ARGs are its environment (and part of its key). */
		json_object_foreach(b->vars, k, v) {
			char *kv = sbx_xasprintf("%s=%s", k,
			    json_string_value(v));

			json_array_append_new(extra, json_string(kv));
			free(kv);
		}
		a = command(in, cfg);
		argv = sbx_xcalloc(json_array_size(a) + 1, sizeof *argv);
		json_array_foreach(a, i, v)
			argv[i] = (char *)json_string_value(v);
		if (!argv[0]) {
			bad(err, in, "needs a command");
		} else {
			rc = sbx_stage_run(st, text, argv, extra, &cached, err);
		}
		free(argv);
		json_decref(a);
		json_decref(extra);
		free(text);
		return rc;
	}
	if (!strcmp(in->cmd, "COPY") || !strcmp(in->cmd, "ADD")) {
		rc = do_copy(b, in, st, text, err);
		free(text);
		return rc;
	}
	if (!b->quiet)
		fprintf(stderr, "%s: %s\n", b->step, text);
	v = vars_of(b, st);
	if (!strcmp(in->cmd, "ENV") || !strcmp(in->cmd, "LABEL")) {
		if (!(p = pairs(b, in, st, err)))
			goto out;
		json_array_foreach(p, i, a) {
			const char *k = json_string_value(json_array_get(a, 0));
			const char *val = json_string_value(json_array_get(a,
			    1));

			if (!strcmp(in->cmd, "ENV")) {
				env_set(cfg, k, val);
			} else {
				json_t *l = json_object_get(cfg, "Labels");

				if (!json_is_object(l)) {
					l = json_object();
					json_object_set_new(cfg, "Labels", l);
				}
				json_object_set_new(l, k, json_string(val));
			}
		}
		json_decref(p);
	} else if (!strcmp(in->cmd, "ARG")) {
		if (do_arg(b, in, b->vars, st, err) < 0)
			goto out;
	} else if (!strcmp(in->cmd, "WORKDIR") || !strcmp(in->cmd, "USER")) {
		const char *wd;
		char *path;

		if (!(w = sbx_df_words(in->args, b->df.escape, v, in->line,
		    err)))
			goto out;
		if (!w[0] || w[1]) {
			bad(err, in, "takes one argument");
			goto out;
		}
		if (!strcmp(in->cmd, "USER")) {
			json_object_set_new(cfg, "User", json_string(w[0]));
		} else {
			wd = sbx_json_str(cfg, "WorkingDir");
			path = w[0][0] == '/' ? sbx_xstrdup(w[0]) :
			    sbx_xasprintf("%s/%s", wd && *wd && strcmp(wd, "/") ?
			    wd : "", w[0]);
			json_object_set_new(cfg, "WorkingDir",
			    json_string(path));
			free(path);
		}
	} else if (!strcmp(in->cmd, "EXPOSE")) {
		json_t *ports = json_object_get(cfg, "ExposedPorts");

		if (!(w = sbx_df_words(in->args, b->df.escape, v, in->line,
		    err)))
			goto out;
		if (!json_is_object(ports)) {
			ports = json_object();
			json_object_set_new(cfg, "ExposedPorts", ports);
		}
		for (i = 0; w[i]; i++) {
			char *end, *port;
			long n = strtol(w[i], &end, 10);

			if (n < 1 || n > 65535 || (*end && strcmp(end, "/tcp") &&
			    strcmp(end, "/udp"))) {
				bad(err, in, "wants PORT[/tcp|/udp]");
				goto out;
			}
			port = sbx_xasprintf("%ld%s", n, *end ? end : "/tcp");
			json_object_set_new(ports, port, json_object());
			free(port);
		}
	} else if (!strcmp(in->cmd, "SHELL")) {
		json_object_set(cfg, "Shell", in->json);
	} else if (!strcmp(in->cmd, "CMD")) {
		json_object_set_new(cfg, "Cmd", command(in, cfg));
		b->cmd_set = 1;
	} else if (!strcmp(in->cmd, "ENTRYPOINT")) {
		json_object_set_new(cfg, "Entrypoint", command(in, cfg));
		/* Docker: an ENTRYPOINT drops the base image's CMD, not the
		 * stage's own. */
		if (!b->cmd_set)
			json_object_del(cfg, "Cmd");
	}
	sbx_stage_history(st, text, 1);
	rc = 0;
out:
	sbx_df_words_free(w);
	json_decref(v);
	free(text);
	return rc;
}

static void
build_release(struct build *b)
{
	for (size_t i = 0; i < b->nstages; i++) {
		free(b->stages[i].name);
		sbx_stage_free(b->stages[i].st);
	}
	free(b->stages);
	json_decref(b->meta);
	json_decref(b->vars);
	sbx_dockerfile_release(&b->df);
}

/* The Dockerfile's bytes. */
static char *
slurp(const char *path, size_t *n, struct sbx_err *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char buf[65536];
	ssize_t r;
	FILE *f = fopen(path, "re");

	if (!f) {
		sbx_err_set(err, SBX_EX_USAGE, "cannot open '%s':", path);
		return NULL;
	}
	while ((r = (ssize_t)fread(buf, 1, sizeof buf, f)) > 0)
		sbx_buf_add(&b, buf, (size_t)r);
	fclose(f);
	sbx_buf_add(&b, "", 1);
	*n = b.len - 1;
	return b.data;
}

int
sbx_image_build_local(const struct sbx_ctx *c, const char *name,
    const json_t *args, int quiet, json_t **out, struct sbx_err *err)
{
	struct build b = {0};
	struct sbx_stage *st = NULL;
	size_t n, i;
	char *text;
	int rc = -1;

	*out = NULL;
	b.ctx = c;
	b.args = args;
	b.quiet = quiet;
	b.meta = json_object();
	b.vars = json_object();
	if (!(text = slurp(c->dockerfile, &n, err)))
		goto out;
	rc = sbx_dockerfile_parse(text, n, &b.df, err);
	free(text);
	if (rc < 0)
		goto out;
	rc = -1;
	for (i = 0; i < b.df.n; i++) {
		const struct sbx_df_instr *in = &b.df.v[i];

		snprintf(b.step, sizeof b.step, "step %zu/%zu", i + 1, b.df.n);
		if (!st && strcmp(in->cmd, "FROM")) {
			/* ARGs before the first FROM. */
			if (!quiet)
				fprintf(stderr, "%s: %s %s\n", b.step, in->cmd,
				    in->args);
			if (do_arg(&b, in, b.meta, NULL, err) < 0)
				goto out;
			continue;
		}
		if (!strcmp(in->cmd, "FROM")) {
			char **w = sbx_df_words(in->args, b.df.escape, b.meta,
			    in->line, err);
			struct sbx_stage *prev;
			size_t nw;

			if (!w)
				goto out;
			for (nw = 0; w[nw]; nw++)
				;
			if (!(nw == 1 || (nw == 3 && !strcasecmp(w[1], "as")))) {
				sbx_df_words_free(w);
				bad(err, in, "wants IMAGE [AS NAME]");
				goto out;
			}
			if (!quiet)
				fprintf(stderr, "%s: FROM %s\n", b.step,
				    in->args);
			prev = stage_named(&b, w[0]);
			st = prev ? sbx_stage_clone(prev) :
			    sbx_stage_from(w[0], err);
			if (!st) {
				sbx_df_words_free(w);
				goto out;
			}
			b.stages = sbx_xrealloc(b.stages, (b.nstages + 1) *
			    sizeof *b.stages);
			b.stages[b.nstages].name = nw == 3 ?
			    sbx_xstrdup(w[2]) : NULL;
			b.stages[b.nstages++].st = st;
			sbx_df_words_free(w);
			sbx_stage_quiet(st, quiet);
			json_decref(b.vars);
			b.vars = json_object();
			b.cmd_set = 0;
			continue;
		}
		sbx_stage_step(st, b.step);
		if (step(&b, in, st, err) < 0)
			goto out;
	}
	if (sbx_stage_commit(st, name, out, err) < 0)
		goto out;
	rc = 0;
out:
	build_release(&b);
	return rc;
}
