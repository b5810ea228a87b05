/* unpack.c - an image's layers applied once into a root filesystem
 * directory of the store that every sandbox of that image shares
 * (read-only, as its overlay's lower layer):
 *
 *   ROOT/rootfs/HEX       HEX: the image manifest's digest
 *
 * Each layer is unpacked into a directory of its own, all of them at
 * once (a pull feeds each as its blob comes), under one temporary
 * directory, ROOT/rootfs/.tmp-HEX-XXXXXX/N; the layers are then flattened
 * onto the bottom one by renames, bottom up, and that tree is renamed
 * ROOT/rootfs/HEX once whole: a half-made one never has the final name.
 *
 * What a layer cannot do in a directory of its own is noted as it comes
 * and done at the flattening, to the layers below: its OCI whiteouts
 * (".wh.NAME" removes NAME, ".wh..wh..opq" empties its directory), its
 * hard links to files of a layer below, and the owner, mode, times and
 * extended attributes of its directories that the layers below also have.
 * Owners, modes, times and hard links are kept (owners only as root);
 * device files are left out (a sandbox has its own /dev); names are
 * checked by libarchive's guards (no absolute path, no "..", no path
 * through a symlink out of the layer). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "image/image.h"
#include "msg.h"

/* inflate.c's, where the tool has it (the remote flavour). */
#pragma weak sbx_image_tree_apply_blob

#define WH ".wh."
#define WH_OPQ ".wh..wh..opq"

/* A layer's notes, one after another: a letter, then its strings, each
 * ending in a NUL. */
#define NOTE_WHITEOUT 'W' /* DIR NAME: NAME of DIR goes */
#define NOTE_OPAQUE 'O'   /* DIR: what the layers below put there goes */
#define NOTE_LINK 'H'     /* NAME TARGET: a hard link to a lower file */
#define NOTE_DIR 'D'      /* NAME: a directory of the layer's own */

/* The largest notes of a layer (its names, twice at most). */
#define NOTES_MAX (256u << 20)

/* A layer's shared buffer: pieces the parent fills while its unpacker
 * reads the others. */
#define RING_SLOTS 4
#define RING_SLOT (256u << 10)

/* The frames on an unpacker's socket. Ours: a layer to apply, its blob's
 * fd given (LAYER_FD) or its tar coming through the buffer (LAYER_RING);
 * then a piece of it is in (FILLED: a struct piece, len 0 at its end) or
 * it will not come whole (ABORT). Its: a piece read (FREE: the slot, a
 * u32), and the answer (OK or FAILED: an sbx_err, then the notes). */
enum { MSG_OK, MSG_FAILED, MSG_LAYER_FD, MSG_LAYER_RING, MSG_FILLED,
	MSG_ABORT, MSG_FREE };

struct piece {
	uint32_t slot, len;
};

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void
note(struct sbx_buf *b, int kind, const char *s, const char *t)
{
	char k = (char)kind;

	sbx_buf_add(b, &k, 1);
	sbx_buf_add(b, s, strlen(s) + 1);
	if (t)
		sbx_buf_add(b, t, strlen(t) + 1);
}

/* Remove name in directory dfd, and all under it; no symlink is
 * followed. */
int
sbx_rm_at(int dfd, const char *name)
{
	struct stat st;
	struct dirent *e;
	DIR *d;
	int fd, rc = 0;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -1 : 0;
	if ((fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    sbx_rm_at(dirfd(d), e->d_name) < 0)
			rc = -1;
	closedir(d);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		rc = -1;
	return rc;
}

/* Directory rel of the tree at dfd, reached without a symlink or a way
 * out ("" is the tree): an fd, or -1 (errno ENOENT when it is not there,
 * ELOOP/EXDEV when the way goes through a link). */
static int
open_beneath(int dfd, const char *rel)
{
	struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS};

	if (!*rel)
		return fcntl(dfd, F_DUPFD_CLOEXEC, 0);
	return (int)syscall(SYS_openat2, dfd, rel, &how, sizeof how);
}

/* ".wh.NAME" in directory rel: NAME of the layers below goes. */
static int
whiteout(int dfd, const char *rel, const char *name)
{
	int fd = open_beneath(dfd, rel), rc;

	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
	rc = sbx_rm_at(fd, name);
	close(fd);
	return rc;
}

/* A path of the tree at root, every symlink on its way followed as if
 * root were / (as the unpack chrooted into one tree had it): an fd of
 * the directory, or -1. */
