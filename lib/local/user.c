/* user.c - an image's User, or sbx-exec -u's (name, uid, name:group,
 * uid:gid), as docker reads it: names through the image's own (the
 * sandbox's own) /etc/passwd and /etc/group */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "local.h"

/* A uid or gid as docker takes one: decimal, below 2^31. */
static int
parse_id(const char *s, uint32_t *id)
{
	unsigned long v;
	char *end;

	if (!*s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (*end || errno || v > 0x7fffffffUL)
		return -1;
	*id = (uint32_t)v;
	return 0;
}

/* The image's file, resolved inside it as the sandbox will see it. */
static FILE *
open_in(int rootfd, const char *file)
{
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT};
	int fd = (int)syscall(SYS_openat2, rootfd, file, &how, sizeof how);
	FILE *f;

	if (fd < 0)
		return NULL;
	if (!(f = fdopen(fd, "re")))
		close(fd);
	return f;
}

/* A passwd entry by name (name != NULL) or by uid: 0 found, -1 not. */
static int
find_passwd(int rootfd, const char *name, uint32_t uid,
    struct sbx_local_user *u, char *uname, size_t unamesz)
{
	FILE *f = open_in(rootfd, "etc/passwd");
	struct passwd *pw;
	int rc = -1;

	while (f && rc < 0 && (pw = fgetpwent(f)))
		if (name ? !strcmp(pw->pw_name, name) : pw->pw_uid == uid) {
			u->uid = pw->pw_uid;
			u->gid = pw->pw_gid;
			snprintf(u->home, sizeof u->home, "%s", pw->pw_dir &&
			    *pw->pw_dir ? pw->pw_dir : "/");
			snprintf(uname, unamesz, "%s", pw->pw_name);
			rc = 0;
		}
	if (f)
		fclose(f);
	return rc;
}

/* The group spec names (a name or a gid) into *gid; with member, the
 * groups that list member into u's supplementary groups instead. */
static int
find_group(int rootfd, const char *spec, uint32_t *gid, const char *member,
    struct sbx_local_user *u)
{
	FILE *f = open_in(rootfd, "etc/group");
	struct group *gr;
	uint32_t id;
	size_t i;
	int rc = -1;

	while (f && (gr = fgetgrent(f))) {
		if (!member) {
			if (!strcmp(gr->gr_name, spec) || (parse_id(spec, &id) ==
			    0 && id == gr->gr_gid)) {
				*gid = gr->gr_gid;
				rc = 0;
				break;
			}
			continue;
		}
		rc = 0;
		for (i = 0; gr->gr_mem && gr->gr_mem[i]; i++)
			if (!strcmp(gr->gr_mem[i], member) &&
			    u->ngroups < SBX_LOCAL_NGROUPS)
				u->groups[u->ngroups++] = gr->gr_gid;
	}
	if (f)
		fclose(f);
	return rc;
}

/* whose: whose files the names were looked up in, for the message. */
static int
resolve(int rootfd, const char *spec, const char *whose,
    struct sbx_local_user *u, struct sbx_err *err)
{
	char *copy = sbx_xstrdup(spec), *user = copy, *group, uname[256] = "";
	int rc = -1;

	memset(u, 0, sizeof *u);
	snprintf(u->home, sizeof u->home, "/");
	if ((group = strchr(copy, ':')))
		*group++ = '\0';
	if (!*user || (group && !*group)) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid user '%s' (want name, "
		    "uid, name:group or uid:gid)", spec);
		goto out;
	}
	if (parse_id(user, &u->uid) == 0) {
		/* A uid the image need not know: group 0 unless it does. */
		find_passwd(rootfd, NULL, u->uid, u, uname, sizeof uname);
	} else if (find_passwd(rootfd, user, 0, u, uname, sizeof uname) < 0) {
		sbx_err_set(err, SBX_EX_USAGE, "no user '%s' in the %s's "
		    "/etc/passwd", user, whose);
		goto out;
	}
	if (group && find_group(rootfd, group, &u->gid, NULL, u) < 0 &&
	    parse_id(group, &u->gid) < 0) {
		sbx_err_set(err, SBX_EX_USAGE, "no group '%s' in the %s's "
		    "/etc/group", group, whose);
		goto out;
	}
	/* As docker: the groups that list the user by name, besides. */
	if (*uname)
		find_group(rootfd, NULL, NULL, uname, u);
	u->set = 1;
	rc = 0;
out:
	free(copy);
	return rc;
}

int
sbx_local_user_resolve(int rootfd, const char *spec,
    struct sbx_local_user *u, struct sbx_err *err)
{
	return resolve(rootfd, spec, "image", u, err);
}

int
sbx_local_user_lookup(const char *root, const char *spec,
    struct sbx_local_user *u, struct sbx_err *err)
{
	int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return sbx_err_set(err, SBX_EX_EXECFAIL, "cannot open '%s':",
		    root);
	rc = resolve(fd, spec, "sandbox", u, err);
	close(fd);
	return rc;
}

/* Copy the host's file (etc/passwd or etc/group) to path, line inserted
 * after its first (root's), unless an entry of the name is there. */
static int
copy_with(const char *from, const char *path, const char *name,
    const char *line, struct sbx_err *err)
{
	FILE *in = fopen(from, "re"), *out;
	char buf[4096];
	size_t n = strlen(name);
	int first = 1, have = 0;

	if (!in)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':", from);
	while (fgets(buf, sizeof buf, in))
		if (!strncmp(buf, name, n) && buf[n] == ':')
			have = 1;
	rewind(in);
	if (!(out = fopen(path, "we"))) {
		fclose(in);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':",
		    path);
	}
	while (fgets(buf, sizeof buf, in)) {
		fputs(buf, out);
		if (first && !have && strchr(buf, '\n'))
			fputs(line, out);
		first = first && !strchr(buf, '\n');
	}
	if (first && !have)
		fputs(line, out);
	fclose(in);
	if (fchmod(fileno(out), 0644) < 0 || fclose(out) == EOF)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot write '%s':", path);
	return 0;
}

int
sbx_local_host_accounts(const char *dir, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/passwd", dir), *q = sbx_xasprintf(
	    "%s/group", dir);
	int rc = copy_with("/etc/passwd", p, SBX_LOCAL_USER_NAME,
	    SBX_LOCAL_USER_NAME ":x:1000:1000::/home/" SBX_LOCAL_USER_NAME
	    ":/bin/sh\n", err);

	if (rc == 0)
		rc = copy_with("/etc/group", q, SBX_LOCAL_USER_NAME,
		    SBX_LOCAL_USER_NAME ":x:1000:\n", err);
	free(p);
	free(q);
	return rc;
}
