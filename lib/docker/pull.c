/* pull.c - sbx-image pull -b docker: an image pulled by the Docker
 * engine (POST /images/create), with the user's registry credentials as
 * X-Registry-Auth (a header: never in a path, an argv or a log), its
 * progress to stderr a line per change. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker.h"
#include "image/image.h"

/* {"status": "Downloading", "id": "a1b2", "progressDetail": ...}: a
 * status per line; the byte counts of "Downloading" are left to the
 * engine's own client. */
static void
progress(struct sbx_docker_stream *f, const json_t *j)
{
	const char *s, *id;

	if (!f->quiet && (s = json_string_value(json_object_get(j, "status")))
	    && strcmp(s, "Downloading") && strcmp(s, "Extracting")) {
		id = json_string_value(json_object_get(j, "id"));
		fprintf(stderr, "%s%s%s\n", id ? id : "", id ? ": " : "", s);
	}
}

int
sbx_docker_pull(const char *refstr, int quiet, json_t **out,
    struct sbx_err *err)
{
	struct sbx_imgref r;
	struct sbx_http_req rq = {.method = "POST", .in_fd = -1, .out_fd = -1,
	    .on_body = sbx_docker_stream_body};
	struct sbx_http_resp rs = {0};
	struct sbx_docker_stream f = {.line = SBX_BUF_INIT, .quiet = quiet,
	    .on_msg = progress};
	struct dk d = {0};
	const char *headers[2] = {NULL, NULL};
	char *from = NULL, *ref = NULL, *path = NULL, *auth = NULL, *hdr = NULL;
	char *name = NULL, *esc;
	const json_t *rd;
	const char *short_name;
	json_t *v;
	size_t i;
	int rc = -1, opened = 0;

	*out = NULL;
	if (sbx_imgref_parse(refstr, &r, err) < 0)
		return -1;
	name = sbx_imgref_name(&r);
	from = sbx_xasprintf("%s/%s", r.domain, r.repo);
	if ((auth = sbx_registry_engine_auth(r.domain))) {
		hdr = sbx_xasprintf("X-Registry-Auth: %s", auth);
		headers[0] = hdr;
		rq.headers = headers;
	}
	if (sbx_docker_open(&d, NULL, err) < 0)
		goto out;
	opened = 1;
	esc = sbx_http_escape(from);
	ref = sbx_http_escape(r.digest ? r.digest : r.tag);
	rq.path = path = sbx_xasprintf("/v%d.%d/images/create?fromImage=%s&"
	    "tag=%s", API_MAJOR, d.minor, esc, ref);
	free(esc);
	rq.on_body_arg = &f;
	if (sbx_http_do(d.h, &rq, &rs, err) < 0)
		goto out;
	sbx_docker_stream_end(&f);
	if (rs.status == 404) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no image '%s' for the "
		    "engine: %s", name, sbx_docker_msg(&rs));
		goto out;
	}
	if (rs.status != 200 || f.error[0]) {
		const char *why = rs.status != 200 ? sbx_docker_msg(&rs) :
		    f.error;

		/* The engine's words say whose fault it is. */
		sbx_err_set(err, strstr(why, "auth") || strstr(why,
		    "unauthorized") || strstr(why, "denied") ? SBX_EX_CRED :
		    strstr(why, "not found") || strstr(why, "unknown") ?
		    SBX_EX_NOSANDBOX : SBX_EX_FAIL, "the engine cannot pull "
		    "'%s': %s", name, why);
		goto out;
	}
	/* What the engine now has under that name. */
	sbx_http_resp_release(&rs);
	free(path);
	esc = sbx_http_escape(name);
	path = NULL;
	rc = sbx_docker_req(&d, "GET", NULL, &rs, err, "/images/%s/json", esc);
	free(esc);
	if (rc < 0)
		goto out;
	rc = -1;
	if (rs.status != 200) {
		sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot inspect the image "
		    "pulled", err);
		goto out;
	}
	*out = json_pack("{s:s,s:s,s:O}", "image", name, "backend", "docker",
	    "id", json_object_get(rs.json, "Id"));
	/* Docker Hub's in the engine's short form: busybox@sha256:... */
	short_name = !strncmp(from, "docker.io/library/", 18) ? from + 18 :
	    !strncmp(from, "docker.io/", 10) ? from + 10 : from;
	rd = json_object_get(rs.json, "RepoDigests");
	json_array_foreach(rd, i, v) {
		const char *s = json_string_value(v), *at;

		if (!s || !(at = strchr(s, '@')))
			continue;
		if (((size_t)(at - s) == strlen(from) && !strncmp(s, from,
		    strlen(from))) || ((size_t)(at - s) == strlen(short_name) &&
		    !strncmp(s, short_name, strlen(short_name)))) {
			json_object_set_new(*out, "digest", json_string(at + 1));
			break;
		}
	}
	rc = 0;
out:
	if (hdr)
		explicit_bzero(hdr, strlen(hdr));
	if (auth)
		explicit_bzero(auth, strlen(auth));
	free(hdr);
	free(auth);
	sbx_http_resp_release(&rs);
	sbx_buf_release(&f.line);
	if (opened)
		sbx_docker_close(&d);
	free(path);
	free(ref);
	free(from);
	free(name);
	sbx_imgref_release(&r);
	return rc;
}
