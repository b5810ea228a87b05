/* vm.c - the qemu backend: a sandbox is a microVM (qemu.h) */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image/image.h"
#include "qemu.h"

#define START_MS_DEFAULT 120000
#define MEMORY_MIN (64ull << 20)
#define KILL_WAIT_MS 3000
/* QEMU's own memory beside the guest's: its code, its devices' buffers,
 * TCG's code cache. */
#define QEMU_OVERHEAD (256ull << 20)
#define STOP_WAIT_MS 40000 /* the keeper's own deadline (STOP_MS), and some */

const char *
sbx_qemu_root(void)
{
	static char *root;

	if (!root)
		root = sbx_config_dir("qemu.dir", "qemu", 0);
	return root;
}

/* The QEMU to run: qemu.binary, looked for in PATH when it names no
 * directory; a relative path is the current directory's (the keeper
 * starts QEMU in the sandbox's directory). */
static const char *
qemu_binary(void)
{
	static char *bin;
	const char *v = sbx_config_get("qemu.binary", NULL);

	if (!bin)
		bin = v && *v && strchr(v, '/') ? sbx_abs_path(v) :
		    sbx_xstrdup(v && *v ? v : "qemu-system-x86_64");
	return bin;
}

const char *
sbx_qemu_guest_dir(void)
{
	static char *dir;
	const char *v = sbx_config_get("qemu.guest", NULL), *c, *h;

	if (dir)
		return dir;
	/* Relative: the current directory's, as QEMU (started in the
	 * sandbox's directory) and a later command must find it. */
	if (v && *v)
		dir = sbx_abs_path(v);
	else if ((c = getenv("XDG_CACHE_HOME")) && *c == '/')
		dir = sbx_xasprintf("%s/sbx/qemu", c);
	else
		dir = sbx_xasprintf("%s/.cache/sbx/qemu",
		    (h = getenv("HOME")) ? h : "/root");
	return dir;
}

/* "PID STARTTIME" of the keeper, then of QEMU, in dir/keeper.pid (of
 * sbx-create in dir/creator.pid): each pid when that process is still
 * the one. */
static void
pids_in(const char *dir, const char *file, pid_t *keeper, pid_t *qemu)
{
	char *p = sbx_xasprintf("%s/%s", dir, file), buf[128];
	unsigned long long ks = 0, qs = 0;
	int kp = 0, qp = 0, fd;
	ssize_t n = -1;

	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
	}
	free(p);
	*keeper = 0;
	if (qemu)
		*qemu = 0;
	if (n <= 0)
		return;
	buf[n] = '\0';
	if (sscanf(buf, "%d %llu %d %llu", &kp, &ks, &qp, &qs) < (qemu ? 4 : 2))
		return;
	if (kp > 0 && ks && sbx_local_starttime(kp) == ks)
		*keeper = kp;
	if (qemu && qp > 0 && qs && sbx_local_starttime(qp) == qs)
		*qemu = qp;
}

void
sbx_qemu_pids(const char *dir, pid_t *keeper, pid_t *qemu)
{
	pids_in(dir, "keeper.pid", keeper, qemu);
}

void
sbx_qemu_console_tail(const char *dir, char *buf, size_t n)
{
	char *p = sbx_xasprintf("%s/console.log", dir), data[4096], *s, *e;
	const char *name[] = {"console.log", "qemu.log"};
	size_t i, k = 0;
	ssize_t r;
	off_t sz;
	int fd, lines;

	buf[0] = '\0';
	for (i = 0; i < 2; i++) {
		free(p);
		p = sbx_xasprintf("%s/%s", dir, name[i]);
		if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		sz = lseek(fd, 0, SEEK_END);
		r = pread(fd, data, sizeof data - 1, sz > (off_t)sizeof data - 1 ?
		    sz - (off_t)sizeof data + 1 : 0);
		close(fd);
		if (r <= 0)
			continue;
		data[r] = '\0';
		/* Its last 3 lines, on one line each joined by " | ". */
		e = data + r;
		while (e > data && (e[-1] == '\n' || e[-1] == '\r'))
			*--e = '\0';
		for (s = e, lines = 0; s > data && lines < 3; s--)
			if (s[-1] == '\n' && ++lines == 3)
				break;
		for (char *c = s; *c; c++)
			if (*c == '\n' || *c == '\r' || (unsigned char)*c < ' ')
				*c = *c == '\n' ? '|' : ' ';
		k += (size_t)snprintf(buf + k, k < n ? n - k : 0, "; %s: %s",
		    i ? "QEMU said" : "its console ended with", s);
		if (k >= n)
			break;
	}
	if (!k)
		snprintf(buf, n, "; its console is empty");
	free(p);
}

/* --- the disk ---------------------------------------------------------- */

static unsigned long long tree_bytes;

static int
add_blocks(const char *path, const struct stat *sb, int type, struct FTW *f)
{
	(void)path;
	(void)f;
	if (type != FTW_NS)
		tree_bytes += (unsigned long long)sb->st_blocks * 512;
	return 0;
}

/* name, found in PATH (or a path): 0, else -1; sbin too, where
 * mkfs.ext4 is and a user's PATH on Debian does not look. */
static int
in_path(const char *name, char *buf, size_t n)
{
	const char *path = getenv("PATH"), *s, *e;
	int pass;

	if (strchr(name, '/')) {
		snprintf(buf, n, "%s", name);
		return access(name, X_OK);
	}
	for (pass = 0; pass < 2; pass++) {
		s = pass ? "/usr/sbin:/sbin" : path ? path : "/usr/bin:/bin";
		for (; *s; s = *e ? e + 1 : e) {
			e = strchrnul(s, ':');
			snprintf(buf, n, "%.*s/%s", (int)(e - s), s, name);
			if (access(buf, X_OK) == 0)
				return 0;
		}
	}
	return -1;
}

