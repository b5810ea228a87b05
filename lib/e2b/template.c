/* template.c - sbx-image build -b e2b: a Dockerfile as an E2B template,
 * built through E2B's template API as the SDKs' Template.build does
 * (POST /v3/templates, the files of each COPY uploaded by their hash,
 * POST /v2/templates/ID/builds/BUILD with the steps, the status polled
 * for its logs), named NAME-HASH; --check asks for the name's alias. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "e2b.h"
#include "image/builder.h"

#define POLL_MS 200
#define BUILD_MAX_S 3600 /* E2B's own limit on a build */

int
sbx_e2b_template_exists(const char *name, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct eb e;
	char *esc = sbx_http_escape(name);
	int rc;

	if (sbx_e2b_open(&e, NULL, err) < 0) {
		free(esc);
		return -1;
	}
	rc = sbx_e2b_req(&e, "GET", NULL, &rs, err, "/templates/aliases/%s",
	    esc);
	free(esc);
	if (rc == 0) {
		if (rs.status == 200 || rs.status == 403)
			rc = 1; /* 403: it exists, another team's */
		else if (rs.status == 404)
			rc = 0;
		else
			rc = sbx_e2b_fail(&rs, "cannot look for a template",
			    name, err);
	}
	sbx_http_resp_release(&rs);
	sbx_e2b_close(&e);
	return rc;
}

/* --- what a COPY takes: its files, hashed and packed as the SDK does -- */

/* The entries of src (a file, or a directory and everything under it)
 * of the context, sorted as the SDK sorts full paths; NULL: none. */
static int
cmp_json_str(const void *a, const void *b)
{
	return strcmp(json_string_value(*(json_t *const *)a),
	    json_string_value(*(json_t *const *)b));
}

static json_t *
entries(const struct sbx_ctx *c, const char *src)
{
	json_t *seen = json_object(), *out, **v, *x;
	char *s = sbx_xstrdup(src), *p, *q;
	const char *k;
	size_t n, i;

	while ((n = strlen(s)) > 1 && s[n - 1] == '/')
		s[n - 1] = '\0';
	while (s[0] == '.' && s[1] == '/')
		memmove(s, s + 2, strlen(s + 2) + 1);
	if (!strcmp(s, ".") || !strcmp(s, "/"))
		s[0] = '\0';
	n = strlen(s);
	for (i = 0; i < c->n; i++) {
		const char *f = c->files[i];

		if (n && strcmp(f, s) && (strncmp(f, s, n) || f[n] != '/'))
			continue;
		/* The directories on the way, from src down. */
		p = sbx_xstrdup(f);
		for (q = p; (q = strchr(q, '/')); q++) {
			*q = '\0';
			if (strlen(p) >= n)
				json_object_set_new(seen, p, json_true());
			*q = '/';
		}
		json_object_set_new(seen, f, json_true());
		free(p);
	}
	free(s);
	n = json_object_size(seen);
	if (!n) {
		json_decref(seen);
		return NULL;
	}
	/* The SDK sorts by full path: the same as by relative path. */
	v = sbx_xcalloc(n, sizeof *v);
	i = 0;
	json_object_foreach(seen, k, x)
		v[i++] = json_string(k);
	qsort(v, n, sizeof *v, cmp_json_str);
	out = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(out, v[i]);
	free(v);
	json_decref(seen);
	return out;
}

/* The SDK's files hash: "COPY src dest", then for each entry its path,
 * its mode and size (decimal), and a file's bytes or a link's target. */