static int
open_in_root(int root, const char *rel)
{
	struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};

	if (!*rel)
		return fcntl(root, F_DUPFD_CLOEXEC, 0);
	return (int)syscall(SYS_openat2, root, rel, &how, sizeof how);
}

/* ".wh..wh..opq" in directory rel: what the layers below put there goes
 * (the layer's own entries come after, at the merge). */
static int
opaque(int dfd, const char *rel)
{
	struct dirent *e;
	DIR *d;
	int fd = open_beneath(dfd, rel), rc = 0;

	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return -1;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    sbx_rm_at(dirfd(d), e->d_name) < 0)
			rc = -1;
	closedir(d);
	return rc;
}

/* The tar of a layer read from the shared buffer, a piece at a time:
 * each freed once libarchive asks for the next. */
struct ring_src {
	int sock;
	const unsigned char *ring;
	long cur;       /* the slot libarchive holds, or -1 */
	int end;
};

static ssize_t
ring_read(struct archive *a, void *arg, const void **buf)
{
	struct ring_src *r = arg;
	struct sbx_msg m;
	struct piece pc;
	uint32_t slot;

	if (r->cur >= 0) {
		slot = (uint32_t)r->cur;
		r->cur = -1;
		if (sbx_msg_send(r->sock, MSG_FREE, &slot, sizeof slot, NULL,
		    0) < 0) {
			archive_set_error(a, EIO, "its feed is gone");
			return -1;
		}
	}
	if (r->end)
		return 0;
	if (sbx_msg_recv(r->sock, &m) <= 0) {
		archive_set_error(a, EIO, "its feed is gone");
		return -1;
	}
	if (m.type != MSG_FILLED || m.len != sizeof pc) {
		sbx_msg_release(&m);
		archive_set_error(a, EIO, "it did not come whole");
		return -1;
	}
	memcpy(&pc, m.data, sizeof pc);
	sbx_msg_release(&m);
	if (pc.slot >= RING_SLOTS || pc.len > RING_SLOT) {
		archive_set_error(a, EIO, "its feed said nonsense");
		return -1;
	}
	if (!pc.len) {
		r->end = 1;
		return 0;
	}
	r->cur = pc.slot;
	*buf = r->ring + (size_t)pc.slot * RING_SLOT;
	return pc.len;
}

/* One layer (a tar, any compression libarchive reads) from fd, or from
 * the shared buffer when src is not NULL, into the working directory,
 * the layer's own; what it does to the layers below noted in notes. */