int
sbx_qemu_run_tool(char *const argv[], struct sbx_err *err)
{
	char buf[2048], *nl;
	size_t len = 0;
	ssize_t n;
	pid_t pid;
	int p[2], st;

	if (pipe2(p, O_CLOEXEC) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot run %s:", argv[0]);
	if ((pid = fork()) == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		dup2(p[1], 2);
		execvp(argv[0], argv);
		dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	while ((n = read(p[0], buf + len, sizeof buf - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
		if (len == sizeof buf - 1)
			len = 0; /* the end is what counts */
	}
	close(p[0]);
	buf[len] = '\0';
	if (pid < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot run %s:", argv[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && !WEXITSTATUS(st))
		return 0;
	while (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	nl = strrchr(buf, '\n');
	return sbx_err_set(err, SBX_EX_FAIL, "%s failed: %s", argv[0],
	    nl ? nl + 1 : len ? buf : "(it said nothing)");
}

/* rootfs as an ext4 image at path, with room to write beside it. */
static int
make_ext4(const char *rootfs, const char *path, struct sbx_err *err)
{
	char *tmp = sbx_xasprintf("%s.%d.tmp", path, (int)getpid());
	char size[32];
	int rc;

	tree_bytes = 0;
	if (nftw(rootfs, add_blocks, 32, FTW_PHYS) < 0) {
		free(tmp);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read image '%s':",
		    rootfs);
	}
	/* Sparse: the room costs nothing until written. */
	snprintf(size, sizeof size, "%lluM", (tree_bytes + tree_bytes / 4 +
	    (1ull << 30)) >> 20);
	{
		char mkfs[4096], *argv[] = {mkfs, "-q", "-F", "-L", "sbx", "-E",
		    "root_owner=0:0", "-d", (char *)rootfs, tmp, size, NULL};

		if (in_path("mkfs.ext4", mkfs, sizeof mkfs) < 0)
			snprintf(mkfs, sizeof mkfs, "mkfs.ext4");
		rc = sbx_qemu_run_tool(argv, err);
	}
	if (rc == 0 && rename(tmp, path) < 0)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot write '%s':", path);
	if (rc < 0)
		unlink(tmp);
	free(tmp);
	return rc;
}

int
sbx_qemu_disk(const char *rootfs, const char *digest, const char *dir,
    struct sbx_err *err)
{
	char *base, *disks = NULL, *over = sbx_xasprintf("%s/disk.qcow2", dir);
	const char *hex = digest ? strchr(digest, ':') : NULL;
	struct stat st;
	int rc = 0;

	if (digest) {
		disks = sbx_xasprintf("%s/disks", sbx_qemu_guest_dir());
		base = sbx_xasprintf("%s/%s.ext4", disks, hex ? hex + 1 :
		    digest);
		if (stat(base, &st) < 0 && (sbx_mkdirs(disks, 0700, err) < 0 ||
		    make_ext4(rootfs, base, err) < 0))
			rc = -1;
	} else {
		base = sbx_xasprintf("%s/base.ext4", dir);
		rc = make_ext4(rootfs, base, err);
	}
	if (rc == 0) {
		char *argv[] = {"qemu-img", "create", "-q", "-f", "qcow2", "-F",
		    "raw", "-b", base, over, NULL};

		rc = sbx_qemu_run_tool(argv, err);
	}
	free(disks);
	free(base);
	free(over);
	return rc;
}

/* --- the disks' cache (sbx-image rm and prune) ----------------------- */

/* Add the image digests of root's entries (valid says which) to used. */
static void
digests_in(const char *root, int (*valid)(const char *), json_t *used)
{
	json_t *meta;
	struct dirent *e;
	const char *dg;
	char *p;
	DIR *d = opendir(root);

	while (d && (e = readdir(d))) {
		if (!valid(e->d_name))
			continue;
		p = sbx_xasprintf("%s/%s", root, e->d_name);
		meta = sbx_local_meta(p);
		free(p);
		if ((dg = sbx_json_str(meta, "image_digest")))
			json_object_set_new(used, dg, json_true());
		json_decref(meta);
	}
	if (d)
		closedir(d);
}

/* The image digests qemu sandboxes stand on (their meta.json), running,
 * ended or kept, and their snapshots: a disk.qcow2 needs its image's
 * disk as long as it is. */
static json_t *
disks_in_use(void)
{
	json_t *used = json_object();

	digests_in(sbx_qemu_root(), sbx_local_valid_id, used);
	digests_in(sbx_qemu_snap_root(), sbx_snap_valid_id, used);
	return used;
}

int
sbx_qemu_disks_prune(const json_t *keep, long long *freed, int *n,
    struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/disks", sbx_qemu_guest_dir()), key[300];
	json_t *used;
	struct dirent *e;
	struct stat st;
	const char *dot;
	long pid;
	DIR *d;
	int dfd, rc = 0;

	if (!(d = opendir(p))) {
		free(p);
		return 0;
	}
	used = disks_in_use();
	dfd = dirfd(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !(dot = strchr(e->d_name, '.')))
			continue;
		if (!strcmp(dot, ".ext4")) {
			snprintf(key, sizeof key, "sha256:%.*s",
			    (int)(dot - e->d_name), e->d_name);
			if (json_object_get(keep, key) ||
			    json_object_get(used, key))
				continue;
		} else if (!strncmp(dot, ".ext4.", 6)) {
			/* HEX.ext4.PID.tmp: a create's, while it lives. */
			pid = strtol(dot + 6, NULL, 10);
			if (pid > 0 && (kill((pid_t)pid, 0) == 0 ||
			    errno == EPERM))
				continue;
		} else
			continue;
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (unlinkat(dfd, e->d_name, 0) < 0 && errno != ENOENT) {
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot remove "
			    "'%s/%s':", p, e->d_name);
			continue;
		}
		*freed += (long long)st.st_blocks * 512;
		(*n)++;
	}
	closedir(d);
	json_decref(used);
	free(p);
	return rc;
}

/* --- create ------------------------------------------------------------ */

/* What the guest needs on this host: QEMU, its kernel and initramfs,
 * KVM when asked for. */
static int
check_host(const char *qemu, const char *accel, struct sbx_err *err)
{
	const char *g = sbx_qemu_guest_dir();
	char *k = sbx_xasprintf("%s/vmlinux", g);
	char *i = sbx_xasprintf("%s/initrd.img", g), buf[4096];
	int rc = 0, fd;

	if (in_path(qemu, buf, sizeof buf) < 0)
		rc = sbx_err_set(err, SBX_EX_FAIL, "QEMU is not installed (no "
		    "'%s'; scripts/install-deps installs it)", qemu);
	else if (in_path("qemu-img", buf, sizeof buf) < 0 ||
	    in_path("mkfs.ext4", buf, sizeof buf) < 0)
		rc = sbx_err_set(err, SBX_EX_FAIL, "qemu-img or mkfs.ext4 is "
		    "not installed (scripts/install-deps installs them)");
	else if (access(k, R_OK) < 0 || access(i, R_OK) < 0)
		rc = sbx_err_set(err, SBX_EX_FAIL, "no guest kernel in '%s' "
		    "(scripts/qemu-guest -d '%s' makes one)", g, g);
	else if (strcmp(accel, "tcg") && strcmp(accel, "kvm"))
		rc = sbx_err_set(err, SBX_EX_USAGE, "invalid qemu.accel '%s' "
		    "(want tcg or kvm)", accel);
	else if (!strcmp(accel, "kvm")) {
		if ((fd = open("/dev/kvm", O_RDWR | O_CLOEXEC)) < 0)
			rc = sbx_err_set(err, SBX_EX_FAIL, "KVM refused: "
			    "/dev/kvm:");
		else
			close(fd);
	}
	free(k);
	free(i);
	return rc;
}

static void
add(char ***v, size_t *n, const char *s)
{
	*v = sbx_xrealloc(*v, (*n + 2) * sizeof **v);
	(*v)[(*n)++] = sbx_xstrdup(s);
	(*v)[*n] = NULL;
}

static void
free_strv(char **v)
{
	size_t i;

	for (i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* The VM's vCPUs: under TCG one (-icount runs every vCPU on one host
 * thread anyway, and a second one hangs the kernel's SMP bring-up
 * there), else --cpus rounded up. */
static unsigned
vcpus(const char *accel, uint64_t cpus_milli)
{
	if (!strcmp(accel, "tcg") || !cpus_milli)
		return 1;
	return (unsigned)((cpus_milli + 999) / 1000);
}

static char **
qemu_argv(const char *qemu, const char *accel, uint64_t memory,
    uint64_t cpus_milli, int net, const json_t *fwd, const char *hostname)
{
	const char *g = sbx_qemu_guest_dir();
	char **v = NULL, buf[4200];
	size_t n = 0;
	int tcg = !strcmp(accel, "tcg"), i;

	add(&v, &n, qemu);
	add(&v, &n, "-M");
	add(&v, &n, "microvm,pit=on,pic=on,rtc=on,pcie=on");
	add(&v, &n, "-accel");
	/* TCG's translated code in 16 MiB, not 1 GiB: what a boot leaves
	 * there (~50 MiB, most of it run once) stays resident for the VM's
	 * life otherwise. An exec's hot code (the kernel's and the
	 * command's) fits in it: at 8 MiB an exec of true retranslated its
	 * code each time (~10x slower), at 16 MiB it ran as at 32, and a
	 * busybox workload of tar, gzip, find and ls -R took ~6% more CPU
	 * (scripts/bench/qemu; the VM's RSS 16 MiB less). */
	add(&v, &n, tcg ? "tcg,tb-size=16" : accel);
	if (tcg) {
		/* The guest's clock counts its instructions: without it, on
		 * a loaded host, its timer calibration hangs (qemu-guest.bats).
		 * A fixed rate (4 ns an instruction): shift=auto's adjustment
		 * served an idle guest's timers only at its once-a-second
		 * tick, so an exec took ~1 s and a sleep 0.1 ~2 s. */
		add(&v, &n, "-icount");
		add(&v, &n, "shift=2");
	}
	add(&v, &n, "-cpu");
	/* Without ERMS the guest's kernel and libc copy and clear memory
	 * by rep movsq/stosq, or by loops, not rep movsb/stosb: TCG runs a
	 * rep string instruction an iteration at a time, each a byte with
	 * ERMS (a page cleared: 4096 of them). */
	add(&v, &n, tcg ? "max,-erms" : "host");
	add(&v, &n, "-m");
	snprintf(buf, sizeof buf, "%lluM", (unsigned long long)(memory >> 20));
	add(&v, &n, buf);
	add(&v, &n, "-smp");
	snprintf(buf, sizeof buf, "%u", vcpus(accel, cpus_milli));
	add(&v, &n, buf);
	/* Its threads named: a vCPU's is "CPU 0/TCG" (or /KVM). */
	add(&v, &n, "-name");
	add(&v, &n, "sbx,debug-threads=on");
	add(&v, &n, "-nodefaults");
	add(&v, &n, "-no-user-config");
	add(&v, &n, "-nographic");
	add(&v, &n, "-no-reboot");
	add(&v, &n, "-serial");
	add(&v, &n, "file:console.log");
	add(&v, &n, "-monitor");
	add(&v, &n, "none");
	add(&v, &n, "-qmp");
	add(&v, &n, "unix:qmp.sock,server=on,wait=off");
	/* The kernel uncompressed, booted at its PVH entry: the guest does
	 * not unpack it itself, slowly under TCG. */
	add(&v, &n, "-kernel");
	snprintf(buf, sizeof buf, "%s/vmlinux", g);
	add(&v, &n, buf);
	add(&v, &n, "-initrd");
	snprintf(buf, sizeof buf, "%s/initrd.img", g);
	add(&v, &n, buf);
	add(&v, &n, "-append");
	/* The hostname: a sandbox's name or id, which have no spaces. No
	 * self-tests of the kernel's crypto algorithms at boot: under TCG
	 * they took ~3 s of the guest's clock (initcall_debug).
	 * No tracefs files: its ~11000 inodes and dentries of the trace
	 * events took 9 MiB of the guest's memory, resident in QEMU. No
	 * memory cgroup controller (the VM's size is its limit; the agent's
	 * cgroups are for kills): its charge of each page cost ~9% of an
	 * exec of true, its per-cpu accounting array 4 MiB. Under TCG, none
	 * of the guest's Spectre mitigations (retpolines do not stop what
	 * does not speculate: TCG's code is the host's), no zeroing of the
	 * kernel's allocations, and of the LSMs only landlock and yama
	 * (nothing loads an AppArmor policy in the VM): ~6% of an exec, in
	 * the guest's instructions. And a page fault maps its page alone,
	 * not the 64 KiB around it (guest.c: fault_around). */
	snprintf(buf, sizeof buf, "console=ttyS0 quiet panic=-1 "
	    "cryptomgr.notests=1 initcall_blacklist=tracer_init_tracefs "
	    "cgroup_disable=memory cgroup.memory=nokmem%s sbx.hostname=%s "
	    "sbx.ports=%d", tcg ? " mitigations=off init_on_alloc=0 "
	    "lsm=landlock,yama sbx.fault_around=4096" : "", hostname,
	    SBX_GUEST_PORTS);
	add(&v, &n, buf);
	/* The ports' device on PCI, the disk and NIC on virtio-mmio: the
	 * guest gives each port's queue a 4 KiB buffer per entry, and
	 * virtio-mmio offers 1024 entries (20 MiB of the guest's memory for
	 * four ports and the control queue), virtio-pci the device's 128. */
	add(&v, &n, "-device");
	add(&v, &n, "virtio-serial-pci");
	/* The ports, each a command's at a time: the first is
	 * SBX_GUEST_PORT, the others SBX_GUEST_PORT.N (their chardevs are
	 * the keeper's). */
	for (i = 0; i < SBX_GUEST_PORTS; i++) {
		add(&v, &n, "-device");
		if (i)
			snprintf(buf, sizeof buf, "virtserialport,chardev=sbx%d,"
			    "name=%s.%d", i, SBX_GUEST_PORT, i);
		else
			snprintf(buf, sizeof buf, "virtserialport,chardev=sbx0,"
			    "name=%s", SBX_GUEST_PORT);
		add(&v, &n, buf);
	}
	/* Under TCG a balloon, by which the keeper gives the host back what
	 * the boot touched and freed of the guest's memory (trim()); should
	 * the guest run out of memory meanwhile, it deflates, no process of
	 * the guest's is killed for it. */
	if (tcg) {
		add(&v, &n, "-device");
		add(&v, &n, "virtio-balloon-device,deflate-on-oom=on");
	}
	add(&v, &n, "-drive");
	add(&v, &n, "file=disk.qcow2,if=none,format=qcow2,id=disk");
	add(&v, &n, "-device");
	add(&v, &n, "virtio-blk-device,drive=disk");
	if (net) {
		/* QEMU's user-mode network, its sockets in the namespace
		 * sbx-netd serves: nothing of the host's own but that way. */
		struct sbx_buf nd = SBX_BUF_INIT;
		json_t *o;
		size_t k;

		/* Each published port: QEMU's namespace's 127.0.0.1:PORT,
		 * where sbx-netd's connections come, to the guest's PORT. */
		sbx_buf_add(&nd, "user,id=net", 11);
		json_array_foreach(fwd, k, o) {
			int m = snprintf(buf, sizeof buf,
			    ",hostfwd=tcp:127.0.0.1:%u-:%u",
			    (unsigned)sbx_json_int(o, "port", 0),
			    (unsigned)sbx_json_int(o, "port", 0));

			sbx_buf_add(&nd, buf, (size_t)m);
		}
		sbx_buf_add(&nd, "", 1);
		add(&v, &n, "-netdev");
		add(&v, &n, nd.data);
		sbx_buf_release(&nd);
		add(&v, &n, "-device");
		add(&v, &n, "virtio-net-device,netdev=net");
	}
	return v;
}

/* The commands' environment as meta.json keeps it: the image's Env.
 * --env's values (one may be a secret taken from sbx-create's
 * environment) are never written down: the keeper gives them to the
 * guest, which keeps them in its memory (SBX_GUEST_SETENV), and meta
 * has their names. */
static json_t *
env_of(const json_t *config)
{
	json_t *a = json_array(), *v;
	size_t i;

	json_array_foreach(json_object_get(config, "Env"), i, v)
		if (json_is_string(v))
			json_array_append(a, v);
	return a;
}

static json_t *
env_keys(char **env)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; env && env[i]; i++)
		json_array_append_new(a, json_stringn(env[i], strcspn(env[i],
		    "=")));
	return a;
}

static int
write_meta(const char *dir, const json_t *meta, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/meta.json", dir);
	char *text = json_dumps(meta, JSON_COMPACT | JSON_PRESERVE_ORDER);
	int rc = sbx_file_write_atomic(p, text, strlen(text), 0600, 0, err);

	free(text);
	free(p);
	return rc;
}

/* meta.json as lib/local/net.c reads it: the pid of the sandbox's
 * "init" (QEMU, whose namespace sbx-netd serves) and sbx-netd's. */
static int
note_netd(const char *dir, json_t *meta, struct sbx_err *err)
{
	pid_t kp, qp, np;

	sbx_qemu_pids(dir, &kp, &qp);
	pids_in(dir, "netd.pid", &np, NULL);
	if (!qp || !np)
		return sbx_err_set(err, SBX_EX_FAIL, "its VM or its network "
		    "ended as it started");
	json_object_set_new(meta, "pid", json_integer(qp));
	json_object_set_new(meta, "starttime", json_integer((json_int_t)
	    sbx_local_starttime(qp)));
	json_object_set_new(meta, "net_pid", json_integer(np));
	json_object_set_new(meta, "net_starttime", json_integer((json_int_t)
	    sbx_local_starttime(np)));
	return write_meta(dir, meta, err);
}

/* The cgroup of QEMU (qemu-ID, beside the local sandboxes'), as root:
 * its memory.max the VM's memory and QEMU's own, its CPU --cpus (what
 * all of QEMU's threads may use). None otherwise (cg->n 0): the VM's size
 * is its limit all the same. */
static int
vm_cgroup(const char *id, const json_t *meta, struct sbx_cgroups *cg,
    struct sbx_err *err)
{
	struct sbx_spec cs = {0};
	char name[SBX_ID_LEN + 8];

	memset(cg, 0, sizeof *cg);
	if (geteuid() != 0)
		return 0;
	cs.memory = (uint64_t)sbx_json_int(meta, "memory", 0) + QEMU_OVERHEAD;
	cs.cpus_milli = (uint64_t)sbx_json_int(meta, "cpus_milli", 0);
	cs.limits_default = SBX_CAP_MEMORY | SBX_CAP_CPUS;
	snprintf(name, sizeof name, "qemu-%s", id);
	return sbx_cg_create(cg, name, &cs, err);
}

/* QEMU's cgroup of sandbox id, emptied and removed. */
static void
vm_cgroup_remove(const char *id)
{
	struct sbx_cgroups cg;
	char name[SBX_ID_LEN + 8];

	snprintf(name, sizeof name, "qemu-%s", id);
	sbx_cg_find(&cg, name);
	if (cg.n) {
		sbx_cg_kill(&cg, 2000);
		sbx_cg_remove(&cg);
	}
	sbx_cg_release(&cg);
}

/* The VM of dir, as its meta says, started with its keeper (resume: of
 * a stopped sandbox, on the disk it has; spec: a create's). With a
 * network (allow at create: net.json), sbx-netd too, and its pid and
 * QEMU's in meta. */
static int
start_vm(const char *dir, json_t *meta, const struct sbx_spec *spec,
    int resume, struct sbx_err *err)
{
	const char *qemu = qemu_binary();
	const char *start = sbx_config_get("qemu.start_timeout", NULL);
	const char *accel = sbx_json_str(meta, "accel");
	const char *id = sbx_json_str(meta, "id");
	const char *name = sbx_json_str(meta, "name");
	/* A stopped sandbox's rules are in its net.json. */
	struct sbx_spec none = {.network = SBX_NET_DENY};
	struct sbx_spec again = {.network = SBX_NET_ALLOW};
	struct sbx_qemu_boot b = {0};
	json_t *netj = NULL;
	struct sbx_cgroups cg;
	int rc;

	if (!accel)
		accel = sbx_config_get("qemu.accel", "tcg");
	/* A resume's host may have changed since the create's. */
	if (resume && check_host(qemu, accel, err) < 0)
		return -1;
	if (vm_cgroup(id, meta, &cg, err) < 0)
		return -1;
	b.cg = cg.n ? &cg : NULL;
	b.dir = dir;
	/* sbx-netd starts meanwhile; the keeper gives it QEMU's pid. */
	if ((b.net = sbx_local_net_wanted(dir, spec ? spec : &none)) &&
	    (b.net_ready = sbx_local_net_spawn(dir, id, spec &&
	    json_array_size(spec->net_inject) ? sbx_json_str(meta, "image") :
	    NULL, 0, &b.net_pidw, spec ? spec : &again, err)) < 0) {
		sbx_cg_remove(&cg);
		sbx_cg_release(&cg);
		return -1;
	}
	/* The ports sbx-netd publishes (net.json's, written by its spawn):
	 * QEMU forwards them. */
	if (b.net) {
		char *p = sbx_xasprintf("%s/net.json", dir);

		netj = json_load_file(p, 0, NULL);
		free(p);
	}
	b.argv = qemu_argv(qemu, accel, (uint64_t)sbx_json_int(meta, "memory",
	    0), (uint64_t)sbx_json_int(meta, "cpus_milli", 0), b.net,
	    json_object_get(netj, "ports"), name ? name : id);
	json_decref(netj);
	b.timeout = (uint64_t)sbx_json_int(meta, "timeout", 0);
	b.start_ms = start ? atoll(start) * 1000 : START_MS_DEFAULT;
	if (b.start_ms <= 0)
		b.start_ms = START_MS_DEFAULT;
	b.resume = resume;
	b.no_thp = !strcmp(accel, "tcg");
	if (b.no_thp)
		b.trim = (uint64_t)sbx_json_int(meta, "memory", 0);
	/* --env's values, a create's only: a stopped sandbox started again
	 * has lost them, as a local one does. */
	b.env = spec ? spec->env : NULL;
	rc = sbx_qemu_keeper_start(&b, err);
	free_strv(b.argv);
	if (rc == 0 && b.net)
		rc = note_netd(dir, meta, err);
	/* A VM that did not start is gone: so is its cgroup. */
	if (rc < 0)
		sbx_cg_remove(&cg);
	sbx_cg_release(&cg);
	return rc;
}

/* Whether image (sbx-create's --image) is the one snapshot snap was
 * taken on: its name as given then, or the same digest or directory. */
static int
same_image(const char *image, const json_t *snap)
{
	struct sbx_image_use iu = {0};
	struct sbx_err e;
	const char *was = sbx_json_str(snap, "image_path");
	const char *dg = sbx_json_str(snap, "image_digest");
	char *real;
	int same;

	if (!strcmp(image, sbx_json_str(snap, "image") ? sbx_json_str(snap,
	    "image") : ""))
		return 1;
	if (sbx_image_is_path(image)) {
		real = realpath(image, NULL);
		same = real && was && !dg && !strcmp(real, was);
		free(real);
		return same;
	}
	if (sbx_image_lookup(image, &iu, &e) < 0)
		return 0;
	same = iu.digest && dg && !strcmp(iu.digest, dg);
	sbx_image_use_release(&iu);
	return same;
}

static int qemu_kill(json_t *ref, int keep, struct sbx_err *err);

static int
qemu_create(const struct sbx_spec *spec, json_t **ref, struct sbx_err *err)
{
	const char *qemu = qemu_binary();
	const char *accel = sbx_config_get("qemu.accel", "tcg");
	struct sbx_image_use iu = {0};
	char id[SBX_ID_LEN + 1], *dir = NULL, *rootfs = NULL, *snapdir = NULL;
	uint64_t memory = spec->memory ? spec->memory : 256ull << 20;
	json_t *meta = NULL, *snap = NULL;
	const char *digest, *user, *iref;
	struct stat st;
	int rc = -1, named = 0, snaplk = -1;

	if (!spec->image || !strcmp(spec->image, "host"))
		return sbx_err_set(err, SBX_EX_USAGE, "the qemu backend needs "
		    "--image: an image of the store (sbx-image pull) or a "
		    "directory");
	if (memory < MEMORY_MIN)
		return sbx_err_set(err, SBX_EX_USAGE, "a qemu sandbox needs "
		    "--memory of at least 64M");
	if (spec->workdir && !sbx_path_plain(spec->workdir))
		return sbx_err_set(err, SBX_EX_USAGE, "invalid workdir '%s' "
		    "(want an absolute, plain path)", spec->workdir);
	if (spec->network == SBX_NET_ALLOW && sbx_local_net_check(spec,
	    err) < 0)
		return -1;
	if (check_host(qemu, accel, err) < 0)
		return -1;
	if (spec->from) {
		/* Its disk and what it needs of the image are the
		 * snapshot's; it stays until our meta.json names it. */
		snaplk = sbx_local_lock(sbx_qemu_snap_root(), 0);
		if (!(snap = sbx_qemu_snap_get(spec->from, &snapdir, err)))
			goto out;
		if (!same_image(spec->image, snap)) {
			sbx_err_set(err, SBX_EX_USAGE, "a qemu sandbox from "
			    "snapshot '%s' has its image '%s' (no --image)",
			    spec->from, sbx_json_str(snap, "image") ?
			    sbx_json_str(snap, "image") : "?");
			goto out;
		}
		rootfs = sbx_xstrdup(sbx_json_str(snap, "image_path") ?
		    sbx_json_str(snap, "image_path") : "?");
	} else if (!sbx_image_is_path(spec->image)) {
		if (sbx_image_lookup(spec->image, &iu, err) < 0)
			return -1;
		rootfs = sbx_xstrdup(iu.rootfs);
	} else if (!(rootfs = realpath(spec->image, NULL)) ||
	    stat(rootfs, &st) < 0 || !S_ISDIR(st.st_mode)) {
		sbx_err_set(err, SBX_EX_USAGE, "image '%s' is not a directory",
		    spec->image);
		goto out;
	}
	if (sbx_mkdirs(sbx_qemu_root(), 0700, err) < 0)
		goto out;
	sbx_local_new_id(id);
	dir = sbx_xasprintf("%s/%s", sbx_qemu_root(), id);
	if (mkdir(dir, 0700) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make '%s':", dir);
		free(dir);
		dir = NULL;
		goto out;
	}
	/* Until its keeper stands, we are what keeps it: a listing calls
	 * it being created while we live, dead once we died. */
	{
		char *p = sbx_xasprintf("%s/creator.pid", dir), t[64];
		int n = snprintf(t, sizeof t, "%d %llu\n", (int)getpid(),
		    sbx_local_starttime(getpid()));

		rc = sbx_file_write_atomic(p, t, (size_t)n, 0600, 0, err);
		free(p);
		if (rc < 0)
			goto fail;
		rc = -1;
	}
	if (spec->name) {
		if (sbx_local_claim_name(sbx_qemu_root(), spec->name, id,
		    err) < 0)
			goto fail;
		named = 1;
	}
	if ((snap ? sbx_qemu_snap_disk(snapdir, dir, err) :
	    sbx_qemu_disk(rootfs, iu.digest, dir, err)) < 0)
		goto fail;
	digest = snap ? sbx_json_str(snap, "image_digest") : iu.digest;
	meta = json_pack("{sssosssssoso}", "id", id, "name", spec->name ?
	    json_string(spec->name) : json_null(), "image", rootfs,
	    "workdir", spec->workdir ? spec->workdir : "/", "env",
	    snap ? json_deep_copy(json_object_get(snap, "image_env")) :
	    env_of(iu.config), "labels", spec->labels ?
	    json_incref(spec->labels) : json_object());
	if (!json_is_array(json_object_get(meta, "env")))
		json_object_set_new(meta, "env", json_array());
	/* A snapshot's "image" is the store's name, or the directory. */
	iref = snap ? sbx_json_str(snap, "image") : iu.name;
	if (iref && snap && !strcmp(iref, rootfs))
		iref = NULL;
	json_object_set_new(meta, "image_ref", iref ? json_string(iref) :
	    json_null());
	json_object_set_new(meta, "image_digest", digest ?
	    json_string(digest) : json_null());
	if (snap) {
		/* Its disk stands on these (sbx-snapshot rm says so). */
		json_object_set_new(meta, "snapshot", json_string(
		    sbx_json_str(snap, "snapshot")));
		json_object_set(meta, "layers", json_object_get(snap,
		    "layers"));
	}
	json_object_set_new(meta, "created_at_epoch", json_integer(sbx_now()));
	json_object_set_new(meta, "timeout", json_integer((json_int_t)
	    spec->timeout));
	json_object_set_new(meta, "memory", json_integer((json_int_t)memory));
	json_object_set_new(meta, "cpus_milli", json_integer((json_int_t)
	    spec->cpus_milli));
	json_object_set_new(meta, "accel", json_string(accel));
	json_object_set_new(meta, "env_keys", env_keys(spec->env));
	/* Who its commands run as without -u: the image's User. */
	user = snap ? sbx_json_str(snap, "user") : sbx_json_str(iu.config,
	    "User");
	if (user && *user)
		json_object_set_new(meta, "user", json_string(user));
	json_object_set_new(meta, "network", json_string(spec->network ==
	    SBX_NET_ALLOW ? "allow" : "deny"));
	/* What a resume after a stop starts again (its post-create not),
	 * and the image's Entrypoint and Cmd, kept here: the store's image
	 * may be gone by then. */
	if (spec->start)
		json_object_set(meta, "start", spec->start);
	{
		json_t *a = sbx_start_image_argv(iu.config);

		if (a)
			json_object_set_new(meta, "image_cmd", a);
	}
	if (write_meta(dir, meta, err) < 0)
		goto fail;
	if (snaplk >= 0)
		close(snaplk);
	snaplk = -1;
	if ((rc = start_vm(dir, meta, spec, 0, err)) < 0)
		goto fail;
	*ref = json_pack("{ssssss}", "backend", "qemu", "id", id, "dir", dir);
	/* Header injection: sbx-netd's CA into the VM's trust store before
	 * anything runs there; its commands get the variables that point
	 * other clients at it (meta's "ca"). */
	if (spec->network == SBX_NET_ALLOW && json_array_size(
	    spec->net_inject)) {
		struct sbx_err e2 = {0};

		json_object_set_new(meta, "ca", json_true());
		if (sbx_qemu_ca_install(*ref, dir, err) < 0 ||
		    write_meta(dir, meta, err) < 0) {
			/* The VM, its sbx-netd, name and directory. */
			qemu_kill(*ref, 0, &e2);
			json_decref(*ref);
			*ref = NULL;
			rc = -1;
			goto out;
		}
	}
	/* What sbx-cost prices: the VM's size, not what was asked (under
	 * TCG one vCPU). */
	json_object_set_new(*ref, "resources", json_pack("{s:f,s:I}",
	    "vcpus", (double)vcpus(accel, spec->cpus_milli), "memory_mib",
	    (json_int_t)(memory >> 20)));
	goto out;
fail:
	rc = -1;
	if (dir) {
		pid_t np;

		pids_in(dir, "netd.pid", &np, NULL);
		if (np)
			sbx_local_net_stop(np, sbx_local_starttime(np));
	}
	if (named)
		sbx_local_release_name(sbx_qemu_root(), spec->name, id);
	sbx_rmtree(dir);
out:
	if (snaplk >= 0)
		close(snaplk);
	json_decref(meta);
	json_decref(snap);
	sbx_image_use_release(&iu);
	free(snapdir);
	free(rootfs);
	free(dir);
	return rc;
}

/* --- kill, info, list -------------------------------------------------- */

static void
end_pid(pid_t pid)
{
	char p[32];
	long long end = sbx_mono_ms() + KILL_WAIT_MS;
	struct stat st;

	if (pid <= 0 || kill(pid, SIGKILL) < 0)
		return;
	/* Not our child: gone once /proc says so (a zombie of init's is
	 * gone for us: sbx_local_starttime). */
	snprintf(p, sizeof p, "/proc/%d", (int)pid);
	while (stat(p, &st) == 0 && sbx_local_starttime(pid) &&
	    sbx_mono_ms() < end)
		usleep(2000);
}

static int
qemu_kill(json_t *ref, int keep, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *id = NULL, *dir = want ? sbx_local_find_in(sbx_qemu_root(), want,
	    &id) : NULL;
	json_t *meta;
	pid_t kp, qp;

	if (!dir)
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
	json_object_set_new(ref, "id", json_string(id));
	sbx_qemu_pids(dir, &kp, &qp);
	meta = sbx_local_meta(dir);
	/* The keeper first: it must not see QEMU end and write "dead". */
	end_pid(kp);
	end_pid(qp);
	vm_cgroup_remove(id);
	sbx_local_net_stop_of(meta);
	if (keep) {
		char *p = sbx_xasprintf("%s/status", dir);

		sbx_file_write_atomic(p, "killed\n", 7, 0600, 0, NULL);
		free(p);
		p = sbx_xasprintf("%s/sock", dir);
		unlink(p);
		free(p);
		p = sbx_xasprintf("%s/" SBX_PAUSED_FILE, dir);
		unlink(p);
		free(p);
	} else {
		sbx_local_release_name(sbx_qemu_root(), sbx_json_str(meta,
		    "name"), id);
		if (sbx_rmtree(dir) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot remove '%s':",
			    dir);
			json_decref(meta);
			free(dir);
			free(id);
			return -1;
		}
	}
	json_decref(meta);
	free(dir);
	free(id);
	return 0;
}

/* What the keeper and QEMU use, from /proc: their resident memory in
 * bytes and their CPU time in seconds; -1 each when either is gone. */
static void
usage_of(pid_t kp, pid_t qp, long long *rss, double *cpu)
{
	pid_t pid[2] = {kp, qp};
	char path[64], line[1024], *p;
	unsigned long long ut, st;
	long long kb, tick = sysconf(_SC_CLK_TCK);
	ssize_t n;
	FILE *f;
	int i, fd, got;

	*rss = 0;
	*cpu = 0;
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof path, "/proc/%d/status", (int)pid[i]);
		got = 0;
		if (pid[i] > 0 && (f = fopen(path, "re"))) {
			while (!got && fgets(line, sizeof line, f))
				if (sscanf(line, "VmRSS: %lld kB", &kb) == 1) {
					*rss += kb * 1024;
					got = 1;
				}
			fclose(f);
		}
		snprintf(path, sizeof path, "/proc/%d/stat", (int)pid[i]);
		n = -1;
		if (got && (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
			n = read(fd, line, sizeof line - 1);
			close(fd);
		}
		/* utime and stime, fields 14 and 15, counted after comm. */
		if (n > 0) {
			line[n] = '\0';
			if ((p = strrchr(line, ')')) && sscanf(p + 2,
			    "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
			    "%llu", &ut, &st) == 2 && tick > 0) {
				*cpu += (double)(ut + st) / (double)tick;
				continue;
			}
		}
		*rss = -1;
		*cpu = -1;
		return;
	}
}

