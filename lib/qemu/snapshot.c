/* snapshot.c - the qemu backend's snapshots, its own (sbx_qemu_root()'s
 * .snapshots, a store as the local one's: snp-HEX/meta.json, .names/NAME):
 * a snapshot is a sandbox's disk overlay (disk.qcow2), copied read-only
 * while its VM is stopped, the guest's file systems synced first. The
 * copy stands on what the sandbox's did (the image's disk in the guest
 * directory's cache, or the snapshot the sandbox was made from: its
 * "layers"; an image given as a directory: a copy of its disk beside
 * it), and a sandbox --from it has a new overlay over it. One is made in
 * .snp-HEX.PID and renamed whole; what a killed sbx-snapshot left, the
 * next one removes, and a guard process continues the VM it stopped.
 * Its files are in an ext4 that only its guest reads: an export
 * compares a VM of it with one of its image (lib/snapdiff.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image/image.h"
#include "msg.h"
#include "qemu.h"

#define SNAP_PREFIX "snp-"
/* How long the guest may take to write what it holds (under TCG, a few
 * hundred MB of dirty pages take a while). */
#define SYNC_MS 120000

const char *
sbx_qemu_snap_root(void)
{
	static char *root;

	if (!root)
		root = sbx_xasprintf("%s/.snapshots", sbx_qemu_root());
	return root;
}

json_t *
sbx_qemu_snap_get(const char *id_or_name, char **dir, struct sbx_err *err)
{
	char *d = sbx_snap_find_in(sbx_qemu_snap_root(), id_or_name, NULL);
	json_t *m;

	if (!d) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no snapshot '%s'",
		    id_or_name);
		return NULL;
	}
	m = sbx_snap_meta_in(d, id_or_name, err);
	if (m && dir)
		*dir = d;
	else
		free(d);
	return m;
}

/* What a killed sbx-snapshot left: .snp-HEX.PID whose PID is gone. */
static void
clean_stale(void)
{
	DIR *d = opendir(sbx_qemu_snap_root());
	struct dirent *e;
	const char *dot;
	char *p;
	long pid;

	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "." SNAP_PREFIX, strlen(SNAP_PREFIX) +
		    1) || !(dot = strrchr(e->d_name, '.')) || dot == e->d_name)
			continue;
		pid = strtol(dot + 1, NULL, 10);
		if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno == EPERM)
			continue;
		p = sbx_xasprintf("%s/%s", sbx_qemu_snap_root(), e->d_name);
		sbx_rmtree(p);
		free(p);
	}
	if (d)
		closedir(d);
}

static int
snap_rm(const char *id_or_name, struct sbx_err *err)
{
	char *id = NULL, *dir, *p;
	struct sbx_buf users = SBX_BUF_INIT;
	json_t *m = NULL;
	int rc = 0, lk = sbx_local_lock(sbx_qemu_snap_root(), 1);

	if (!(dir = sbx_snap_find_in(sbx_qemu_snap_root(), id_or_name, &id))) {
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no snapshot '%s'",
		    id_or_name);
		goto out;
	}
	/* The sandboxes (killed and kept ones too: their disks), then the
	 * snapshots, whose disks stand on it. */
	sbx_snap_users_in(sbx_qemu_root(), sbx_local_valid_id, id, &users);
	sbx_snap_users_in(sbx_qemu_snap_root(), sbx_snap_valid_id, id, &users);
	if (users.len) {
		rc = sbx_err_set(err, SBX_EX_FAIL, "snapshot '%s' is in use "
		    "by %.*s", id, (int)users.len, users.data);
		goto out;
	}
	/* Gone from listings first: no meta.json, no snapshot. */
	m = sbx_snap_meta_in(dir, id, err);
	p = sbx_xasprintf("%s/meta.json", dir);
	if (unlink(p) < 0) {
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot remove '%s':", p);
		free(p);
		goto out;
	}
	free(p);
	if (sbx_json_str(m, "name"))
		sbx_local_release_name(sbx_qemu_snap_root(), sbx_json_str(m, "name"),
		    id);
	if (sbx_rmtree(dir) < 0)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot remove '%s':", dir);
out:
	if (lk >= 0)
		close(lk);
	sbx_buf_release(&users);
	json_decref(m);
	free(dir);
	free(id);
	return rc;
}

int
sbx_qemu_snapshots(const char *op, const char *id,
    int (*fn)(json_t *snap, void *arg), void *arg, struct sbx_err *err)
{
	json_t *m;
	int rc;

	if (!strcmp(op, "ls"))
		return sbx_snap_list_in(sbx_qemu_snap_root(), fn, arg, err);
	if (!strcmp(op, "rm"))
		return snap_rm(id, err);
	if (!(m = sbx_qemu_snap_get(id, NULL, err)))
		return -1;
	rc = fn(m, arg);
	json_decref(m);
	return rc;
}