static int
apply_layer(int fd, struct ring_src *src, const char *digest, int chrooted,
    struct sbx_buf *notes, struct sbx_err *err)
{
	struct archive *a = archive_read_new();
	struct archive *w = archive_write_disk_new();
	struct archive_entry *ae;
	struct stat st;
	char name[4096], *base, *full;
	const char *p;
	int r, rc = -1, flags;
	size_t n;

	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	/* Not ARCHIVE_EXTRACT_UNLINK: the layer's directory holds only what
	 * it wrote, and libarchive removes what is in the way when it must
	 * (a name twice), not an unlink that fails before each file. */
	flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
	    ARCHIVE_EXTRACT_SECURE_NODOTDOT |
	    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_XATTR;
	/* Chrooted into the layer, a symlink cannot lead out of it;
	 * otherwise libarchive checks every component of every name, an
	 * open, a stat and a close each. */
	if (!chrooted)
		flags |= ARCHIVE_EXTRACT_SECURE_SYMLINKS;
	if (geteuid() == 0)
		flags |= ARCHIVE_EXTRACT_OWNER;
	archive_write_disk_set_options(w, flags);
	if ((src ? archive_read_open(a, src, NULL, ring_read, NULL) :
	    archive_read_open_fd(a, fd, 1 << 16)) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_DATA, "layer %s is not a tar: %s",
		    digest, archive_error_string(a));
		goto out;
	}
	while ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK) {
		p = archive_entry_pathname(ae);
		if (!p)
			continue;
		while (p[0] == '.' && p[1] == '/')
			p += 2;
		snprintf(name, sizeof name, "%s", p);
		n = strlen(name);
		while (n > 0 && name[n - 1] == '/')
			name[--n] = '\0';
		if (!n || !strcmp(name, "."))
			continue;
		if (!sbx_path_valid(name)) {
			sbx_err_set(err, SBX_EX_DATA, "layer %s: refused member "
			    "'%s'", digest, name);
			goto out;
		}
		base = strrchr(name, '/');
		base = base ? base + 1 : name;
		if (!strcmp(base, WH_OPQ)) {
			base[base == name ? 0 : -1] = '\0';
			note(notes, NOTE_OPAQUE, name, NULL);
			continue;
		}
		if (!strncmp(base, WH, strlen(WH))) {
			if (base != name)
				base[-1] = '\0';
			note(notes, NOTE_WHITEOUT, base == name ? "" : name,
			    base + strlen(WH));
			continue;
		}
		switch (archive_entry_filetype(ae)) {
		case AE_IFCHR:
		case AE_IFBLK:
			continue;
		}
		/* A directory replaces what is not one (a symlink is not
		 * followed at the last step, as containerd has it; the
		 * steps before it are, inside the tree). */
		if (chrooted && archive_entry_filetype(ae) == AE_IFDIR &&
		    lstat(name, &st) == 0 && !S_ISDIR(st.st_mode) &&
		    unlink(name) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "layer %s: cannot replace "
			    "'%s':", digest, name);
			goto out;
		}
		/* Relative: the layer is the working directory. */
		archive_entry_set_pathname(ae, name);
		if ((p = archive_entry_hardlink(ae))) {
			while (p[0] == '.' && p[1] == '/')
				p += 2;
			if (!sbx_path_valid(p)) {
				sbx_err_set(err, SBX_EX_DATA, "layer %s: refused "
				    "hard link '%s' -> '%s'", digest, name, p);
				goto out;
			}
			/* To a file of a layer below: made at the merge. */
			if (lstat(p, &st) < 0 && errno == ENOENT) {
				note(notes, NOTE_LINK, name, p);
				continue;
			}
			full = sbx_xstrdup(p);
			archive_entry_set_hardlink(ae, full);
			free(full);
		}
		if (archive_read_extract2(a, ae, w) != ARCHIVE_OK) {
			sbx_err_set(err, SBX_EX_FAIL, "layer %s: cannot write "
			    "'%s': %s", digest, name, archive_error_string(a) ?
			    archive_error_string(a) : archive_error_string(w));
			goto out;
		}
		if (archive_entry_filetype(ae) == AE_IFDIR)
			note(notes, NOTE_DIR, name, NULL);
	}
	if (r != ARCHIVE_EOF) {
		sbx_err_set(err, SBX_EX_DATA, "layer %s: bad tar: %s", digest,
		    archive_error_string(a));
		goto out;
	}
	if (archive_write_close(w) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_FAIL, "layer %s: %s", digest,
		    archive_error_string(w));
		goto out;
	}
	rc = 0;
out:
	archive_write_free(w);
	archive_read_free(a);
	return rc;
}

/* --- the unpackers: a child per layer, in its directory ------------- */

/* Layer i's unpacker's end: its socket closed, it exits; 0 when it did
 * so cleanly. */
static int
unpacker_end(struct sbx_image_layer *l)
{
	int st = 0;

	if (l->sock >= 0)
		close(l->sock);
	l->sock = -1;
	if (l->pid <= 0)
		return 0;
	while (waitpid(l->pid, &st, 0) < 0 && errno == EINTR)
		;
	l->pid = 0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* An unpacker: in its layer's directory (chrooted there as root), it
 * applies each layer that comes (its digest, and its fd or its tar
 * through ring) and answers with an sbx_err (code 0 when it went in) and
 * the layer's notes; it ends at its socket's end. */
static void
unpacker(int dfd, int sock, const unsigned char *ring)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct ring_src src;
	struct sbx_msg m;
	struct sbx_err e;
	int rc, root = geteuid() == 0;

	memset(&e, 0, sizeof e);
	if (fchdir(dfd) < 0 || (root && (chroot(".") < 0 || chdir("/") < 0))) {
		sbx_err_set(&e, SBX_EX_FAIL, "cannot enter a layer's "
		    "directory:");
		sbx_msg_send(sock, 1, &e, sizeof e, NULL, 0);
		_exit(1);
	}
	while (sbx_msg_recv(sock, &m) > 0) {
		/* What was fed of a layer after its tar ended, unread. */
		if (m.type == MSG_FILLED || m.type == MSG_ABORT) {
			sbx_msg_release(&m);
			continue;
		}
		memset(&e, 0, sizeof e);
		if (!m.len || m.data[m.len - 1] != '\0' ||
		    (m.type == MSG_LAYER_FD && m.nfds != 1) ||
		    (m.type != MSG_LAYER_FD && m.type != MSG_LAYER_RING))
			_exit(2);
		b.len = 0;
		sbx_buf_add(&b, &e, sizeof e);
		src = (struct ring_src){.sock = sock, .ring = ring, .cur = -1};
		rc = apply_layer(m.nfds ? m.fds[0] : -1, m.type ==
		    MSG_LAYER_RING ? &src : NULL, m.data, root, &b, &e);
		sbx_msg_release(&m);
		memcpy(b.data, &e, sizeof e);
		if (sbx_msg_send_max(sock, NOTES_MAX, rc < 0 ? MSG_FAILED :
		    MSG_OK, b.data, rc < 0 ? sizeof e : b.len, NULL, 0) < 0)
			_exit(2);
	}
	_exit(0);
}

