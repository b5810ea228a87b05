/* paths.c - where local sandboxes live, and finding one */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "local.h"

const char *
sbx_local_root(void)
{
	static char *root;

	if (!root)
		root = sbx_config_dir("local.dir", "local", 0);
	return root;
}

int
sbx_local_valid_id(const char *id)
{
	size_t i;

	for (i = 0; id[i]; i++)
		if (!isxdigit((unsigned char)id[i]) || isupper((unsigned char)id[i]))
			return 0;
	return i == SBX_ID_LEN;
}

char *
sbx_local_find(const char *id_or_name, char **id_out)
{
	char *dir, *link, target[64];
	ssize_t n;
	struct stat st;

	if (sbx_local_valid_id(id_or_name)) {
		dir = sbx_xasprintf("%s/%s", sbx_local_root(), id_or_name);
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (id_out)
				*id_out = sbx_xstrdup(id_or_name);
			return dir;
		}
		free(dir);
	}
	if (strchr(id_or_name, '/') || !*id_or_name || *id_or_name == '.')
		return NULL;
	/* Names are symlinks name -> id in the names directory. */
	link = sbx_xasprintf("%s/.names/%s", sbx_local_root(), id_or_name);
	n = readlink(link, target, sizeof target - 1);
	free(link);
	if (n <= 0)
		return NULL;
	target[n] = '\0';
	if (!sbx_local_valid_id(target))
		return NULL;
	dir = sbx_xasprintf("%s/%s", sbx_local_root(), target);
	if (stat(dir, &st) < 0) {
		free(dir);
		return NULL;
	}
	if (id_out)
		*id_out = sbx_xstrdup(target);
	return dir;
}

/* The directory and its socket must be ours: a state file that points
 * elsewhere must not get our stdio handed to someone else's socket. The
 * directory fd pins what was checked until the connect. */
int
sbx_local_connect(const char *dir)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd = -1, dfd, e;

	if ((dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	if (fstat(dfd, &st) < 0 || st.st_uid != geteuid() ||
	    fstatat(dfd, "sock", &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
		close(dfd);
		errno = ECONNREFUSED;
		return -1;
	}
	snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/sock", dfd);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
	    connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		e = errno;
		close(fd);
		errno = e;
		fd = -1;
	}
	e = errno;
	close(dfd);
	errno = e;
	return fd;
}

unsigned long long
sbx_local_starttime(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm may hold spaces and parens: fields count from the last ')'. */
	if (!(p = strrchr(buf, ')')))
		return 0;
	p += 2;
	if (*p == 'Z' || *p == 'X')
		return 0; /* a zombie is gone for our purposes */
	for (field = 3; field < 22 && p; field++)
		if ((p = strchr(p, ' ')))
			p++;
	if (p)
		t = strtoull(p, NULL, 10);
	return t;
}

int
sbx_local_lock(const char *dir, int exclusive)
{
	char *p = sbx_xasprintf("%s/.lock", dir);
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	free(p);
	while (fd >= 0 && flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0)
		if (errno != EINTR) {
			close(fd);
			fd = -1;
		}
	return fd;
}