/* The base an export compares the snapshot with is a new VM of its
 * image: only an image of the store that still has the digest the
 * snapshot was taken on is that base for sure (a directory may have
 * changed since, a name may have been pulled again). */
int
sbx_qemu_snap_export(const char *id_or_name, int fd, struct sbx_err *err)
{
	struct sbx_image_use iu = {0};
	struct sbx_err e = {0};
	const char *image, *dg;
	json_t *m;
	int rc = -1;

	if (!sbx_snap_export_diff)
		return sbx_err_set(err, SBX_EX_FAIL, "this tool cannot export "
		    "a qemu snapshot (sbx-snapshot does)");
	if (!(m = sbx_qemu_snap_get(id_or_name, NULL, err)))
		return -1;
	image = sbx_json_str(m, "image");
	if (!(dg = sbx_json_str(m, "image_digest")))
		sbx_err_set(err, SBX_EX_FAIL, "cannot export snapshot '%s': "
		    "its image is the directory '%s', which may have changed "
		    "since (an image of the store keeps its digest)",
		    id_or_name, image ? image : "?");
	else if (!image || sbx_image_lookup(image, &iu, &e) < 0 ||
	    !iu.digest || strcmp(iu.digest, dg))
		sbx_err_set(err, SBX_EX_FAIL, "cannot export snapshot '%s': "
		    "image '%s' of the store is no longer the one it was taken "
		    "on (%s)", id_or_name, image ? image : "?", dg);
	else
		rc = sbx_snap_export_diff("qemu", sbx_json_str(m, "snapshot"),
		    m, fd, err);
	sbx_image_use_release(&iu);
	json_decref(m);
	return rc;
}

/* --- taking one ------------------------------------------------------- */

/* from copied to a new file to (a clone where the filesystem can, else
 * its data, its holes kept), read-only. */
static int
copy_file(const char *from, const char *to, struct sbx_err *err)
{
	struct stat st;
	int in, out = -1, rc = -1;

	if ((in = open(from, O_RDONLY | O_CLOEXEC)) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", from);
	if (fstat(in, &st) < 0 || (out = open(to, O_WRONLY | O_CREAT |
	    O_EXCL | O_CLOEXEC, 0600)) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", to);
		goto out;
	}
	if (ioctl(out, FICLONE, in) < 0 && (sbx_local_copy_sparse(in, out) <
	    0 || ftruncate(out, st.st_size) < 0)) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot copy '%s':", from);
		goto out;
	}
	if (fchmod(out, 0400) < 0 || fsync(out) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot write '%s':", to);
		goto out;
	}
	rc = 0;
out:
	if (out >= 0)
		close(out);
	close(in);
	return rc;
}

static int
sync_frame(void *arg, uint32_t type, const char *p, size_t n)
{
	int *got = arg;

	(void)p;
	(void)n;
	if (type == SBX_GUEST_SYNC)
		*got = 1;
	else if (type == SBX_GUEST_ERROR)
		*got = -1;
	return *got ? -1 : 0;
}

/* The guest asked, through its keeper, to write what its file systems
 * hold to the disk, and its answer awaited. */
static int
guest_sync(const char *dir, const char *id, struct sbx_err *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	long long end = sbx_mono_ms() + SYNC_MS;
	char buf[4096];
	int fd, got = 0, rc = -1;
	ssize_t r;

	if ((fd = sbx_local_connect(dir)) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot reach the VM of "
		    "'%s':", id);
	sbx_qemu_frame_put(&b, SBX_GUEST_SYNC, NULL, 0);
	if (send(fd, b.data, b.len, MSG_NOSIGNAL) != (ssize_t)b.len) {
		sbx_err_set(err, SBX_EX_FAIL, "the VM of '%s':", id);
		goto out;
	}
	b.len = 0;
	while (!got) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long long left = end - sbx_mono_ms();

		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			sbx_err_set(err, SBX_EX_FAIL, "the guest of '%s' did not "
			    "sync its disk in %d s", id, SYNC_MS / 1000);
			goto out;
		}
		if ((r = read(fd, buf, sizeof buf)) < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			sbx_err_set(err, SBX_EX_FAIL, "the VM of '%s' went away "
			    "as it synced its disk", id);
			goto out;
		}
		sbx_buf_add(&b, buf, (size_t)r);
		if (sbx_qemu_frames_take(&b, sync_frame, &got) < 0 && !got)
			got = -1;
	}
	if (got < 0)
		sbx_err_set(err, SBX_EX_FAIL, "the guest of '%s' cannot sync "
		    "its disk (a guest older than protocol 4: scripts/qemu-guest "
		    "again, then a new sandbox)", id);
	else
		rc = 0;
