/* cgroup.c - limits on cgroup v1, v2 or the hybrid of both; kill, stats */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "local.h"

struct hier {
	char *mnt;     /* mount point */
	char ctrl[64]; /* v1 controllers ("memory"); "" for v2 */
};

static struct hier hiers[16];
static int nhiers = -1;

static void
discover(void)
{
	FILE *f;
	char *line = NULL, *sep, *fields[10], *s, *opt;
	size_t cap = 0;
	int i;

	nhiers = 0;
	if (!(f = fopen("/proc/self/mountinfo", "re")))
		return;
	while (getline(&line, &cap, f) > 0 && nhiers < 16) {
		/* id parent maj:min root mountpoint opts ... - fstype src sopts */
		if (!(sep = strstr(line, " - ")))
			continue;
		for (i = 0, s = line; i < 5 && s; i++) {
			fields[i] = s;
			if ((s = strchr(s, ' ')))
				*s++ = '\0';
		}
		if (i < 5)
			continue;
		s = sep + 3;
		fields[5] = strtok(s, " ");
		strtok(NULL, " ");
		fields[6] = strtok(NULL, " \n");
		if (!fields[5] || !fields[6])
			continue;
		if (!strcmp(fields[5], "cgroup2")) {
			hiers[nhiers].mnt = sbx_xstrdup(fields[4]);
			hiers[nhiers++].ctrl[0] = '\0';
		} else if (!strcmp(fields[5], "cgroup")) {
			char ctrl[64] = "";
			size_t len = 0;

			for (opt = strtok(fields[6], ","); opt;
			    opt = strtok(NULL, ","))
				if (!strcmp(opt, "memory") || !strcmp(opt, "pids")
				    || !strcmp(opt, "cpu") ||
				    !strcmp(opt, "cpuacct") ||
				    !strcmp(opt, "freezer"))
					len += (size_t)snprintf(ctrl + len,
					    sizeof ctrl - len, "%s%s",
					    len ? "," : "", opt);
			if (!*ctrl)
				continue;
			hiers[nhiers].mnt = sbx_xstrdup(fields[4]);
			memcpy(hiers[nhiers++].ctrl, ctrl, sizeof ctrl);
		}
	}
	free(line);
	fclose(f);
}

static int
have_v2(void)
{
	int i;

	for (i = 0; i < nhiers; i++)
		if (!hiers[i].ctrl[0] && geteuid() == 0)
			return 1;
	return 0;
}

static int
has_ctrl(const struct hier *h, const char *c)
{
	const char *p = h->ctrl;
	size_t n = strlen(c);

	while ((p = strstr(p, c))) {
		if ((p == h->ctrl || p[-1] == ',') && (!p[n] || p[n] == ','))
			return 1;
		p += n;
	}
	return 0;
}

static int
write_file(const char *dir, const char *file, const char *val)
{
	char *p = sbx_xasprintf("%s/%s", dir, file);
	int fd = open(p, O_WRONLY | O_CLOEXEC), rc = -1;
	size_t n = strlen(val);

	free(p);
	if (fd < 0)
		return -1;
	if (write(fd, val, n) == (ssize_t)n)
		rc = 0;
	close(fd);
	return rc;
}

long long
sbx_cg_read_ll(const char *dir, const char *file)
{
	char *p, buf[64];
	int fd;
	ssize_t n;

	if (!dir)
		return -1;
	p = sbx_xasprintf("%s/%s", dir, file);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	free(p);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return strtoll(buf, NULL, 10);
}

/* Our own cgroup in a v2 hierarchy, for running without root. */
static char *
own_v2_cgroup(const char *mnt)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char *line = NULL, *res = NULL;
	size_t cap = 0;

	if (!f)
		return NULL;
	while (getline(&line, &cap, f) > 0)
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = '\0';
			res = sbx_xasprintf("%s%s", mnt, line + 3);
		}
	free(line);
	fclose(f);
	return res;
}

static char *
base_dir(const struct hier *h)
{
	char *own, *b;

	if (geteuid() == 0)
		return sbx_xasprintf("%s/sbx", h->mnt);
	/* Unprivileged: only a delegated v2 subtree of our own is usable. */
	if (h->ctrl[0] || !(own = own_v2_cgroup(h->mnt)))
		return NULL;
	if (access(own, W_OK) < 0) {
		free(own);
		return NULL;
	}
	b = sbx_xasprintf("%s/sbx", own);
	free(own);
	return b;
}