/* Every layer's directory and unpacker, forked now: before any thread of
 * a pull (a child forked from a threaded process may find a lock of the
 * allocator taken for ever). */
static int
unpackers_start(struct sbx_image_tree *t, struct sbx_err *err)
{
	struct sbx_image_layer *l;
	char nm[32];
	size_t i, k;
	int sv[2], dfd;

	for (i = 0; i < t->n; i++) {
		l = &t->l[i];
		snprintf(nm, sizeof nm, "%zu", i);
		if (mkdirat(t->dfd, nm, 0755) < 0 || fchmodat(t->dfd, nm, 0755,
		    0) < 0 || (dfd = openat(t->dfd, nm, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) < 0)
			return sbx_err_set(err, SBX_EX_FAIL, "cannot create "
			    "'%s/%s':", t->tmp, nm);
		/* Its pages are only made as they are written. */
		l->ring = mmap(NULL, (size_t)RING_SLOTS * RING_SLOT,
		    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (l->ring == MAP_FAILED) {
			l->ring = NULL;
			close(dfd);
			return sbx_err_set(err, SBX_EX_FAIL, "cannot map a "
			    "layer's buffer:");
		}
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
		    sv) < 0) {
			close(dfd);
			return sbx_err_set(err, SBX_EX_FAIL, "cannot make a "
			    "socket pair:");
		}
		if ((l->pid = fork()) < 0) {
			close(sv[0]);
			close(sv[1]);
			close(dfd);
			l->pid = 0;
			return sbx_err_set(err, SBX_EX_FAIL, "cannot fork:");
		}
		if (l->pid == 0) {
			/* The others' ends closed: each ends at its own. */
			for (k = 0; k < i; k++)
				close(t->l[k].sock);
			close(sv[0]);
			unpacker(dfd, sv[1], l->ring);
		}
		close(sv[1]);
		close(dfd);
		l->sock = sv[0];
	}
	return 0;
}

/* The unpacker of l's answer to layer digest in m (a message taken);
 * its notes kept for the merge. */
static int
answer(struct sbx_image_layer *l, struct sbx_msg *m, const char *digest,
    struct sbx_err *err)
{
	int rc = 0;

	if (m->len < sizeof *err || (m->type != MSG_OK &&
	    m->type != MSG_FAILED)) {
		rc = sbx_err_set(err, SBX_EX_FAIL, "layer %s: its unpack "
		    "answered nonsense", digest);
	} else if (m->type == MSG_FAILED) {
		memcpy(err, m->data, sizeof *err);
		err->msg[sizeof err->msg - 1] = '\0';
		err->hint[sizeof err->hint - 1] = '\0';
		rc = -1;
	} else {
		sbx_buf_release(&l->notes);
		sbx_buf_add(&l->notes, m->data + sizeof *err,
		    m->len - sizeof *err);
	}
	sbx_msg_release(m);
	return rc;
}

static int
ended(struct sbx_image_layer *l, const char *digest, struct sbx_err *err)
{
	unpacker_end(l);
	return sbx_err_set(err, SBX_EX_FAIL, "layer %s: its unpack ended "
	    "abnormally", digest);
}

/* Layer i from fd, by its unpacker. */
static int
apply_sent(struct sbx_image_tree *t, size_t i, int fd, const char *digest,
    struct sbx_err *err)
{
	struct sbx_image_layer *l = &t->l[i];
	struct sbx_msg m;

	if (sbx_msg_send(l->sock, MSG_LAYER_FD, digest, strlen(digest) + 1,
	    &fd, 1) < 0 || sbx_msg_recv_max(l->sock, NOTES_MAX, &m) <= 0)
		return ended(l, digest, err);
	return answer(l, &m, digest, err);
}