static json_t *
info_of(const char *id)
{
	char *dir = sbx_xasprintf("%s/%s", sbx_qemu_root(), id), *status;
	json_t *meta = sbx_local_meta(dir), *o;
	long long created = sbx_json_int(meta, "created_at_epoch", 0);
	long long rss = -1, act;
	double cpu = -1;
	const char *st = "dead";
	struct stat sb;
	pid_t kp, qp, cp;
	int how = sbx_local_paused(dir, NULL);

	if (!meta && (created = sbx_local_dir_born(dir)) < 0)
		created = 0;
	sbx_qemu_pids(dir, &kp, &qp);
	pids_in(dir, "creator.pid", &cp, NULL);
	if (kp && qp) {
		/* Marked stopped and still running: a stop or a resume at
		 * work. */
		st = how == 's' ? "paused" : "running";
		usage_of(kp, qp, &rss, &cpu);
	} else if (how == 't')
		st = "stopped";
	else if ((status = sbx_local_read_small(dir, "status"))) {
		if (strstr(status, "killed"))
			st = "killed";
		else if (strstr(status, "expired"))
			st = "expired";
		free(status);
	}
	/* Its keeper's last client come or command ended: the mtime of
	 * its activity file (none yet: not told). */
	{
		char *p = sbx_xasprintf("%s/activity", dir);

		act = stat(p, &sb) == 0 ? (long long)sb.st_mtime : -1;
		free(p);
	}
	o = sbx_local_info_head("qemu", id, meta, st, created, act);
	/* The guest's processes are its own, asked of it only through the
	 * one client its keeper serves at a time: not told. */
	json_object_set_new(o, "processes", json_null());
	json_object_set_new(o, "memory_bytes", rss >= 0 ? json_integer(rss) :
	    json_null());
	json_object_set_new(o, "cpu_s", cpu >= 0 ? json_real(cpu) :
	    json_null());
	json_object_set_new(o, "limits", sbx_limits_json((uint64_t)
	    sbx_json_int(meta, "memory", 0), (uint64_t)sbx_json_int(meta,
	    "cpus_milli", 0), 0, 0));
	json_object_set(o, "accel", json_object_get(meta, "accel") ?
	    json_object_get(meta, "accel") : json_null());
	json_object_set_new(o, "dir", json_string(dir));
	/* sbx-create is at work on it: sbx-gc leaves it alone. */
	if (cp)
		json_object_set_new(o, "creating", json_true());
	json_decref(meta);
	free(dir);
	return o;
}