static void
add_path(struct sbx_cgroups *cg, const struct hier *h, char *path)
{
	cg->paths[cg->n] = path;
	if (!h->ctrl[0])
		cg->unified = path;
	if (has_ctrl(h, "memory"))
		cg->memory = path;
	if (has_ctrl(h, "pids"))
		cg->pids = path;
	if (has_ctrl(h, "freezer"))
		cg->freezer = path;
	if (has_ctrl(h, "cpuacct"))
		cg->cpuacct = path;
	cg->n++;
}

/* In v2, controllers for the sandbox are enabled in its parent. */
static void
v2_enable(const char *base)
{
	char *p = sbx_xasprintf("%s/cgroup.controllers", base), buf[256];
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	free(p);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	if (strstr(buf, "memory"))
		write_file(base, "cgroup.subtree_control", "+memory");
	if (strstr(buf, "pids"))
		write_file(base, "cgroup.subtree_control", "+pids");
	if (strstr(buf, "cpu"))
		write_file(base, "cgroup.subtree_control", "+cpu");
}

static int
limit(const char *dir, const char *file, const char *val, const char *what,
    struct sbx_err *err)
{
	if (write_file(dir, file, val) < 0)
		return sbx_err_set(err, SBX_EX_FAIL,
		    "cannot set the %s limit in '%s':", what, dir);
	return 0;
}

/* A default limit with no cgroup to hold it (rootless, not delegated)
 * is left out and said; one asked for (--flag) is refused. */
static int
no_cgroup(struct sbx_spec *spec, unsigned cap, uint64_t *field,
    const char *flag, const char *ctrl, struct sbx_err *err)
{
	if (!(spec->limits_default & cap))
		return sbx_err_set(err, SBX_EX_USAGE,
		    "--%s needs a writable %s cgroup", flag, ctrl);
	sbx_note("no writable %s cgroup%s: the default %s limit is not "
	    "applied", ctrl, geteuid() ? " (rootless, not delegated)" : "",
	    ctrl);
	*field = 0;
	spec->limits_default &= ~cap;
	return 0;
}

static void rmdir_children(const char *dir);

/* A sandbox's cgroup made; one left by a stop killed before it removed
 * it is taken again, once empty (rmdir refuses a cgroup with processes
 * in it, so a live sandbox's is never taken). */
static int
cg_mkdir(const char *dir)
{
	if (mkdir(dir, 0755) == 0)
		return 0;
	if (errno != EEXIST)
		return -1;
	rmdir_children(dir);
	if (rmdir(dir) < 0) {
		errno = EEXIST;
		return -1;
	}
	return mkdir(dir, 0755);
}

int
sbx_cg_create(struct sbx_cgroups *cg, const char *id, struct sbx_spec *spec,
    struct sbx_err *err)
{
	char val[64], *base, *dir;
	int i, v2mem = 0, v2pids = 0, v2cpu = 0;

