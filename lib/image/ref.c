/* ref.c - image references read as Docker reads them:
 * [DOMAIN/]PATH[:TAG][@DIGEST], Docker Hub's names made whole. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "image/image.h"

#define DOCKER_HUB "docker.io"

int
sbx_image_valid_digest(const char *d)
{
	size_t i;

	if (strncmp(d, "sha256:", 7))
		return 0;
	for (i = 7; d[i]; i++)
		if (!isxdigit((unsigned char)d[i]) ||
		    isupper((unsigned char)d[i]))
			return 0;
	return i == 7 + 64;
}

/* A path component: lowercase letters and digits, separated by one '.',
 * one or two '_', or any number of '-' (Docker's grammar). */
static int
valid_component(const char *s, size_t n)
{
	size_t i, run = 0;
	char sep = 0;

	if (!n || !isalnum((unsigned char)s[0]) ||
	    !isalnum((unsigned char)s[n - 1]))
		return 0;
	for (i = 0; i < n; i++) {
		if (islower((unsigned char)s[i]) ||
		    isdigit((unsigned char)s[i])) {
			run = 0;
			sep = 0;
			continue;
		}
		if (s[i] != '.' && s[i] != '_' && s[i] != '-')
			return 0;
		if (sep && s[i] != sep)
			return 0;
		sep = s[i];
		run++;
		if ((sep == '.' && run > 1) || (sep == '_' && run > 2))
			return 0;
	}
	return 1;
}

static int
valid_tag(const char *t)
{
	size_t i;

	if (!*t || strlen(t) > 128 || !(isalnum((unsigned char)*t) ||
	    *t == '_'))
		return 0;
	for (i = 1; t[i]; i++)
		if (!isalnum((unsigned char)t[i]) && !strchr("_.-", t[i]))
			return 0;
	return 1;
}

/* A registry host as Docker reads one: labels of letters, digits and
 * inner dashes joined by single dots, or an IPv6 address in brackets;
 * then :PORT. */
static int
valid_domain(const char *d)
{
	const char *p = d, *label;

	if (!*d || strlen(d) > 255)
		return 0;
	if (*p == '[') {
		for (p++; isxdigit((unsigned char)*p) || *p == ':'; p++)
			;
		if (*p++ != ']' || p == d + 2)
			return 0;
	} else {
		for (;;) {
			label = p;
			while (isalnum((unsigned char)*p) || *p == '-')
				p++;
			if (p == label || label[0] == '-' || p[-1] == '-')
				return 0;
			if (*p != '.')
				break;
			p++;
		}
	}
	if (*p == ':') {
		if (!isdigit((unsigned char)*++p))
			return 0;
		while (isdigit((unsigned char)*p))
			p++;
	}
	return *p == '\0';
}

int
sbx_imgref_parse(const char *s, struct sbx_imgref *r, struct sbx_err *err)
{
	char *name = sbx_xstrdup(s), *at, *slash, *colon, *p, *q;

	memset(r, 0, sizeof *r);
	if ((at = strchr(name, '@'))) {
		*at++ = '\0';
		if (!sbx_image_valid_digest(at))
			goto bad;
		r->digest = sbx_xstrdup(at);
	}
	slash = strrchr(name, '/');
	colon = strrchr(name, ':');
	if (colon && (!slash || colon > slash)) {
		*colon++ = '\0';
		if (!valid_tag(colon))
			goto bad;
		r->tag = sbx_xstrdup(colon);
	}
	/* The first component is a registry when it looks like a host. */
	slash = strchr(name, '/');
	if (slash && (memchr(name, '.', (size_t)(slash - name)) ||
	    memchr(name, ':', (size_t)(slash - name)) ||
	    !strncmp(name, "localhost/", 10))) {
		r->domain = sbx_xasprintf("%.*s", (int)(slash - name), name);
		p = slash + 1;
		if (!valid_domain(r->domain))
			goto bad;
	} else {
		r->domain = sbx_xstrdup(DOCKER_HUB);
		p = name;
	}
	if (!strcmp(r->domain, "index.docker.io")) {
		free(r->domain);
		r->domain = sbx_xstrdup(DOCKER_HUB);
	}
	if (!strcmp(r->domain, DOCKER_HUB) && !strchr(p, '/'))
		r->repo = sbx_xasprintf("library/%s", p);
	else
		r->repo = sbx_xstrdup(p);
	if (strlen(r->repo) > 255)
		goto bad;
	for (q = r->repo; ; q = slash + 1) {
		slash = strchr(q, '/');
		if (!valid_component(q, slash ? (size_t)(slash - q) :
		    strlen(q)))
			goto bad;
		if (!slash)
			break;
	}
	if (!r->tag && !r->digest)
		r->tag = sbx_xstrdup("latest");
	free(name);
	return 0;
bad:
	free(name);
	sbx_imgref_release(r);
	return sbx_err_set(err, SBX_EX_USAGE, "invalid image reference '%s'",
	    s);
}

int
sbx_imgref_valid_name(const char *s)
{
	struct sbx_imgref r;
	struct sbx_err e = {0};
	const char *last = strrchr(s, '/');

	/* A repository: no tag, no digest (the build adds its own). */
	if (strlen(s) > 200 || strchr(s, '@') || strchr(last ? last : s, ':') ||
	    sbx_imgref_parse(s, &r, &e) < 0)
		return 0;
	sbx_imgref_release(&r);
	return 1;
}

char *
sbx_imgref_name(const struct sbx_imgref *r)
{
	if (r->digest)
		return sbx_xasprintf("%s/%s@%s", r->domain, r->repo, r->digest);
	return sbx_xasprintf("%s/%s:%s", r->domain, r->repo, r->tag);
}

void
sbx_imgref_release(struct sbx_imgref *r)
{
	free(r->domain);
	free(r->repo);
	free(r->tag);
	free(r->digest);
	memset(r, 0, sizeof *r);
}

int
sbx_registry_loopback(const char *domain)
{
	size_t n = strcspn(domain, ":");

	if (domain[0] == '[')
		return !strncmp(domain, "[::1]", 5);
	return (n == 9 && !strncmp(domain, "localhost", 9)) ||
	    !strncmp(domain, "127.", 4);
}