static int
qemu_list(int (*fn)(json_t *info, void *arg), void *arg, struct sbx_err *err)
{
	return sbx_local_list_in(sbx_qemu_root(), info_of, fn, arg, err);
}

static json_t *
qemu_info(const json_t *ref, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *id = NULL, *dir = want ? sbx_local_find_in(sbx_qemu_root(), want,
	    &id) : NULL;
	json_t *o;

	if (!dir) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
		return NULL;
	}
	o = info_of(id);
	free(dir);
	free(id);
	return o;
}

/* --- sbx-net ------------------------------------------------------------ */

/* The directory of a sandbox with a network (made with allow: its NIC and
 * sbx-netd), its id and meta; NULL with err. */
static char *
net_dir(const json_t *ref, char **id, json_t **meta, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *dir = want ? sbx_local_find_in(sbx_qemu_root(), want, id) : NULL;
	pid_t np;

	*meta = NULL;
	if (!dir) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
		return NULL;
	}
	*meta = sbx_local_meta(dir);
	pids_in(dir, "netd.pid", &np, NULL);
	if (!np) {
		/* A VM gets its NIC when it is made, or never. */
		sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' %s", *id,
		    json_object_get(*meta, "net_pid") ? "is not running" :
		    "has no network (backend 'qemu' gives a VM its NIC when "
		    "it is made: sbx-create -n allow)");
		json_decref(*meta);
		*meta = NULL;
		free(dir);
		free(*id);
		*id = NULL;
		return NULL;
	}
	return dir;
}