int
sbx_image_tree_apply_fill(struct sbx_image_tree *t, size_t i,
    const char *digest, ssize_t (*fill)(void *arg, unsigned char *buf,
    size_t size), void *arg, struct sbx_err *err)
{
	struct sbx_image_layer *l = i < t->n ? &t->l[i] : NULL;
	struct sbx_msg m;
	struct piece pc;
	uint32_t slot, nfree = RING_SLOTS, fr[RING_SLOTS];
	ssize_t n;
	int fed = 0, bad = 0, rc;

	if (!l || l->sock < 0 || !l->ring)
		return sbx_err_set(err, SBX_EX_FAIL, "layer %s: no unpack for "
		    "it", digest);
	free(l->digest);
	l->digest = sbx_xstrdup(digest);
	for (slot = 0; slot < RING_SLOTS; slot++)
		fr[slot] = slot;
	if (sbx_msg_send(l->sock, MSG_LAYER_RING, digest, strlen(digest) + 1,
	    NULL, 0) < 0)
		return ended(l, digest, err);
	for (;;) {
		/* Every free piece filled and sent, till the tar's end. */
		while (!fed && nfree) {
			pc.slot = fr[--nfree];
			n = fill(arg, l->ring + (size_t)pc.slot * RING_SLOT,
			    RING_SLOT);
			pc.len = n > 0 ? (uint32_t)n : 0;
			fed = n <= 0;
			bad = n < 0;
			if (sbx_msg_send(l->sock, bad ? MSG_ABORT : MSG_FILLED,
			    &pc, sizeof pc, NULL, 0) < 0)
				return ended(l, digest, err);
		}
		/* A piece read, or the answer (the tar may end before all
		 * that was fed). */
		if (sbx_msg_recv_max(l->sock, NOTES_MAX, &m) <= 0)
			return ended(l, digest, err);
		if (m.type != MSG_FREE)
			break;
		if (m.len != sizeof slot || nfree >= RING_SLOTS) {
			sbx_msg_release(&m);
			unpacker_end(l);
			return sbx_err_set(err, SBX_EX_FAIL, "layer %s: its "
			    "unpack answered nonsense", digest);
		}
		memcpy(&slot, m.data, sizeof slot);
		sbx_msg_release(&m);
		if (slot >= RING_SLOTS) {
			unpacker_end(l);
			return sbx_err_set(err, SBX_EX_FAIL, "layer %s: its "
			    "unpack answered nonsense", digest);
		}
		fr[nfree++] = slot;
	}
	rc = answer(l, &m, digest, err);
	if (bad && rc == 0)
		rc = sbx_err_set(err, SBX_EX_FAIL, "layer %s: it did not come "
		    "whole", digest);
	return rc;
}

/* --- the flattening: each layer renamed onto the ones below --------- */

struct flat {
	int root;          /* the tree: the bottom layer's directory */
	void *dirs;        /* the layer's own directories (NOTE_DIR) */
	const char *digest;
	char rel[PATH_MAX]; /* where the merge is, in the layer */
};

/* What a directory of the layer says of itself, given to the tree's of
 * that name as libarchive gives an entry to a directory that is there:
 * its owner, mode and extended attributes, not its times. */
static int
dir_meta(int from, int to, const struct stat *st)
{
	/* Linux's largest list and value (XATTR_LIST_MAX, XATTR_SIZE_MAX). */
	char *list, *val, *k;
	ssize_t n, v;
	int rc = -1;

	if (geteuid() == 0 && fchown(to, st->st_uid, st->st_gid) < 0)
		return -1;
	if (fchmod(to, st->st_mode & 07777) < 0)
		return -1;
	if ((n = flistxattr(from, NULL, 0)) <= 0)
		return n == 0 || errno == ENOTSUP ? 0 : -1;
	list = sbx_xmalloc(2 * 65536);
	val = list + 65536;
	if ((n = flistxattr(from, list, 65536)) < 0)
		goto out;
	for (k = list; k < list + n; k += strlen(k) + 1)
		if ((v = fgetxattr(from, k, val, 65536)) < 0 ||
		    fsetxattr(to, k, val, (size_t)v, 0) < 0)
			goto out;
	rc = 0;
out:
	free(list);
	return rc;
}

/* Directory upper (the layer's, at f->rel) merged into lower (the
 * tree's): a directory into the one below it, anything else renamed over
 * what is below. */