out:
	sbx_buf_release(&b);
	close(fd);
	return rc;
}

/* A process of its own that continues the VM of dir should we end
 * before we say we did (a kill -9 mid-copy). */
static pid_t
guard_start(const char *dir, int *wfd)
{
	struct sbx_err e;
	int done;
	pid_t pid = sbx_guard_start(wfd, &done);

	if (pid == 0) {
		if (!done)
			sbx_qemu_qmp(dir, "cont", &e);
		_exit(0);
	}
	return pid;
}

/* The meta.json of a new snapshot of the sandbox whose meta is sm. */
static json_t *
snap_meta(const char *sid, const char *id, const char *name, const json_t *sm,
    json_t *layers, long long size, long long pause_ms)
{
	json_t *m = sbx_snap_meta_new("qemu", sid, id, name, sm, "env_keys");

	json_object_set_new(m, "size", json_integer(size));
	/* A disk's blocks: its files are the guest's to count. */
	json_object_set_new(m, "files", json_null());
	json_object_set_new(m, "memory", json_false());
	json_object_set_new(m, "pause_ms", json_real((double)pause_ms));
	/* This disk over its parents', over the image's. */
	json_object_set(m, "layers", layers);
	/* What a sandbox from it needs of the image, which may be gone
	 * from the store by then: its Env, its User, where it was. */
	json_object_set(m, "image_path", json_object_get(sm, "image"));
	json_object_set(m, "image_env", json_is_array(json_object_get(sm,
	    "env")) ? json_object_get(sm, "env") : json_array());
	if (sbx_json_str(sm, "user"))
		json_object_set(m, "user", json_object_get(sm, "user"));
	return m;
}

/* The disk of the sandbox in dir copied into tmp (its image's too when
 * that is a directory's, made in dir: final is where tmp goes); the VM
 * of a running one stopped for the copy, its guest synced first. */
static int
copy_disk(const char *dir, const char *id, const json_t *sm,
    const char *tmp, const char *final, long long *pause_ms,
    struct sbx_err *err)
{
	char *from = sbx_xasprintf("%s/disk.qcow2", dir);
	char *to = sbx_xasprintf("%s/disk.qcow2", tmp), *base = NULL;
	int rc = -1, how = sbx_local_paused(dir, NULL), wfd = -1, stopped = 0;
	long long t0 = 0;
	pid_t kp, qp, guard = -1;

	*pause_ms = 0;
	if (!sbx_json_str(sm, "image_digest") && !sbx_json_str(sm,
	    "snapshot")) {
		/* Never written: copied while the VM runs. */
		char *b = sbx_xasprintf("%s/base.ext4", dir);

		base = sbx_xasprintf("%s/base.ext4", tmp);
		rc = copy_file(b, base, err);
		free(b);
		if (rc < 0)
			goto out;
		rc = -1;
	}
	sbx_qemu_pids(dir, &kp, &qp);
	if (kp && qp && how == 't') {
		sbx_err_set(err, SBX_EX_FAIL, "sandbox '%s' is being stopped: "
		    "take its snapshot once it is", id);
		goto out;
	}
	/* Running: synced and stopped. Suspended (QMP stop, SIGSTOP): its
	 * disk is as the suspend left it; stopped or ended: as its guest
	 * or its end left it. */
	if (kp && qp && !how) {
		if (guest_sync(dir, id, err) < 0)
			goto out;
		if ((guard = guard_start(dir, &wfd)) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot fork:");
			goto out;
		}
		t0 = sbx_mono_ms();
		/* QEMU drains and flushes its disks as it stops. */
		if (sbx_qemu_qmp(dir, "stop", err) < 0)
			goto out;
		stopped = 1;
	}
	rc = copy_file(from, to, err);
	if (stopped) {
		struct sbx_err e2;

		if (sbx_qemu_qmp(dir, "cont", &e2) < 0) {
			/* The guard tries once more as it ends. */
			if (rc == 0)
				rc = sbx_err_set(err, e2.code, "%s", e2.msg);
		} else
			stopped = 0;
		*pause_ms = sbx_mono_ms() - t0;
	}
	if (rc == 0 && base) {
		char *fb = sbx_xasprintf("%s/base.ext4", final);
		char *argv[] = {"qemu-img", "rebase", "-q", "-u", "-f",
		    "qcow2", "-F", "raw", "-b", fb, to, NULL};

		/* It is written once more: read-only after. */
		if (chmod(to, 0600) < 0 || sbx_qemu_run_tool(argv, err) < 0 ||
		    chmod(to, 0400) < 0)
			rc = sbx_err_set(err, err->code ? err->code :
			    SBX_EX_FAIL, "%s", err->code ? err->msg :
			    "cannot rebase the snapshot's disk");
		free(fb);
	}
out:
	sbx_guard_end(guard, wfd, !stopped);
	free(base);
	free(from);
	free(to);
	return rc;
}