/* The rules, as lib/local/net.c's; --network deny cuts every new
 * connection (sbx-netd stays), allow after it gives rules again. */
static json_t *
qemu_net_rules(const json_t *ref, const json_t *set, struct sbx_err *err)
{
	const char *want = set ? sbx_json_str(set, "network") : NULL;
	json_t *meta, *out = NULL, *cut;
	char *id = NULL, *dir = net_dir(ref, &id, &meta, err);
	const char *was;

	if (!dir)
		return NULL;
	was = sbx_json_str(meta, "network");
	if (json_array_size(json_object_get(set, "inject")) &&
	    !json_is_true(json_object_get(meta, "ca"))) {
		/* Its CA goes into the VM at create, before anything runs. */
		sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' was made without "
		    "header injection: its VM has no CA of sbx's to trust "
		    "(create it with --inject-header)", id);
		goto out;
	}
	if (!want && (!was || strcmp(was, "allow"))) {
		sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' has network deny: "
		    "rules need --network allow", id);
		goto out;
	}
	if (want && !strcmp(want, "deny")) {
		cut = json_pack("{s[]s[s]sns[]}", "allow_out", "deny_out",
		    "all", "egress_proxy", "inject");
		out = sbx_local_net_dir_rules(dir, cut, err);
		json_decref(cut);
		if (!out)
			goto out;
		json_decref(out);
		out = json_pack("{s[]s[]}", "allow_out", "deny_out");
	} else if (!(out = sbx_local_net_dir_rules(dir, set, err)))
		goto out;
	if (want) {
		json_object_set_new(meta, "network", json_string(want));
		if (write_meta(dir, meta, err) < 0) {
			json_decref(out);
			out = NULL;
		}
	}