static int
files_hash(const struct sbx_ctx *c, const char *src, const char *dest,
    const json_t *ents, char out[65], struct sbx_err *err)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char d[32], buf[65536];
	char num[32], *p;
	const json_t *v;
	struct stat st;
	size_t i;
	ssize_t r;
	int fd, rc = 0;

	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	p = sbx_xasprintf("COPY %s %s", src, dest);
	EVP_DigestUpdate(md, p, strlen(p));
	free(p);
	json_array_foreach(ents, i, v) {
		const char *rel = json_string_value(v);

		p = sbx_xasprintf("%s/%s", c->root, rel);
		EVP_DigestUpdate(md, rel, strlen(rel));
		if (lstat(p, &st) < 0) {
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':",
			    p);
			free(p);
			break;
		}
		snprintf(num, sizeof num, "%u", (unsigned)st.st_mode);
		EVP_DigestUpdate(md, num, strlen(num));
		snprintf(num, sizeof num, "%lld", (long long)st.st_size);
		EVP_DigestUpdate(md, num, strlen(num));
		if (S_ISLNK(st.st_mode)) {
			char t[4096];

			if ((r = readlink(p, t, sizeof t)) > 0)
				EVP_DigestUpdate(md, t, (size_t)r);
		} else if (S_ISREG(st.st_mode)) {
			if ((fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW))
			    < 0) {
				rc = sbx_err_set(err, SBX_EX_FAIL, "cannot read "
				    "'%s':", p);
				free(p);
				break;
			}
			while ((r = read(fd, buf, sizeof buf)) > 0)
				EVP_DigestUpdate(md, buf, (size_t)r);
			close(fd);
		}
		free(p);
	}
	EVP_DigestFinal_ex(md, d, NULL);
	EVP_MD_CTX_free(md);
	for (i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
	out[64] = '\0';
	return rc;
}

/* A gzipped tar of the entries (paths relative to the context, no
 * recursion: each is listed) in an unnamed file: its fd, at 0. */
static int
pack(const struct sbx_ctx *c, const json_t *ents, off_t *size,
    struct sbx_err *err)
{
	struct archive *a = archive_write_new();
	struct archive *disk = archive_read_disk_new();
	struct archive_entry *ae;
	char buf[65536], *p;
	const json_t *v;
	size_t i;
	ssize_t r;
	int fd, in, rc = 0;

	fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make a temporary file:");
		goto out;
	}
	archive_write_set_format_pax_restricted(a);
	archive_write_add_filter_gzip(a);
	archive_read_disk_set_symlink_physical(disk);
	if (archive_write_open_fd(a, fd) != ARCHIVE_OK) {
		rc = -1;
		goto fail;
	}
	json_array_foreach(ents, i, v) {
		p = sbx_xasprintf("%s/%s", c->root, json_string_value(v));
		ae = archive_entry_new();
		archive_entry_copy_sourcepath(ae, p);
		archive_entry_copy_pathname(ae, json_string_value(v));
		in = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (archive_read_disk_entry_from_file(disk, ae, in, NULL) !=
		    ARCHIVE_OK || archive_write_header(a, ae) != ARCHIVE_OK) {
			if (in >= 0)
				close(in);
			archive_entry_free(ae);
			free(p);
			rc = -1;
			goto fail;
		}
		if (in >= 0 && archive_entry_filetype(ae) == AE_IFREG)
			while ((r = read(in, buf, sizeof buf)) > 0)
				if (archive_write_data(a, buf, (size_t)r) < 0) {
					rc = -1;
					break;
				}
		if (in >= 0)
			close(in);
		archive_entry_free(ae);
		free(p);
		if (rc < 0)
			goto fail;
	}
	if (archive_write_close(a) != ARCHIVE_OK)
		rc = -1;
fail:
	if (rc < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot pack the files: %s",
		    archive_error_string(a) ? archive_error_string(a) :
		    archive_error_string(disk) ? archive_error_string(disk) :
		    "?");
		close(fd);
		fd = -1;
	} else {
		*size = lseek(fd, 0, SEEK_END);
		lseek(fd, 0, SEEK_SET);
	}
out:
	archive_write_free(a);
	archive_read_free(disk);
	return fd;
}

/* PUT the pack to url (a link of the API's, anywhere). */
static int
upload(const char *url, int fd, off_t size, struct sbx_err *err)
{
	const char *slash = strstr(url, "://");
	struct sbx_http_resp rs = {0};
	struct sbx_http_req rq = {.method = "PUT", .in_fd = fd, .out_fd = -1,
	    .in_type = "application/gzip", .in_size = (long long)size};
	struct sbx_http *h;
	char *origin;
	int rc;

	if (!slash || !(slash = strchr(slash + 3, '/')) ||
	    (strncmp(url, "https://", 8) && strncmp(url, "http://", 7)))
		return sbx_err_set(err, SBX_EX_DATA, "the API gave an upload "
		    "link that is not a URL");
	origin = strndup(url, (size_t)(slash - url));
	rq.path = slash;
	if (!(h = sbx_http_new(origin, err))) {
		free(origin);
		return -1;
	}
	free(origin);
	rc = sbx_http_do(h, &rq, &rs, err);
	if (rc == 0 && (rs.status < 200 || rs.status > 299))
		rc = sbx_err_set(err, SBX_EX_FAIL, "the upload of a COPY's "
		    "files failed (%ld)", rs.status);
	sbx_http_resp_release(&rs);
	sbx_http_free(h);
	return rc;
}