	memset(cg, 0, sizeof *cg);
	if (nhiers < 0)
		discover();
	for (i = 0; i < nhiers && cg->n < 8; i++) {
		struct hier *h = &hiers[i];

		/* A cpu-only hierarchy is used only for a cpu limit, the
		 * v1 freezer and cpuacct only where v2 cannot freeze and
		 * account (v2's cpu.stat works without controllers). */
		if ((!strcmp(h->ctrl, "cpu") && !spec->cpus_milli) ||
		    (!strcmp(h->ctrl, "freezer") && have_v2()) ||
		    (!strcmp(h->ctrl, "cpuacct") && have_v2()))
			continue;
		if (!(base = base_dir(h)))
			continue;
		if (access(base, F_OK) < 0 && mkdir(base, 0755) < 0 &&
		    errno != EEXIST) {
			free(base);
			continue;
		}
		if (!h->ctrl[0])
			v2_enable(base);
		dir = sbx_xasprintf("%s/%s", base, id);
		free(base);
		if (cg_mkdir(dir) < 0) {
			sbx_err_set(err, SBX_EX_FAIL,
			    "cannot create cgroup '%s':", dir);
			free(dir);
			sbx_cg_remove(cg);
			sbx_cg_release(cg);
			return -1;
		}
		add_path(cg, h, dir);
	}
	if (cg->unified) {
		char *p = sbx_xasprintf("%s/memory.max", cg->unified);

		v2mem = access(p, F_OK) == 0;
		free(p);
		p = sbx_xasprintf("%s/pids.max", cg->unified);
		v2pids = access(p, F_OK) == 0;
		free(p);
		p = sbx_xasprintf("%s/cpu.max", cg->unified);
		v2cpu = access(p, F_OK) == 0;
		free(p);
	}
	if (spec->memory) {
		snprintf(val, sizeof val, "%llu",
		    (unsigned long long)spec->memory);
		if (cg->memory && cg->memory != cg->unified) {
			if (limit(cg->memory, "memory.limit_in_bytes", val,
			    "memory", err) < 0)
				goto fail;
			/* Where swap is accounted, swap may not add to it. */
			write_file(cg->memory, "memory.memsw.limit_in_bytes", val);
		} else if (v2mem) {
			if (limit(cg->unified, "memory.max", val, "memory",
			    err) < 0)
				goto fail;
			write_file(cg->unified, "memory.swap.max", "0");
		} else if (no_cgroup(spec, SBX_CAP_MEMORY, &spec->memory,
		    "memory", "memory", err) < 0) {
			goto fail;
		}
	}
	if (spec->pids) {
		snprintf(val, sizeof val, "%llu", (unsigned long long)spec->pids);
		if (cg->pids && cg->pids != cg->unified) {
			if (limit(cg->pids, "pids.max", val, "pids", err) < 0)
				goto fail;
		} else if (v2pids) {
			if (limit(cg->unified, "pids.max", val, "pids", err) < 0)
				goto fail;
		} else if (no_cgroup(spec, SBX_CAP_PIDS, &spec->pids, "pids",
		    "pids", err) < 0) {
			goto fail;
		}
	}
	if (spec->cpus_milli) {
		unsigned long long quota = spec->cpus_milli * 100;
		const char *cpu = NULL;

		for (i = 0; i < nhiers; i++)
			if (has_ctrl(&hiers[i], "cpu"))
				cpu = hiers[i].mnt;
		if (cpu && geteuid() == 0) {
			dir = sbx_xasprintf("%s/sbx/%s", cpu, id);
			for (i = 0; i < cg->n; i++)
				if (!strcmp(cg->paths[i], dir))
					break;
			snprintf(val, sizeof val, "%llu", quota);
			if (write_file(dir, "cpu.cfs_period_us", "100000") < 0 ||
			    write_file(dir, "cpu.cfs_quota_us", val) < 0) {
				sbx_err_set(err, SBX_EX_FAIL,
				    "cannot set the cpu limit in '%s':", dir);
				free(dir);
				goto fail;
			}
			free(dir);
		} else if (v2cpu) {
			snprintf(val, sizeof val, "%llu 100000", quota);
			if (limit(cg->unified, "cpu.max", val, "cpu", err) < 0)
				goto fail;
		} else if (no_cgroup(spec, SBX_CAP_CPUS, &spec->cpus_milli,
		    "cpus", "cpu", err) < 0) {
			goto fail;
		}
	}
	return 0;
fail:
	sbx_cg_remove(cg);
	sbx_cg_release(cg);
	return -1;
}

void
sbx_cg_find(struct sbx_cgroups *cg, const char *id)
{
	char *base, *dir;
	struct stat st;
	int i;

	memset(cg, 0, sizeof *cg);
	if (nhiers < 0)
		discover();
	for (i = 0; i < nhiers && cg->n < 8; i++) {
		if (!(base = base_dir(&hiers[i])))
			continue;
		dir = sbx_xasprintf("%s/%s", base, id);
		free(base);
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
			add_path(cg, &hiers[i], dir);
		else
			free(dir);
	}
}

int
sbx_cg_join_open(const struct sbx_cgroups *cg, int *fds, int *v2,
    struct sbx_err *err)
{
	char *p;
	int i;

	*v2 = -1;
	for (i = 0; i < cg->n; i++) {
		if (cg->paths[i] == cg->unified)
			*v2 = i;
		p = sbx_xasprintf("%s/%s", cg->paths[i], cg->paths[i] ==
		    cg->unified ? "cgroup.procs" : "tasks");
		fds[i] = open(p, O_WRONLY | O_CLOEXEC);
		free(p);
		if (fds[i] < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot join cgroup "
			    "'%s':", cg->paths[i]);
			while (i-- > 0)
				close(fds[i]);
			return -1;
		}
	}
	return cg->n;
}

int
sbx_cg_join(int *fds, int n, int skip)
{
	int i, rc = 0;

	for (i = 0; i < n; i++) {
		if (rc == 0 && i != skip && write(fds[i], "0", 1) != 1)
			rc = -1;
		close(fds[i]);
		fds[i] = -1;
	}
	return rc;
}