out:
	json_decref(meta);
	free(dir);
	free(id);
	return out;
}

static int
qemu_net_log(const json_t *ref, int follow, struct sbx_err *err)
{
	json_t *meta;
	char *id = NULL, *dir = net_dir(ref, &id, &meta, err);
	int rc;

	if (!dir)
		return -1;
	rc = sbx_local_net_dir_log(dir, follow, err);
	json_decref(meta);
	free(dir);
	free(id);
	return rc;
}

/* sbx-port: a port of the VM's published as a local sandbox's are (a
 * listener of sbx-netd's on the host's loopback, its connections made
 * in QEMU's network namespace), where QEMU's user-mode network forwards
 * that namespace's 127.0.0.1:PORT to the guest's PORT (hostfwd: at boot
 * for the ports net.json has, through the monitor for a new one). */
static json_t *
qemu_ports(const json_t *ref, unsigned port, unsigned host_port,
    struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *id = NULL, *dir, line[96], *said;
	json_t *meta = NULL, *out = NULL, *net, *v;
	size_t i;
	int have = 0;

	if (!port) {
		if (!want || !(dir = sbx_local_find_in(sbx_qemu_root(), want,
		    &id))) {
			sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
			    want ? want : "?");
			return NULL;
		}
		out = sbx_local_net_dir_ports(dir, id, 0, 0, err);
		free(dir);
		free(id);
		return out;
	}
	if (!(dir = net_dir(ref, &id, &meta, err)))
		return NULL;
	{
		char *p = sbx_xasprintf("%s/net.json", dir);

		net = json_load_file(p, 0, NULL);
		free(p);
	}
	json_array_foreach(json_object_get(net, "ports"), i, v)
		if (sbx_json_int(v, "port", 0) == (json_int_t)port)
			have = 1;
	json_decref(net);
	if (!have) {
		/* One left by a publish that failed after it is replaced. */
		snprintf(line, sizeof line, "hostfwd_remove net tcp:127.0.0.1:%u",
		    port);
		free(sbx_qemu_hmp(dir, line, err));
		memset(err, 0, sizeof *err);
		snprintf(line, sizeof line,
		    "hostfwd_add net tcp:127.0.0.1:%u-:%u", port, port);
		if (!(said = sbx_qemu_hmp(dir, line, err)))
			goto out;
		if (*said) {
			said[strcspn(said, "\r\n")] = '\0';
			sbx_err_set(err, SBX_EX_FAIL, "cannot forward port %u "
			    "into the VM: %s", port, said);
			free(said);
			goto out;
		}
		free(said);
	}
	out = sbx_local_net_dir_ports(dir, id, port, host_port, err);