/* --- the Dockerfile as E2B's steps ------------------------------------ */

struct conv {
	const struct sbx_ctx *c;
	struct sbx_dockerfile df;
	json_t *vars;    /* ARG and ENV values, for $VAR */
	json_t *argenv;  /* this stage's ARGs, for RUN's environment */
	json_t *steps;
	json_t *copies;  /* [{"hash","ents"}] to upload */
	char *from;
	char *start;     /* ENTRYPOINT + CMD, as one shell line */
	json_t *entry, *cmd;
	int quiet;
};

static int
bad(struct sbx_err *err, const struct sbx_df_instr *in, const char *what)
{
	return sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: %s %s (-b e2b)",
	    in->line, in->cmd, what);
}

/* A word as sh reads it back: single-quoted unless plain. */
static void
sh_word(struct sbx_buf *b, const char *w)
{
	if (*w && strspn(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX"
	    "YZ0123456789_-./=:,+@%") == strlen(w)) {
		sbx_buf_add(b, w, strlen(w));
		return;
	}
	sbx_buf_add(b, "'", 1);
	for (; *w; w++)
		if (*w == '\'')
			sbx_buf_add(b, "'\\''", 4);
		else
			sbx_buf_add(b, w, 1);
	sbx_buf_add(b, "'", 1);
}

static char *
sh_line(const json_t *argv)
{
	struct sbx_buf b = SBX_BUF_INIT;
	const json_t *v;
	size_t i;

	json_array_foreach(argv, i, v) {
		if (i)
			sbx_buf_add(&b, " ", 1);
		sh_word(&b, json_string_value(v) ? json_string_value(v) : "");
	}
	sbx_buf_add(&b, "", 1);
	return b.data;
}


