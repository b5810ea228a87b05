/* imguser.c - TAP unit tests of an image's User read as docker reads it:
 * uids and names through a tree's etc/passwd and etc/group, groups, the
 * home, and what is refused. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local/local.h"
#include "tap.h"

static int root = -1;
static char tree[] = "/tmp/imguser.XXXXXX";

static void
put(const char *dir, const char *name, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof p, "%s/%s", dir, name);
	if (!(f = fopen(p, "w")) || fputs(text, f) < 0 || fclose(f) != 0) {
		printf("# cannot write %s\n", p);
		exit(2);
	}
}

/* A tree with etc/passwd and etc/group; etc/passwd reached through an
 * absolute symlink, resolved inside the tree. */
static void
make_tree(void)
{
	char *dir = tree, p[512];

	if (!mkdtemp(dir))
		exit(2);
	snprintf(p, sizeof p, "%s/etc", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/data", dir);
	mkdir(p, 0755);
	put(dir, "data/passwd", "root:x:0:0:root:/root:/bin/sh\n"
	    "app:x:1000:1001::/home/app:/bin/sh\n"
	    "nohome:x:1002:1002:::/bin/sh\n");
	snprintf(p, sizeof p, "%s/etc/passwd", dir);
	if (symlink("/data/passwd", p) < 0)
		exit(2);
	put(dir, "etc/group", "root:x:0:\napps:x:1001:\nstaff:x:50:app,x\n"
	    "wheel:x:10:root,app\nempty:x:60:\n");
	root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		exit(2);
}

static void
drop_tree(void)
{
	static const char *const files[] = {"etc/passwd", "etc/group",
	    "data/passwd"};
	char p[512];
	size_t i;

	for (i = 0; i < sizeof files / sizeof *files; i++) {
		snprintf(p, sizeof p, "%s/%s", tree, files[i]);
		unlink(p);
	}
	snprintf(p, sizeof p, "%s/etc", tree);
	rmdir(p);
	snprintf(p, sizeof p, "%s/data", tree);
	rmdir(p);
	rmdir(tree);
}

static int
as(const char *spec, uint32_t uid, uint32_t gid, uint32_t ngroups,
    const char *home)
{
	struct sbx_local_user u;
	struct sbx_err err = {0};

	if (sbx_local_user_resolve(root, spec, &u, &err) < 0) {
		printf("# '%s': %s\n", spec, err.msg);
		return 0;
	}
	if (u.set && u.uid == uid && u.gid == gid && u.ngroups == ngroups &&
	    !strcmp(u.home, home))
		return 1;
	printf("# '%s': %u %u %u %s\n", spec, u.uid, u.gid, u.ngroups, u.home);
	return 0;
}

static int
refused(const char *spec, const char *msg)
{
	struct sbx_local_user u;
	struct sbx_err err = {0};

	if (sbx_local_user_resolve(root, spec, &u, &err) == 0) {
		printf("# '%s' was taken\n", spec);
		return 0;
	}
	if (err.code == SBX_EX_USAGE && !strcmp(err.msg, msg))
		return 1;
	printf("# '%s': %d %s\n", spec, err.code, err.msg);
	return 0;
}

static void
t_numeric(void)
{
	make_tree();
	/* A uid the image knows takes its group; one it does not, 0. */
	CHECK(as("1000", 1000, 1001, 2, "/home/app"));
	CHECK(as("4321", 4321, 0, 0, "/"));
	CHECK(as("1000:1000", 1000, 1000, 2, "/home/app"));
	CHECK(as("4321:77", 4321, 77, 0, "/"));
	CHECK(as("0", 0, 0, 1, "/root"));
	drop_tree();
}

static void
t_names(void)
{
	make_tree();
	CHECK(as("app", 1000, 1001, 2, "/home/app"));
	CHECK(as("app:staff", 1000, 50, 2, "/home/app"));
	CHECK(as("app:50", 1000, 50, 2, "/home/app"));
	CHECK(as("4321:staff", 4321, 50, 0, "/"));
	CHECK(as("nohome", 1002, 1002, 0, "/"));
	drop_tree();
}

static void
t_refused(void)
{
	make_tree();
	CHECK(refused("nosuch", "no user 'nosuch' in the image's /etc/passwd"));
	CHECK(refused("app:nosuch",
	    "no group 'nosuch' in the image's /etc/group"));
	CHECK(refused(":50", "invalid user ':50' (want name, uid, name:group "
	    "or uid:gid)"));
	CHECK(refused("app:", "invalid user 'app:' (want name, uid, "
	    "name:group or uid:gid)"));
	CHECK(refused("99999999999", "no user '99999999999' in the image's "
	    "/etc/passwd"));
	drop_tree();
}

int
main(void)
{
	static const struct tap_test tests[] = {
		{"uids, uid:gid: the image's group for a uid it knows, else 0",
		    t_numeric},
		{"names and groups through the image's files, as it sees them",
		    t_names},
		{"unknown names and malformed users are refused", t_refused},
	};

	return tap_run(tests, sizeof tests / sizeof *tests);
}