json_t *
sbx_qemu_snapshot(const json_t *ref, const char *name, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char sid[sizeof SNAP_PREFIX + SBX_ID_LEN], hex[SBX_ID_LEN + 1];
	char *id = NULL, *dir = NULL, *tmp = NULL, *final = NULL, *p, *text;
	json_t *sm = NULL, *layers = NULL, *out = NULL, *parent;
	long long pause_ms = 0;
	struct stat st;
	int lk = -1, named = 0, i;

	if (!want || !(dir = sbx_local_find_in(sbx_qemu_root(), want, &id))) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
		return NULL;
	}
	if (name && !sbx_snap_valid_name(name)) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid snapshot name '%s'",
		    name);
		goto out;
	}
	if (!(sm = sbx_local_meta(dir))) {
		sbx_err_set(err, SBX_EX_FAIL, "sandbox '%s' is not made yet",
		    id);
		goto out;
	}
	if (sbx_mkdirs(sbx_qemu_snap_root(), 0700, err) < 0)
		goto out;
	clean_stale();
	/* Told before the copy: the name's claim comes at the end. */
	if (name && (p = sbx_snap_find_in(sbx_qemu_snap_root(), name, NULL))) {
		free(p);
		sbx_err_set(err, SBX_EX_FAIL, "the snapshot name '%s' is in "
		    "use", name);
		goto out;
	}
	/* Its parents stay until this one's meta.json names them. */
	lk = sbx_local_lock(sbx_qemu_snap_root(), 0);
	layers = json_array();
	if (sbx_json_str(sm, "snapshot")) {
		if (!(parent = sbx_qemu_snap_get(sbx_json_str(sm, "snapshot"),
		    NULL, err)))
			goto out;
		json_array_extend(layers, json_object_get(parent, "layers"));
		json_decref(parent);
		if (json_array_size(layers) >= SBX_SNAP_DEPTH) {
			sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' is %d "
			    "snapshots deep: no more fit (take one of a "
			    "sandbox made otherwise)", id, SBX_SNAP_DEPTH);
			goto out;
		}
	}
	for (i = 0; i < 16 && !tmp; i++) {
		sbx_local_new_id(hex);
		snprintf(sid, sizeof sid, SNAP_PREFIX "%s", hex);
		free(final);
		final = sbx_xasprintf("%s/%s", sbx_qemu_snap_root(), sid);
		p = sbx_xasprintf("%s/.%s.%d", sbx_qemu_snap_root(), sid, (int)getpid());
		if (stat(final, &st) < 0 && mkdir(p, 0700) == 0)
			tmp = p;
		else
			free(p);
	}
	if (!tmp) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create a snapshot in "
		    "'%s':", sbx_qemu_snap_root());
		goto out;
	}
	json_array_insert_new(layers, 0, json_string(sid));
	if (copy_disk(dir, id, sm, tmp, final, &pause_ms, err) < 0)
		goto out;
	p = sbx_xasprintf("%s/disk.qcow2", tmp);
	out = snap_meta(sid, id, name, sm, layers, stat(p, &st) == 0 ?
	    (long long)st.st_blocks * 512 : 0, pause_ms);
	free(p);
	text = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
	p = sbx_xasprintf("%s/meta.json", tmp);
	i = sbx_file_write_atomic(p, text, strlen(text), 0600, 0, err);
	free(p);
	free(text);
	if (i < 0 || (name && sbx_snap_claim_name_in(sbx_qemu_snap_root(), name, sid,
	    err) < 0))
		goto fail;
	named = name != NULL;
	if (rename(tmp, final) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot rename '%s':", tmp);
		goto fail;
	}
	free(tmp);
	tmp = NULL;
	goto out;
fail:
	json_decref(out);
	out = NULL;
	if (named)
		sbx_local_release_name(sbx_qemu_snap_root(), name, sid);
out:
	if (tmp)
		sbx_rmtree(tmp);
	if (lk >= 0)
		close(lk);
	json_decref(layers);
	json_decref(sm);
	free(final);
	free(tmp);
	free(dir);
	free(id);
	return out;
}

/* --- a sandbox from one ------------------------------------------------ */

int
sbx_qemu_snap_disk(const char *snapdir, const char *dir, struct sbx_err *err)
{
	char *over = sbx_xasprintf("%s/disk.qcow2", dir);
	char *back = sbx_xasprintf("%s/disk.qcow2", snapdir);
	char *argv[] = {"qemu-img", "create", "-q", "-f", "qcow2", "-F",
	    "qcow2", "-b", back, over, NULL};
	int rc = sbx_qemu_run_tool(argv, err);

	free(over);
	free(back);
	return rc;
}
