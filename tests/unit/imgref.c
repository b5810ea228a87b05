/* imgref.c - TAP unit tests of image references, read as Docker reads
 * them: the default registry and library/, tags, digests, hosts with
 * ports, and what is refused. */
#include <string.h>

#include "image/image.h"
#include "tap.h"

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* s parses to domain, repo, tag and digest (NULL: none). */
static int
parses(const char *s, const char *domain, const char *repo, const char *tag,
    const char *digest)
{
	struct sbx_imgref r;
	struct sbx_err err = {0};
	int ok;

	if (sbx_imgref_parse(s, &r, &err) < 0) {
		printf("# '%s': %s\n", s, err.msg);
		return 0;
	}
	ok = !strcmp(r.domain, domain) && !strcmp(r.repo, repo) &&
	    (tag ? r.tag && !strcmp(r.tag, tag) : !r.tag) &&
	    (digest ? r.digest && !strcmp(r.digest, digest) : !r.digest);
	if (!ok)
		printf("# '%s': %s %s %s %s\n", s, r.domain, r.repo,
		    r.tag ? r.tag : "-", r.digest ? r.digest : "-");
	sbx_imgref_release(&r);
	return ok;
}

static int
refused(const char *s)
{
	struct sbx_imgref r;
	struct sbx_err err = {0};

	if (sbx_imgref_parse(s, &r, &err) == 0) {
		sbx_imgref_release(&r);
		return 0;
	}
	return err.code == SBX_EX_USAGE && strstr(err.msg, s);
}

static void
t_docker_hub(void)
{
	CHECK(parses("python", "docker.io", "library/python", "latest", NULL));
	CHECK(parses("python:3.12-slim", "docker.io", "library/python",
	    "3.12-slim", NULL));
	CHECK(parses("user/app:v1", "docker.io", "user/app", "v1", NULL));
	CHECK(parses("docker.io/library/busybox", "docker.io",
	    "library/busybox", "latest", NULL));
	CHECK(parses("index.docker.io/busybox", "docker.io",
	    "library/busybox", "latest", NULL));
}

static void
t_hosts(void)
{
	CHECK(parses("127.0.0.1:5000/t/one:v1", "127.0.0.1:5000", "t/one",
	    "v1", NULL));
	CHECK(parses("localhost/app", "localhost", "app", "latest", NULL));
	CHECK(parses("ghcr.io/a/b/c", "ghcr.io", "a/b/c", "latest", NULL));
	/* A first part without '.' or ':' is a path, not a host. */
	CHECK(parses("registry/app", "docker.io", "registry/app", "latest",
	    NULL));
	CHECK(sbx_registry_loopback("127.0.0.1:5000"));
	CHECK(sbx_registry_loopback("localhost:5000"));
	CHECK(sbx_registry_loopback("[::1]:5000"));
	CHECK(!sbx_registry_loopback("localhost.example.com"));
	CHECK(!sbx_registry_loopback("10.0.0.1:5000"));
}

static void
t_digests(void)
{
	CHECK(parses("busybox@sha256:" D64, "docker.io", "library/busybox",
	    NULL, "sha256:" D64));
	CHECK(parses("h.io:443/x:t@sha256:" D64, "h.io:443", "x", "t",
	    "sha256:" D64));
}

static void
t_refused(void)
{
	CHECK(refused(""));
	CHECK(refused("Python"));
	CHECK(refused("a//b"));
	CHECK(refused("a/b/"));
	CHECK(refused("a:"));
	CHECK(refused("a:-x"));
	CHECK(refused("a@sha256:abc"));
	CHECK(refused("a@md5:" D64));
	CHECK(refused("a..b"));
	CHECK(refused("a___b"));
	CHECK(refused("-a"));
	CHECK(refused("a b"));
	CHECK(refused("h.io/a;rm"));
	/* Hosts: labels joined by single dots, inner dashes, a numeric
	 * port. */
	CHECK(refused("h..x/a"));
	CHECK(refused("h:/a"));
	CHECK(refused("h:5x/a"));
	CHECK(refused("-h.x/a"));
	CHECK(refused("h-.x/a"));
	CHECK(refused("[::1/a"));
	CHECK(parses("[::1]:5000/a", "[::1]:5000", "a", "latest", NULL));
	CHECK(parses("reg.example-1.org/a", "reg.example-1.org", "a",
	    "latest", NULL));
}

/* The names sbx-image build -t and import -t take: no tag, no digest. */
static void
t_names(void)
{
	CHECK(sbx_imgref_valid_name("app"));
	CHECK(sbx_imgref_valid_name("localhost:5000/a/b"));
	CHECK(sbx_imgref_valid_name("127.0.0.1:5000/x"));
	CHECK(!sbx_imgref_valid_name("app:1"));
	CHECK(!sbx_imgref_valid_name("a@sha256:" D64));
	CHECK(!sbx_imgref_valid_name("localhost:5000/A"));
	CHECK(!sbx_imgref_valid_name("h..x/a"));
}

int
main(void)
{
	static const struct tap_test tests[] = {
		{"Docker Hub names: docker.io, library/ for one part, latest",
		    t_docker_hub},
		{"a first part with '.' or ':' or localhost is a registry",
		    t_hosts},
		{"digests, with and without a tag", t_digests},
		{"what Docker refuses is refused, naming it", t_refused},
		{"a repository's name: no tag, no digest", t_names},
	};

	return tap_run(tests, sizeof tests / sizeof *tests);
}