out:
	json_decref(meta);
	free(dir);
	free(id);
	return out;
}

/* --- pause and resume ---------------------------------------------------- */

/* DIR/suspended: "MS AT", the ms its VM was suspended in all, the last
 * suspend counted the one that began at AT. */
long long
sbx_qemu_suspended_ms(const char *dir)
{
	char *t = sbx_local_read_small(dir, "suspended");
	long long total = 0, last = 0, when = 0;

	if (t && sscanf(t, "%lld %lld", &total, &last) != 2)
		total = last = 0;
	free(t);
	if (sbx_local_paused(dir, &when) == 's' && when > 0 && when != last &&
	    sbx_mono_ms() > when)
		total += sbx_mono_ms() - when;
	return total;
}

/* The VM of dir ended as a stop ends it: its keeper asked to power the
 * guest off (its disks synced first), killed with QEMU when it has not
 * ended in time. */
static int
stop_vm(const char *dir, const char *id, struct sbx_err *err)
{
	long long end = sbx_mono_ms() + STOP_WAIT_MS;
	pid_t kp, qp;

	sbx_qemu_pids(dir, &kp, &qp);
	if (kp && kill(kp, SBX_QEMU_SIG_STOP) == 0)
		while (sbx_local_starttime(kp) && sbx_mono_ms() < end)
			usleep(10000);
	sbx_qemu_pids(dir, &kp, &qp);
	if (kp || qp)
		sbx_note("the VM of '%s' did not power off in time: killed, "
		    "what its guest had not written yet lost", id);
	end_pid(kp);
	end_pid(qp);
	sbx_qemu_pids(dir, &kp, &qp);
	if (kp || qp)
		return sbx_err_set(err, SBX_EX_FAIL, "the VM of '%s' did not "
		    "end", id);
	return 0;
}

/* The sandbox a ref names (the ref's id made its own), its meta, how
 * it is paused, and whether its VM runs. */
static int
find_paused(json_t *ref, char **id, char **dir, json_t **meta, int *how,
    pid_t *alive, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	pid_t kp, qp;

	if (!want || !(*dir = sbx_local_find_in(sbx_qemu_root(), want, id)))
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
	json_object_set_new(ref, "id", json_string(*id));
	*meta = sbx_local_meta(*dir);
	*how = sbx_local_paused(*dir, NULL);
	sbx_qemu_pids(*dir, &kp, &qp);
	*alive = kp ? qp : 0;
	return 0;
}