static int
populated(const struct sbx_cgroups *cg)
{
	char *p, buf[256];
	int fd;
	ssize_t n;

	if (cg->unified) {
		p = sbx_xasprintf("%s/cgroup.events", cg->unified);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		free(p);
		if (fd < 0)
			return 0;
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
		buf[n > 0 ? n : 0] = '\0';
		return strstr(buf, "populated 1") != NULL;
	}
	if (cg->pids)
		return sbx_cg_read_ll(cg->pids, "pids.current") > 0;
	return 0;
}

static void
kill_listed(const char *dir)
{
	char *p = sbx_xasprintf("%s/cgroup.procs", dir), *line = NULL;
	size_t cap = 0;
	FILE *f = fopen(p, "re");

	free(p);
	if (!f)
		return;
	while (getline(&line, &cap, f) > 0)
		kill((pid_t)strtol(line, NULL, 10), SIGKILL);
	free(line);
	fclose(f);
}

int
sbx_cg_kill_start(const struct sbx_cgroups *cg)
{
	return cg->unified ? write_file(cg->unified, "cgroup.kill", "1") : -1;
}

int
sbx_cg_kill(const struct sbx_cgroups *cg, int ms)
{
	struct timespec ts = {0, 2 * 1000 * 1000};
	int i, waited = 0;

	if (!cg->n)
		return 0;
	if (!cg->unified || write_file(cg->unified, "cgroup.kill", "1") < 0) {
		/* v1: freeze so nothing forks while we kill, then thaw. */
		if (cg->freezer)
			write_file(cg->freezer, "freezer.state", "FROZEN");
		for (i = 0; i < cg->n; i++)
			kill_listed(cg->paths[i]);
		if (cg->freezer)
			write_file(cg->freezer, "freezer.state", "THAWED");
	}
	/* v2 signals a change of cgroup.events with POLLPRI: no sleeping.
	 * Reading the file through the polled fd re-arms it. */
	if (cg->unified) {
		char *p = sbx_xasprintf("%s/cgroup.events", cg->unified);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		struct pollfd pf = {fd, POLLPRI, 0};
		struct timespec t0, t1;
		char buf[256];
		ssize_t n;

		free(p);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (fd >= 0 && waited < ms) {
			n = pread(fd, buf, sizeof buf - 1, 0);
			buf[n > 0 ? n : 0] = '\0';
			if (n <= 0 || !strstr(buf, "populated 1"))
				break;
			poll(&pf, 1, ms - waited);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			waited = (int)((t1.tv_sec - t0.tv_sec) * 1000 +
			    (t1.tv_nsec - t0.tv_nsec) / 1000000);
		}
		if (fd >= 0)
			close(fd);
	}
	while (populated(cg) && waited < ms) {
		nanosleep(&ts, NULL);
		waited += 2;
	}
	return populated(cg) ? -1 : 0;
}

/* Per-exec children (x<pid>) that outlived their exec. */
static void
rmdir_children(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char *p;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_type == DT_DIR && e->d_name[0] == 'x') {
			p = sbx_xasprintf("%s/%s", dir, e->d_name);
			rmdir(p);
			free(p);
		}
	closedir(d);
}

int
sbx_cg_remove(const struct sbx_cgroups *cg)
{
	int i, rc = 0;

	/* Its children listed only when it has some (EBUSY): a listing of
	 * a cgroup's directory is ~0.1 ms of a kill's CPU. */
	for (i = 0; i < cg->n; i++) {
		if (rmdir(cg->paths[i]) == 0 || errno == ENOENT)
			continue;
		rmdir_children(cg->paths[i]);
		if (rmdir(cg->paths[i]) < 0 && errno != ENOENT)
			rc = -1;
	}
	return rc;
}

void
sbx_cg_release(struct sbx_cgroups *cg)
{
	int i;

	for (i = 0; i < cg->n; i++)
		free(cg->paths[i]);
	memset(cg, 0, sizeof *cg);
}