static int
merge(struct flat *f, int lower, int upper, struct sbx_err *err)
{
	struct stat us, ls;
	struct dirent *e;
	size_t rl = strlen(f->rel);
	int fd, lfd, ufd, have, own, rc = -1;
	DIR *d;

	if ((fd = fcntl(upper, F_DUPFD_CLOEXEC, 0)) < 0 ||
	    !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return sbx_err_set(err, SBX_EX_FAIL, "layer %s: cannot read "
		    "'%s':", f->digest, f->rel);
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (snprintf(f->rel + rl, sizeof f->rel - rl, "%s%s",
		    rl ? "/" : "", e->d_name) >= (int)(sizeof f->rel - rl)) {
			sbx_err_set(err, SBX_EX_DATA, "layer %s: a name too "
			    "long under '%s'", f->digest, f->rel);
			goto out;
		}
		if (fstatat(upper, e->d_name, &us, AT_SYMLINK_NOFOLLOW) < 0)
			goto fail;
		have = fstatat(lower, e->d_name, &ls, AT_SYMLINK_NOFOLLOW) == 0;
		lfd = -1;
		if (S_ISDIR(us.st_mode) && have) {
			own = tfind(f->rel, &f->dirs, cmp_str) != NULL;
			if (S_ISDIR(ls.st_mode))
				lfd = openat(lower, e->d_name, O_RDONLY |
				    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			/* Through a symlink of a layer below, as a path
			 * of this layer went through it when the layers
			 * were applied in one tree; a directory of the
			 * layer's own replaces the symlink. */
			else if (S_ISLNK(ls.st_mode) && !own)
				lfd = open_in_root(f->root, f->rel);
			if (S_ISDIR(ls.st_mode) && lfd < 0)
				goto fail;
		}
		if (lfd >= 0) {
			if ((ufd = openat(upper, e->d_name, O_RDONLY |
			    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
				close(lfd);
				goto fail;
			}
			rc = merge(f, lfd, ufd, err);
			if (rc == 0 && own && dir_meta(ufd, lfd, &us) < 0)
				rc = sbx_err_set(err, SBX_EX_FAIL, "layer %s: "
				    "cannot set '%s':", f->digest, f->rel);
			close(ufd);
			close(lfd);
			if (rc < 0)
				goto out;
			rc = -1;
			f->rel[rl] = '\0';
			continue;
		}
		/* Over a file a rename replaces it; a directory, or what a
		 * directory cannot be renamed over, goes first. */
		if (have && (S_ISDIR(us.st_mode) || S_ISDIR(ls.st_mode)) &&
		    sbx_rm_at(lower, e->d_name) < 0)
			goto fail;
		if (renameat(upper, e->d_name, lower, e->d_name) < 0)
			goto fail;
		f->rel[rl] = '\0';
	}
	rc = 0;
	goto out;
fail:
	sbx_err_set(err, SBX_EX_FAIL, "layer %s: cannot write '%s':",
	    f->digest, f->rel);
out:
	f->rel[rl] = '\0';
	closedir(d);
	return rc;
}

/* The directory of name's parent in the layer at dfd, made when missing
 * (as libarchive makes one: 0755); *base its last part. */
static int
layer_parent(int dfd, char *name, char **base)
{
	char *s = strrchr(name, '/'), *p, *q;
	int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0), nfd;

	*base = s ? s + 1 : name;
	if (!s || fd < 0)
		return fd;
	*s = '\0';
	for (p = name; p && fd >= 0; p = q) {
		if ((q = strchr(p, '/')))
			*q++ = '\0';
		if (mkdirat(fd, p, 0755) < 0 && errno != EEXIST)
			nfd = -1;
		else
			nfd = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
		if (q)
			q[-1] = '/';
		close(fd);
		fd = nfd;
	}
	*s = '/';
	return fd;
}

/* A hard link of the layer (at dfd) to a file of the tree (or one the
 * layer linked before it). */
static int
link_lower(int root, int dfd, const char *name, const char *target)
{
	char nm[4096], tg[4096], *nb, *tb;
	int nfd, tfd, rc = -1;

	snprintf(nm, sizeof nm, "%s", name);
	snprintf(tg, sizeof tg, "%s", target);
	if ((nfd = layer_parent(dfd, nm, &nb)) < 0)
		return -1;
	tb = strrchr(tg, '/');
	if (tb)
		*tb++ = '\0';
	tfd = open_in_root(dfd, tb ? tg : "");
	if (tfd >= 0 && faccessat(tfd, tb ? tb : tg, F_OK,
	    AT_SYMLINK_NOFOLLOW) < 0) {
		close(tfd);
		tfd = -1;
	}
	if (tfd < 0)
		tfd = open_in_root(root, tb ? tg : "");
	if (tfd >= 0) {
		(void)unlinkat(nfd, nb, 0);
		rc = linkat(tfd, tb ? tb : tg, nfd, nb, 0);
		close(tfd);
	}
	close(nfd);
	return rc;
}

/* Layer l (at dfd) onto the tree at root: its links to the files below
 * made in it, its whiteouts and opaque directories applied to the tree,
 * then its entries merged. */
static int
flatten(int root, int dfd, struct sbx_image_layer *l, const char *digest,
    struct sbx_err *err)
{
	struct flat *f = sbx_xcalloc(1, sizeof *f);
	const char *p = l->notes.data, *end = p + l->notes.len, *s, *t;
	int rc = -1, kind;

	f->root = root;
	f->digest = digest;
	while (p && p < end) {
		kind = *p++;
		s = p;
		p += strlen(p) + 1;
		t = NULL;
		if (kind == NOTE_WHITEOUT || kind == NOTE_LINK) {
			t = p;
			p += strlen(p) + 1;
		}
		if (kind == NOTE_DIR) {
			tsearch(s, &f->dirs, cmp_str);
		} else if (kind == NOTE_LINK && link_lower(root, dfd, s,
		    t) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "layer %s: cannot write "
			    "'%s': no '%s' to link to:", digest, s, t);
			goto out;
		} else if (kind == NOTE_WHITEOUT && whiteout(root, s, t) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "layer %s: cannot remove "
			    "'%s%s%s%s':", digest, s, *s ? "/" : "", WH, t);
			goto out;
		} else if (kind == NOTE_OPAQUE && opaque(root, s) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "layer %s: cannot empty "
			    "'%s':", digest, s);
			goto out;
		}
	}
	rc = merge(f, root, dfd, err);