static int
qemu_pause(json_t *ref, int stop, struct sbx_err *err)
{
	char *id = NULL, *dir = NULL;
	json_t *meta = NULL;
	int rc = -1, how;
	pid_t alive;

	if (find_paused(ref, &id, &dir, &meta, &how, &alive, err) < 0)
		goto out;
	if ((how == 't' && !alive) || (how == 's' && alive)) {
		rc = 0; /* already paused: nothing to do */
		goto out;
	}
	/* Marked stopped, still running: a stop killed half-way, which
	 * this one finishes. */
	if (how == 't')
		stop = 1;
	if (!alive) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is not "
		    "running", id);
		goto out;
	}
	/* Marked first: an exec that comes meanwhile fails fast instead of
	 * waiting on a VM that does not run. */
	if (sbx_local_mark_paused(dir, stop ? "stop" : "suspend", err) < 0)
		goto out;
	if (stop)
		rc = stop_vm(dir, id, err);
	else if ((rc = sbx_qemu_qmp(dir, "stop", err)) < 0)
		sbx_local_unmark_paused(dir);
	else
		/* Its vCPUs stopped, QEMU's main loop still wakes ~100 times
		 * a second under -icount (a deadline of the frozen virtual
		 * clock's, never reached): ~1% of a CPU, none once stopped
		 * too. */
		kill(alive, SIGSTOP);
out:
	json_decref(meta);
	free(dir);
	free(id);
	return rc;
}

static int
qemu_resume(json_t *ref, struct sbx_err *err)
{
	char *id = NULL, *dir = NULL;
	json_t *meta = NULL;
	int rc = -1, how;
	pid_t alive;

	if (find_paused(ref, &id, &dir, &meta, &how, &alive, err) < 0)
		goto out;
	if (how == 't') {
		/* A stop killed half-way is finished first: a new VM on
		 * the same disk, which only one QEMU may hold. */
		if (alive && stop_vm(dir, id, err) < 0)
			goto out;
		if (!meta) {
			sbx_err_set(err, SBX_EX_FAIL, "'%s' has no meta.json",
			    id);
			goto out;
		}
		if (start_vm(dir, meta, NULL, 1, err) < 0)
			goto out;
		sbx_local_unmark_paused(dir);
		/* Its processes ended with the VM: its start command is
		 * started again (its post-create is not). */
		rc = sbx_start_restart(ref, json_object_get(meta, "start"),
		    err);
		goto out;
	}
	if (!alive) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is not "
		    "running", id);
		goto out;
	}
	if (!how) {
		rc = 0; /* running: nothing to do */
		goto out;
	}
	kill(alive, SIGCONT);
	if (sbx_qemu_qmp(dir, "cont", err) < 0)
		goto out;
	/* Its time suspended, counted before the mark goes: an exec's
	 * deadline does not count it (exec.c). */
	{
		char *p = sbx_xasprintf("%s/suspended", dir), t[64];
		long long when = 0, total = sbx_qemu_suspended_ms(dir);
		int n;

		sbx_local_paused(dir, &when);
		n = snprintf(t, sizeof t, "%lld %lld\n", total, when);
		sbx_file_write_atomic(p, t, (size_t)n, 0600, 0, NULL);
		free(p);
	}
	sbx_local_unmark_paused(dir);
	rc = 0;
out:
	json_decref(meta);
	free(dir);
	free(id);
	return rc;
}

/* --- stats (sbx-stats) --------------------------------------------------- */

static json_t *
qemu_stats(const json_t *ref, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *id = NULL, *dir = want ? sbx_local_find_in(sbx_qemu_root(), want,
	    &id) : NULL, *p;
	const char *accel;
	long long rss = -1;
	double cpu = 0;
	struct stat st;
	json_t *meta, *o = NULL;
	pid_t kp, qp;

	if (!dir) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
		return NULL;
	}
	meta = sbx_local_meta(dir);
	sbx_qemu_pids(dir, &kp, &qp);
	if (kp && qp)
		usage_of(kp, qp, &rss, &cpu);
	if (!kp || !qp || rss < 0) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%s' is not "
		    "running", id);
		goto out;
	}
	accel = sbx_json_str(meta, "accel");
	o = json_object();
	json_object_set_new(o, "backend", json_string("qemu"));
	json_object_set_new(o, "id", json_string(id));
	json_object_set_new(o, "status", json_string(sbx_local_paused(dir,
	    NULL) == 's' ? "paused" : "running"));
	json_object_set_new(o, "cpu_s", json_real(cpu));
	json_object_set_new(o, "cpu_pct", json_null());
	json_object_set_new(o, "cpus", json_integer(vcpus(accel ? accel :
	    "tcg", (uint64_t)sbx_json_int(meta, "cpus_milli", 0))));
	/* The host's view: QEMU's resident memory (the guest's RAM it has
	 * touched, its own) and the keeper's. */
	json_object_set_new(o, "memory_bytes", json_integer(rss));
	json_object_set_new(o, "memory_limit", sbx_json_int(meta, "memory",
	    0) > 0 ? json_integer(sbx_json_int(meta, "memory", 0)) :
	    json_null());
	json_object_set_new(o, "memory_cache", json_null());
	/* What the sandbox wrote: its own disk's blocks, over the image's. */
	p = sbx_xasprintf("%s/disk.qcow2", dir);
	json_object_set_new(o, "disk_bytes", stat(p, &st) == 0 ?
	    json_integer((json_int_t)st.st_blocks * 512) : json_null());
	free(p);
	json_object_set_new(o, "disk_limit", json_null());
	json_object_set_new(o, "pids", json_null());
	json_object_set_new(o, "pids_limit", json_null());
	/* No network device: nothing goes in or out. */
	json_object_set_new(o, "net_rx_bytes", json_null());
	json_object_set_new(o, "net_tx_bytes", json_null());
out:
	json_decref(meta);
	free(dir);
	free(id);
	return o;
}

/* The Entrypoint and Cmd of its image, as create kept them. */
static json_t *
qemu_image_cmd(const json_t *ref, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *id = NULL, *dir = want ? sbx_local_find_in(sbx_qemu_root(),
	    want, &id) : NULL;
	json_t *meta, *a;

	if (!dir) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
		return NULL;
	}
	meta = sbx_local_meta(dir);
	a = json_incref(json_object_get(meta, "image_cmd"));
	json_decref(meta);
	free(dir);
	free(id);
	return a;
}

/* Which accelerator its VMs run under: TCG (QEMU's own translation,
 * everywhere, slow) unless qemu.accel says kvm. */
static json_t *
qemu_about(void)
{
	return json_pack("{ss}", "accel", sbx_config_get("qemu.accel", "tcg"));
}

/* QEMU's cgroup, qemu-ID. */
static int
qemu_cgroup_name(const char *name)
{
	return !strncmp(name, "qemu-", 5) && sbx_local_valid_id(name + 5);
}

/* sbx-gc: QEMU's empty cgroups, as local's (a VM's is empty only once
 * QEMU ended). */
static int
qemu_sweep(long long before)
{
	return sbx_cg_sweep(qemu_cgroup_name, before);
}

/* Weak here, as local's: only sbx_files_of's callers link them. */
extern const struct sbx_files sbx_qemu_files __attribute__((weak));

const struct sbx_backend_ops sbx_qemu_ops = {
	.about = qemu_about,
	.create = qemu_create,
	.exec = sbx_qemu_exec,
	.image_cmd = qemu_image_cmd,
	.kill = qemu_kill,
	.info = qemu_info,
	.list = qemu_list,
	.pause = qemu_pause,
	.resume = qemu_resume,
	.stats = qemu_stats,
	.sweep = qemu_sweep,
	/* The sessions' server is sbx-init again, copied onto the VM's
	 * disk and started by an exec, as on docker. */
	.shell = sbx_shell_remote,
	.files = &sbx_qemu_files,
	.net_rules = qemu_net_rules,
	.net_log = qemu_net_log,
	.ports = qemu_ports,
	.snapshot = sbx_qemu_snapshot,
	.snapshots = sbx_qemu_snapshots,
	.snap_export = sbx_qemu_snap_export,
};