char *
sbx_cg_exec_new(const struct sbx_cgroups *cg, int *procs_fd, int *kill_fd)
{
	char *dir, *p;

	*procs_fd = *kill_fd = -1;
	if (!cg->unified)
		return NULL;
	/* Earlier timed execs whose cgroups emptied since. */
	rmdir_children(cg->unified);
	dir = sbx_xasprintf("%s/x%d", cg->unified, (int)getpid());
	if (mkdir(dir, 0755) < 0) {
		free(dir);
		return NULL;
	}
	p = sbx_xasprintf("%s/cgroup.procs", dir);
	*procs_fd = open(p, O_WRONLY | O_CLOEXEC);
	free(p);
	p = sbx_xasprintf("%s/cgroup.kill", dir);
	*kill_fd = open(p, O_WRONLY | O_CLOEXEC);
	free(p);
	if (*procs_fd < 0 || *kill_fd < 0) {
		if (*procs_fd >= 0)
			close(*procs_fd);
		if (*kill_fd >= 0)
			close(*kill_fd);
		*procs_fd = *kill_fd = -1;
		rmdir(dir);
		free(dir);
		return NULL;
	}
	return dir;
}

void
sbx_cg_exec_free(char *dir, int killed)
{
	struct timespec ts = {0, 1000 * 1000};
	char *p;
	char buf[128];
	int i, fd;
	ssize_t n;

	if (!dir)
		return;
	/* Killed processes may still be dying: wait a moment for them.
	 * Background processes that outlive their exec keep it. */
	p = sbx_xasprintf("%s/cgroup.events", dir);
	for (i = 0; killed && i < 500; i++) {
		if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
			break;
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
		buf[n > 0 ? n : 0] = '\0';
		if (!strstr(buf, "populated 1"))
			break;
		nanosleep(&ts, NULL);
	}
	free(p);
	rmdir(dir);
	free(dir);
}

/* v2: cgroup.freeze, and cgroup.events says when it is done (POLLPRI);
 * v1: freezer.state, read back until it says so. */
int
sbx_cg_freeze(const struct sbx_cgroups *cg, int on, int ms)
{
	struct timespec ts = {0, 1000 * 1000};
	char buf[256], *p;
	int fd, waited = 0;
	ssize_t n;

	if (cg->unified) {
		if (write_file(cg->unified, "cgroup.freeze", on ? "1" : "0") < 0)
			return -1;
		p = sbx_xasprintf("%s/cgroup.events", cg->unified);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		free(p);
		if (fd < 0)
			return -1;
		for (;;) {
			struct pollfd pf = {fd, POLLPRI, 0};

			n = pread(fd, buf, sizeof buf - 1, 0);
			buf[n > 0 ? n : 0] = '\0';
			if (n <= 0 || strstr(buf, on ? "frozen 1" : "frozen 0"))
				break;
			if (waited >= ms) {
				close(fd);
				return -1;
			}
			poll(&pf, 1, 10);
			waited += 10;
		}
		close(fd);
		return 0;
	}
	if (!cg->freezer || write_file(cg->freezer, "freezer.state", on ?
	    "FROZEN" : "THAWED") < 0)
		return -1;
	for (;;) {
		p = sbx_xasprintf("%s/freezer.state", cg->freezer);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		free(p);
		n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
		if (fd >= 0)
			close(fd);
		buf[n > 0 ? n : 0] = '\0';
		if (!strncmp(buf, on ? "FROZEN" : "THAWED", 6))
			return 0;
		if (waited >= ms)
			return -1;
		nanosleep(&ts, NULL);
		waited++;
	}
}

int
sbx_cg_sweep(int (*mine)(const char *name), long long before)
{
	struct sbx_cgroups cg;
	struct dirent *e;
	struct stat st;
	json_t *names = json_object();
	const char *name;
	char *base;
	void *tmp;
	DIR *d;
	int i, n = 0, keep;
	json_t *v;

	if (nhiers < 0)
		discover();
	for (i = 0; i < nhiers; i++) {
		if (!(base = base_dir(&hiers[i])))
			continue;
		if ((d = opendir(base))) {
			while ((e = readdir(d)))
				if (e->d_type == DT_DIR && mine(e->d_name))
					json_object_set_new(names, e->d_name,
					    json_true());
			closedir(d);
		}
		free(base);
	}
	json_object_foreach_safe(names, tmp, name, v) {
		sbx_cg_find(&cg, name);
		/* With a process, or made (or given a per-exec child)
		 * within the age of a create: a sandbox's, at work (and
		 * rmdir refuses a cgroup with a process in it anyway). */
		keep = !cg.n || populated(&cg);
		for (i = 0; i < cg.n && !keep; i++)
			keep = stat(cg.paths[i], &st) < 0 ||
			    st.st_mtime >= before - SBX_CG_SWEEP_AGE;
		if (!keep && sbx_cg_remove(&cg) == 0)
			n++;
		sbx_cg_release(&cg);
	}
	json_decref(names);
	return n;
}