static int
is_archive(const char *s)
{
	static const char *const ext[] = {".tar", ".tar.gz", ".tgz",
	    ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst"};
	size_t n = strlen(s), i, k;

	for (i = 0; i < sizeof ext / sizeof *ext; i++) {
		k = strlen(ext[i]);
		if (n > k && !strcmp(s + n - k, ext[i]))
			return 1;
	}
	return 0;
}

static int
do_copy(struct conv *v, const struct sbx_df_instr *in, char **w,
    struct sbx_err *err)
{
	const char *chown = sbx_df_flag(in, "chown"), *chmod = sbx_df_flag(in, "chmod");
	size_t n = 0, i;
	json_t *ents;
	char h[65];

	if (sbx_df_flag(in, "from"))
		return bad(err, in, "--from: an E2B template has one stage");
	while (w[n])
		n++;
	if (n < 2)
		return bad(err, in, "needs a source and a destination");
	for (i = 0; i + 1 < n; i++) {
		if (strpbrk(w[i], "*?["))
			return bad(err, in, "of a pattern is not supported");
		if (strstr(w[i], "://"))
			return bad(err, in, "of a URL is not supported");
		if (!strcmp(in->cmd, "ADD") && is_archive(w[i]))
			return bad(err, in, "of an archive (unpacked by "
			    "Docker) is not supported");
		if (!(ents = entries(v->c, w[i])))
			return sbx_err_set(err, SBX_EX_USAGE, "Dockerfile:%d: "
			    "%s '%s': no such file in the context", in->line,
			    in->cmd, w[i]);
		if (files_hash(v->c, w[i], w[n - 1], ents, h, err) < 0) {
			json_decref(ents);
			return -1;
		}
		json_array_append_new(v->steps, json_pack("{s:s,s:[ssss],"
		    "s:b,s:s}", "type", "COPY", "args", w[i], w[n - 1],
		    chown ? chown : "", chmod ? chmod : "", "force", 0,
		    "filesHash", h));
		json_array_append_new(v->copies, json_pack("{s:s,s:o}", "hash",
		    h, "ents", ents));
	}
	return 0;
}

static int
convert(struct conv *v, const json_t *args, struct sbx_err *err)
{
	const struct sbx_df_instr *in;
	json_t *meta = json_object();
	size_t i, k;
	char **w;
	int rc = 0, stages = 0;

	for (i = 0; i < v->df.n && rc == 0; i++) {
		in = &v->df.v[i];
		/* RUN and the exec forms are the shell's; the rest words. */
		w = NULL;
		if (strcmp(in->cmd, "RUN") && strcmp(in->cmd, "CMD") &&
		    strcmp(in->cmd, "ENTRYPOINT") && !(w = sbx_df_words(
		    in->args, v->df.escape, stages ? v->vars : meta, in->line,
		    err))) {
			rc = -1;
			break;
		}
		if (!strcmp(in->cmd, "ARG")) {
			for (k = 0; w[k]; k++) {
				char *key = sbx_xstrdup(w[k]), *eq;
				const char *given;

				if ((eq = strchr(key, '=')))
					*eq++ = '\0';
				given = json_string_value(json_object_get(args,
				    key));
				if (given || eq) {
					json_t *val = json_string(given ? given :
					    eq);

					json_object_set(stages ? v->vars :
					    meta, key, val);
					if (stages)
						json_object_set(v->argenv, key,
						    val);
					json_decref(val);
				} else if (stages && json_object_get(meta,
				    key)) {
					json_object_set(v->vars, key,
					    json_object_get(meta, key));
					json_object_set(v->argenv, key,
					    json_object_get(meta, key));
				}
				free(key);
			}
		} else if (!strcmp(in->cmd, "FROM")) {
			if (stages++)
				rc = bad(err, in, "again: an E2B template has "
				    "one stage");
			else if (in->nflags)
				rc = bad(err, in, "with flags is not supported");
			else if (!w[0] || (w[1] && (strcasecmp(w[1], "AS") ||
			    !w[2] || w[3])))
				rc = bad(err, in, "takes an image [AS name]");
			else if (!strcmp(w[0], "scratch"))
				rc = bad(err, in, "scratch: an E2B template "
				    "needs an image with a shell");
			else
				v->from = sbx_xstrdup(w[0]);
		} else if (!stages) {
			rc = bad(err, in, "before FROM");
		} else if (!strcmp(in->cmd, "RUN")) {
			struct sbx_buf b = SBX_BUF_INIT;
			const char *key;
			json_t *val;
			char *line;

			if (in->nflags) {
				rc = bad(err, in, "with flags is not supported");
				break;
			}
			/* The stage's ARGs are its environment, as Docker
			 * gives them to RUN. */
			json_object_foreach(v->argenv, key, val) {
				sbx_buf_add(&b, "export ", 7);
				sbx_buf_add(&b, key, strlen(key));
				sbx_buf_add(&b, "=", 1);
				sh_word(&b, json_string_value(val));
				sbx_buf_add(&b, "; ", 2);
			}
			line = in->json ? sh_line(in->json) :
			    sbx_xstrdup(in->args);
			sbx_buf_add(&b, line, strlen(line) + 1);
			free(line);
			json_array_append_new(v->steps, json_pack("{s:s,s:[s],"
			    "s:b}", "type", "RUN", "args", b.data, "force", 0));
			sbx_buf_release(&b);
		} else if (!strcmp(in->cmd, "COPY") || !strcmp(in->cmd,
		    "ADD")) {
			rc = do_copy(v, in, w, err);
		} else if (!strcmp(in->cmd, "ENV")) {
			json_t *a = json_array();

			for (k = 0; w[k] && rc == 0; k++) {
				char *eq = strchr(w[k], '=');

				if (!eq && k == 0 && w[1]) {
					/* ENV KEY VALUE... */
					struct sbx_buf b = SBX_BUF_INIT;
					size_t j;

					for (j = 1; w[j]; j++) {
						if (j > 1)
							sbx_buf_add(&b, " ", 1);
						sbx_buf_add(&b, w[j],
						    strlen(w[j]));
					}
					sbx_buf_add(&b, "", 1);
					json_array_append_new(a,
					    json_string(w[0]));
					json_array_append_new(a,
					    json_string(b.data));
					json_object_set_new(v->vars, w[0],
					    json_string(b.data));
					sbx_buf_release(&b);
					break;
				}
				if (!eq || eq == w[k]) {
					rc = bad(err, in, "wants KEY=VALUE");
					break;
				}
				*eq = '\0';
				json_array_append_new(a, json_string(w[k]));
				json_array_append_new(a, json_string(eq + 1));
				json_object_set_new(v->vars, w[k],
				    json_string(eq + 1));
			}
			if (rc == 0 && json_array_size(a))
				json_array_append_new(v->steps, json_pack(
				    "{s:s,s:O,s:b}", "type", "ENV", "args", a,
				    "force", 0));
			json_decref(a);
		} else if (!strcmp(in->cmd, "WORKDIR") || !strcmp(in->cmd,
		    "USER")) {
			if (!w[0] || w[1])
				rc = bad(err, in, "takes one word");
			else
				json_array_append_new(v->steps, json_pack(
				    "{s:s,s:[s],s:b}", "type", in->cmd, "args",
				    w[0], "force", 0));
		} else if (!strcmp(in->cmd, "CMD") || !strcmp(in->cmd,
		    "ENTRYPOINT")) {
			json_t **slot = !strcmp(in->cmd, "CMD") ? &v->cmd :
			    &v->entry;

			json_decref(*slot);
			*slot = in->json ? json_incref(in->json) :
			    json_pack("[sss]", "/bin/sh", "-c", in->args);
		} else if (!strcmp(in->cmd, "LABEL") || !strcmp(in->cmd,
		    "EXPOSE")) {
			/* Metadata an E2B template has no place for. */
			if (!v->quiet)
				sbx_warn("Dockerfile:%d: %s has no E2B "
				    "equivalent: left out", in->line, in->cmd);
		} else {
			rc = bad(err, in, "is not supported");
		}
		sbx_df_words_free(w);
	}
	json_decref(meta);
	if (rc == 0 && !v->from)
		rc = sbx_err_set(err, SBX_EX_USAGE, "Dockerfile: no FROM");
	if (rc == 0 && (v->entry || v->cmd)) {
		json_t *all = json_array();

		if (v->entry)
			json_array_extend(all, v->entry);
		if (v->cmd)
			json_array_extend(all, v->cmd);
		v->start = sh_line(all);
		json_decref(all);
	}
	return rc;
}

static void
nap(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Poll the build's status until it is done, its log to stderr. */
static int
follow(struct eb *e, const char *tid, const char *bid, int quiet,
    struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	long long off = 0, t0 = sbx_mono_ms();
	const json_t *l;
	const char *st;
	size_t i;
	int rc = -1;

	for (;;) {
		memset(&rs, 0, sizeof rs);
		if (sbx_e2b_req(e, "GET", NULL, &rs, err, "/templates/%s/"
		    "builds/%s/status?logsOffset=%lld", tid, bid, off) < 0)
			return -1;
		if (rs.status != 200 || !json_is_object(rs.json)) {
			sbx_e2b_fail(&rs, "cannot follow the build", tid, err);
			break;
		}
		json_array_foreach(json_object_get(rs.json, "logEntries"), i,
		    l) {
			off++;
			if (!quiet && sbx_json_str(l, "message"))
				fprintf(stderr, "%s\n", sbx_json_str(l,
				    "message"));
		}
		st = sbx_json_str(rs.json, "status");
		if (st && !strcmp(st, "ready")) {
			rc = 0;
			break;
		}
		if (st && !strcmp(st, "error")) {
			const char *m = sbx_json_str(json_object_get(rs.json,
			    "reason"), "message");

			sbx_err_set(err, SBX_EX_FAIL, "the E2B build failed: "
			    "%s", m ? m : "no reason given");
			break;
		}
		if (!json_array_size(json_object_get(rs.json, "logEntries"))) {
			if (sbx_mono_ms() - t0 > BUILD_MAX_S * 1000LL) {
				sbx_err_set(err, SBX_EX_FAIL, "the E2B build "
				    "took over %d s", BUILD_MAX_S);
				break;
			}
			nap(POLL_MS);
		}
		sbx_http_resp_release(&rs);
	}
	sbx_http_resp_release(&rs);
	return rc;
}

int
sbx_e2b_build(const struct sbx_ctx *c, const char *name,
    const json_t *buildargs, int quiet, json_t **out, struct sbx_err *err)
{
	struct conv v = {.c = c, .quiet = quiet};
	struct sbx_http_resp rs = {0};
	const char *tid = NULL, *bid = NULL, *url;
	char *text = NULL, *t = NULL, *b = NULL;
	json_t *body = NULL, *cp;
	size_t len, i;
	struct eb e;
	off_t size;
	int rc = -1, fd, have_e = 0;

	v.vars = json_object();
	v.argenv = json_object();
	v.steps = json_array();
	v.copies = json_array();
	{
		int dfd = open(c->dockerfile, O_RDONLY | O_CLOEXEC);
		struct stat st;

		if (dfd < 0 || fstat(dfd, &st) < 0) {
			sbx_err_set(err, SBX_EX_USAGE, "cannot read '%s':",
			    c->dockerfile);
			if (dfd >= 0)
				close(dfd);
			goto out;
		}
		len = (size_t)st.st_size;
		text = sbx_xmalloc(len + 1);
		if (sbx_read_all(dfd, text, len) < 0) {
			close(dfd);
			sbx_err_set(err, SBX_EX_USAGE, "cannot read '%s':",
			    c->dockerfile);
			goto out;
		}
		close(dfd);
		text[len] = '\0';
	}
	if (sbx_dockerfile_parse(text, len, &v.df, err) < 0 ||
	    convert(&v, buildargs, err) < 0)
		goto out;
	if (sbx_e2b_open(&e, NULL, err) < 0)
		goto out;
	have_e = 1;
	body = json_pack("{s:s,s:i,s:i}", "name", name, "cpuCount", 2,
	    "memoryMB", 1024);
	if (sbx_e2b_req(&e, "POST", body, &rs, err, "/v3/templates") < 0)
		goto out;
	if (rs.status != 202 && rs.status != 200) {
		sbx_e2b_fail(&rs, "cannot request a template build", name,
		    err);
		goto out;
	}
	tid = sbx_json_str(rs.json, "templateID");
	bid = sbx_json_str(rs.json, "buildID");
	if (!tid || !bid || strpbrk(tid, "/?#") || strpbrk(bid, "/?#")) {
		sbx_err_set(err, SBX_EX_DATA, "the API's answer to a build "
		    "request has no templateID or buildID");
		goto out;
	}
	t = sbx_xstrdup(tid);
	b = sbx_xstrdup(bid);
	sbx_http_resp_release(&rs);
	if (!quiet)
		fprintf(stderr, "template %s: build %s\n", t, b);
	json_array_foreach(v.copies, i, cp) {
		const char *h = sbx_json_str(cp, "hash");

		memset(&rs, 0, sizeof rs);
		if (sbx_e2b_req(&e, "GET", NULL, &rs, err, "/templates/%s/"
		    "files/%s", t, h) < 0)
			goto out;
		if (rs.status != 201 && rs.status != 200) {
			sbx_e2b_fail(&rs, "cannot ask for an upload link", t,
			    err);
			goto out;
		}
		url = sbx_json_str(rs.json, "url");
		if (!json_is_true(json_object_get(rs.json, "present")) && url) {
			if ((fd = pack(c, json_object_get(cp, "ents"), &size,
			    err)) < 0)
				goto out;
			rc = upload(url, fd, size, err);
			close(fd);
			if (rc < 0)
				goto out;
			rc = -1;
			if (!quiet)
				fprintf(stderr, "uploaded the files of "
				    "%.12s\n", h);
		}
		sbx_http_resp_release(&rs);
	}
	json_decref(body);
	body = json_pack("{s:s,s:O,s:b,s:s?}", "fromImage", v.from, "steps",
	    v.steps, "force", 0, "startCmd", v.start);
	memset(&rs, 0, sizeof rs);
	if (sbx_e2b_req(&e, "POST", body, &rs, err, "/v2/templates/%s/builds/"
	    "%s", t, b) < 0)
		goto out;
	if (rs.status != 202 && rs.status != 200 && rs.status != 204) {
		sbx_e2b_fail(&rs, "cannot start the template build", t, err);
		goto out;
	}
	sbx_http_resp_release(&rs);
	if (follow(&e, t, b, quiet, err) < 0)
		goto out;
	*out = json_pack("{s:s,s:s}", "template_id", t, "build_id", b);
	rc = 0;
out:
	sbx_http_resp_release(&rs);
	if (have_e)
		sbx_e2b_close(&e);
	sbx_dockerfile_release(&v.df);
	json_decref(body);
	json_decref(v.vars);
	json_decref(v.argenv);
	json_decref(v.steps);
	json_decref(v.copies);
	json_decref(v.entry);
	json_decref(v.cmd);
	free(v.from);
	free(v.start);
	free(text);
	free(t);
	free(b);
	return rc;
}