out:
	while (f->dirs)
		tdelete(*(char **)f->dirs, &f->dirs, cmp_str);
	free(f);
	return rc;
}

/* --- the tree ------------------------------------------------------- */

void
sbx_image_tree_abort(struct sbx_image_tree *t)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		unpacker_end(&t->l[i]);
		if (t->l[i].ring)
			munmap(t->l[i].ring, (size_t)RING_SLOTS * RING_SLOT);
		sbx_buf_release(&t->l[i].notes);
		free(t->l[i].digest);
	}
	if (t->tmp)
		sbx_rmtree(t->tmp);
	if (t->dfd >= 0)
		close(t->dfd);
	free(t->l);
	free(t->tmp);
	free(t->final);
	memset(t, 0, sizeof *t);
	t->dfd = -1;
}

int
sbx_image_tree_begin(struct sbx_image_tree *t, const char *root,
    const char *digest, size_t nlayers, struct sbx_err *err)
{
	char *parent;
	size_t i;

	memset(t, 0, sizeof *t);
	t->dfd = -1;
	t->final = sbx_xasprintf("%s/rootfs/%s", root, digest + 7);
	if (access(t->final, F_OK) == 0)
		return 1;
	/* The bottom layer's directory is the tree: there is one. */
	t->n = nlayers ? nlayers : 1;
	t->l = sbx_xcalloc(t->n, sizeof *t->l);
	for (i = 0; i < t->n; i++) {
		t->l[i].sock = -1;
		t->l[i].notes = (struct sbx_buf)SBX_BUF_INIT;
	}
	parent = sbx_xasprintf("%s/rootfs", root);
	if (sbx_mkdirs(parent, 0755, err) < 0) {
		free(parent);
		goto fail;
	}
	t->tmp = sbx_xasprintf("%s/.tmp-%s-XXXXXX", parent, digest + 7);
	free(parent);
	if (!mkdtemp(t->tmp)) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", t->tmp);
		free(t->tmp);
		t->tmp = NULL;
		goto fail;
	}
	if ((t->dfd = open(t->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", t->tmp);
		goto fail;
	}
	if (unpackers_start(t, err) < 0)
		goto fail;
	return 0;
fail:
	sbx_image_tree_abort(t);
	return -1;
}

int
sbx_image_tree_apply(struct sbx_image_tree *t, size_t i, int fd,
    const char *digest, struct sbx_err *err)
{
	if (i >= t->n || t->l[i].sock < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "layer %s: no unpack for "
		    "it", digest);
	free(t->l[i].digest);
	t->l[i].digest = sbx_xstrdup(digest);
	return apply_sent(t, i, fd, digest, err);
}

int
sbx_image_tree_commit(struct sbx_image_tree *t, char **path,
    struct sbx_err *err)
{
	size_t i;
	int bad = 0, root, lfd;
	char nm[32];

	*path = NULL;
	for (i = 0; i < t->n; i++)
		if (unpacker_end(&t->l[i]) < 0)
			bad = 1;
	if (bad)
		return sbx_err_set(err, SBX_EX_FAIL, "the unpack of '%s' ended "
		    "abnormally", t->tmp);
	if (t->tmp) {
		if ((root = openat(t->dfd, "0", O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) < 0)
			return sbx_err_set(err, SBX_EX_FAIL, "cannot open "
			    "'%s/0':", t->tmp);
		for (i = 1; i < t->n; i++) {
			snprintf(nm, sizeof nm, "%zu", i);
			if ((lfd = openat(t->dfd, nm, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC)) < 0) {
				close(root);
				return sbx_err_set(err, SBX_EX_FAIL, "cannot "
				    "open '%s/%s':", t->tmp, nm);
			}
			bad = flatten(root, lfd, &t->l[i],
			    t->l[i].digest ? t->l[i].digest : "?", err);
			close(lfd);
			if (bad < 0) {
				close(root);
				return -1;
			}
		}
		close(root);
		/* Its files are not synced (a pull would wait for 100 MB
		 * to reach the disk): the mark of this boot, on the disk
		 * before the tree has its name, says it may be torn after
		 * a crash; a later boot makes it again (sbx_image_lookup). */
		if (sbx_image_mark_unsynced(t->final, err) < 0)
			return -1;
		if (renameat(t->dfd, "0", AT_FDCWD, t->final) < 0 &&
		    errno != ENOTEMPTY && errno != EEXIST)
			return sbx_err_set(err, SBX_EX_FAIL, "cannot create "
			    "'%s':", t->final);
		/* Someone else's whole tree is as good as ours; what is
		 * left of the layers (their emptied directories) goes. */
	}
	*path = t->final;
	t->final = NULL;
	sbx_image_tree_abort(t);
	return 0;
}

/* Layers of the store applied by a few threads at once. */
#define UNPACK_JOBS 3

struct unpack_job {
	struct sbx_image_tree *t;
	const char *root;
	const json_t *layers;
	pthread_mutex_t mu;
	size_t next;
	int failed;
	struct sbx_err err;
};

static void *
unpack_work(void *arg)
{
	struct unpack_job *u = arg;
	struct sbx_err e;
	const char *d;
	char *blob;
	size_t i;
	int fd, rc;

	for (;;) {
		pthread_mutex_lock(&u->mu);
		i = u->next++;
		rc = u->failed || i >= json_array_size(u->layers);
		pthread_mutex_unlock(&u->mu);
		if (rc)
			break;
		memset(&e, 0, sizeof e);
		d = json_string_value(json_array_get(u->layers, i));
		blob = sbx_xasprintf("%s/blobs/sha256/%s", u->root,
		    d && strlen(d) > 7 ? d + 7 : "");
		fd = open(blob, O_RDONLY | O_CLOEXEC);
		free(blob);
		if (fd < 0) {
			sbx_err_set(&e, SBX_EX_FAIL, "layer %s is not in the "
			    "store (pull the image again):", d ? d : "?");
			rc = -1;
		} else {
			rc = sbx_image_tree_apply_blob ?
			    sbx_image_tree_apply_blob(u->t, i, fd, d, NULL,
			    NULL, &e) : sbx_image_tree_apply(u->t, i, fd, d,
			    &e);
			close(fd);
		}
		if (rc < 0) {
			pthread_mutex_lock(&u->mu);
			if (!u->failed)
				u->err = e;
			u->failed = 1;
			pthread_mutex_unlock(&u->mu);
			break;
		}
	}
	return NULL;
}

int
sbx_image_unpack(const char *root, const char *digest, const json_t *layers,
    char **path, struct sbx_err *err)
{
	struct sbx_image_tree t;
	struct unpack_job u = {.t = &t, .root = root, .layers = layers,
	    .mu = PTHREAD_MUTEX_INITIALIZER};
	pthread_t th[UNPACK_JOBS];
	size_t i, nt = 0;
	int rc;

	*path = NULL;
	if ((rc = sbx_image_tree_begin(&t, root, digest,
	    json_array_size(layers), err)) < 0)
		return -1;
	for (i = 0; rc == 0 && i < UNPACK_JOBS &&
	    i < json_array_size(layers); i++) {
		if ((errno = pthread_create(&th[nt], NULL, unpack_work, &u))) {
			pthread_mutex_lock(&u.mu);
			if (!u.failed)
				sbx_err_set(&u.err, SBX_EX_FAIL, "cannot start "
				    "a thread:");
			u.failed = 1;
			pthread_mutex_unlock(&u.mu);
			break;
		}
		nt++;
	}
	for (i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
	if (u.failed) {
		*err = u.err;
		sbx_image_tree_abort(&t);
		return -1;
	}
	if (sbx_image_tree_commit(&t, path, err) < 0) {
		sbx_image_tree_abort(&t);
		return -1;
	}
	return 0;
}
