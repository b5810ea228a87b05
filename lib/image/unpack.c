/* unpack.c - an image's layers applied once, in order, into a root
 * filesystem directory of the store that every sandbox of that image
 * shares (read-only, as its overlay's lower layer):
 *
 *   ROOT/rootfs/HEX       HEX: the image manifest's digest
 *
 * OCI whiteouts are applied as they come: ".wh.NAME" removes NAME of the
 * layers below, ".wh..wh..opq" empties its directory of what the layers
 * below put there. Owners, modes, times and hard links are kept (owners
 * only as root); device files are left out (a sandbox has its own /dev);
 * names are checked by libarchive's guards (no absolute path, no "..", no
 * path through a symlink). The tree is made under a temporary name and
 * renamed once whole: a half-made one never has the final name. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "image/image.h"
#include "msg.h"

#define WH ".wh."
#define WH_OPQ ".wh..wh..opq"

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

struct layer {
	void *seen;     /* names this layer wrote (tsearch) */
	char **names;   /* the same, to free */
	size_t n, cap;
};

static void
seen_add(struct layer *l, const char *name)
{
	char *s = sbx_xstrdup(name);

	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->names = sbx_xrealloc(l->names, l->cap * sizeof *l->names);
	}
	l->names[l->n++] = s;
	tsearch(s, &l->seen, cmp_str);
}

static void
layer_release(struct layer *l)
{
	size_t i;

	while (l->seen)
		tdelete(*(char **)l->seen, &l->seen, cmp_str);
	for (i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	memset(l, 0, sizeof *l);
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

/* ".wh..wh..opq" in directory rel: what the layers below put there
 * goes; what this layer wrote stays. */
static int
opaque(int dfd, const char *rel, struct layer *l)
{
	struct dirent *e;
	char *path;
	DIR *d;
	int fd = open_beneath(dfd, rel), rc = 0;

	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return -1;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		path = *rel ? sbx_xasprintf("%s/%s", rel, e->d_name) :
		    sbx_xstrdup(e->d_name);
		if (!tfind(path, &l->seen, cmp_str) &&
		    sbx_rm_at(dirfd(d), e->d_name) < 0)
			rc = -1;
		free(path);
	}
	closedir(d);
	return rc;
}

/* One layer (a tar, any compression libarchive reads) from fd into the
 * tree at dir (dfd). */
static int
apply_layer(int fd, int dfd, const char *digest, int chrooted,
    struct sbx_err *err)
{
	struct archive *a = archive_read_new();
	struct archive *w = archive_write_disk_new();
	struct archive_entry *ae;
	struct layer l = {0};
	struct stat st;
	char name[4096], *base, *full;

	const char *p;
	int r, rc = -1, flags;
	size_t n;

	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
	    ARCHIVE_EXTRACT_SECURE_NODOTDOT |
	    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_UNLINK |
	    ARCHIVE_EXTRACT_XATTR;
	/* Chrooted into the tree, a symlink cannot lead out of it (and
	 * leads where it would in the image); otherwise libarchive checks
	 * every component of every name, an open, a stat and a close
	 * each. */
	if (!chrooted)
		flags |= ARCHIVE_EXTRACT_SECURE_SYMLINKS;
	if (geteuid() == 0)
		flags |= ARCHIVE_EXTRACT_OWNER;
	archive_write_disk_set_options(w, flags);
	if (archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK) {
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
			if (opaque(dfd, name, &l) < 0) {
				sbx_err_set(err, SBX_EX_FAIL, "layer %s: cannot "
				    "empty '%s':", digest, name);
				goto out;
			}
			continue;
		}
		if (!strncmp(base, WH, strlen(WH))) {
			if (base != name)
				base[-1] = '\0';
			if (whiteout(dfd, base == name ? "" : name,
			    base + strlen(WH)) < 0) {
				sbx_err_set(err, SBX_EX_FAIL, "layer %s: cannot "
				    "remove '%s':", digest, name);
				goto out;
			}
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
		/* Relative: the tree is the working directory. */
		archive_entry_set_pathname(ae, name);
		if ((p = archive_entry_hardlink(ae))) {
			while (p[0] == '.' && p[1] == '/')
				p += 2;
			if (!sbx_path_valid(p)) {
				sbx_err_set(err, SBX_EX_DATA, "layer %s: refused "
				    "hard link '%s' -> '%s'", digest, name, p);
				goto out;
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
		seen_add(&l, name);
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
	layer_release(&l);
	archive_write_free(w);
	archive_read_free(a);
	return rc;
}

/* The unpacker's end: its socket closed, it exits; 0 when it did so
 * cleanly. */
static int
unpacker_end(struct sbx_image_tree *t)
{
	int st = 0;

	if (t->sock >= 0)
		close(t->sock);
	t->sock = -1;
	if (t->pid <= 0)
		return 0;
	while (waitpid(t->pid, &st, 0) < 0 && errno == EINTR)
		;
	t->pid = 0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

void
sbx_image_tree_abort(struct sbx_image_tree *t)
{
	unpacker_end(t);
	if (t->tmp)
		sbx_rmtree(t->tmp);
	if (t->dfd >= 0)
		close(t->dfd);
	if (t->cwd >= 0)
		close(t->cwd);
	free(t->tmp);
	free(t->final);
	memset(t, 0, sizeof *t);
	t->dfd = t->cwd = t->sock = -1;
}

/* The unpacker: chrooted into the tree, it applies each layer that
 * comes (its digest, its fd) and answers with an sbx_err, code 0 when it
 * went in; it ends at its socket's end. */
static void
unpacker(struct sbx_image_tree *t, int sock)
{
	struct sbx_msg m;
	struct sbx_err e;
	int rc;

	memset(&e, 0, sizeof e);
	if (fchdir(t->dfd) < 0 || chroot(".") < 0 || chdir("/") < 0) {
		sbx_err_set(&e, SBX_EX_FAIL, "cannot enter '%s':", t->tmp);
		sbx_msg_send(sock, 1, &e, sizeof e, NULL, 0);
		_exit(1);
	}
	while (sbx_msg_recv(sock, &m) > 0) {
		memset(&e, 0, sizeof e);
		if (m.nfds != 1 || !m.len || m.data[m.len - 1] != '\0')
			_exit(2);
		rc = apply_layer(m.fds[0], t->dfd, m.data, 1, &e);
		sbx_msg_release(&m);
		if (sbx_msg_send(sock, rc < 0, &e, sizeof e, NULL, 0) < 0)
			_exit(2);
	}
	_exit(0);
}

static int
unpacker_start(struct sbx_image_tree *t, struct sbx_err *err)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot make a socket "
		    "pair:");
	if ((t->pid = fork()) < 0) {
		close(sv[0]);
		close(sv[1]);
		t->pid = 0;
		return sbx_err_set(err, SBX_EX_FAIL, "cannot fork:");
	}
	if (t->pid == 0) {
		close(sv[0]);
		unpacker(t, sv[1]);
	}
	close(sv[1]);
	t->sock = sv[0];
	return 0;
}

/* Layer fd applied by the unpacker. */
static int
apply_chrooted(struct sbx_image_tree *t, int fd, const char *digest,
    struct sbx_err *err)
{
	struct sbx_msg m;
	int rc;

	if (sbx_msg_send(t->sock, 0, digest, strlen(digest) + 1, &fd, 1) < 0 ||
	    sbx_msg_recv(t->sock, &m) <= 0) {
		unpacker_end(t);
		return sbx_err_set(err, SBX_EX_FAIL, "layer %s: its unpack "
		    "ended abnormally", digest);
	}
	rc = 0;
	if (m.len == sizeof *err && m.type) {
		memcpy(err, m.data, sizeof *err);
		err->msg[sizeof err->msg - 1] = '\0';
		err->hint[sizeof err->hint - 1] = '\0';
		rc = -1;
	} else if (m.len != sizeof *err) {
		rc = sbx_err_set(err, SBX_EX_FAIL, "layer %s: its unpack "
		    "answered nonsense", digest);
	}
	sbx_msg_release(&m);
	return rc;
}

int
sbx_image_tree_begin(struct sbx_image_tree *t, const char *root,
    const char *digest, struct sbx_err *err)
{
	char *parent;

	memset(t, 0, sizeof *t);
	t->dfd = t->cwd = t->sock = -1;
	t->final = sbx_xasprintf("%s/rootfs/%s", root, digest + 7);
	if (access(t->final, F_OK) == 0)
		return 1;
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
	/* An image's / is 0755 whatever mkdtemp made. */
	if (chmod(t->tmp, 0755) < 0 || (t->dfd = open(t->tmp, O_RDONLY |
	    O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (t->cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", t->tmp);
		goto fail;
	}
	if (geteuid() == 0 && unpacker_start(t, err) < 0)
		goto fail;
	return 0;
fail:
	sbx_image_tree_abort(t);
	return -1;
}

int
sbx_image_tree_apply(struct sbx_image_tree *t, int fd, const char *digest,
    struct sbx_err *err)
{
	int rc;

	if (t->sock >= 0)
		return apply_chrooted(t, fd, digest, err);

	/* libarchive writes relative to the working directory: the tree's,
	 * while this layer goes in. */
	if (fchdir(t->dfd) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot enter '%s':",
		    t->tmp);
	rc = apply_layer(fd, t->dfd, digest, 0, err);
	if (fchdir(t->cwd) < 0) {
		if (rc == 0)
			sbx_err_set(err, SBX_EX_FAIL, "cannot go back to the "
			    "working directory:");
		rc = -1;
	}
	return rc;
}

int
sbx_image_tree_commit(struct sbx_image_tree *t, char **path,
    struct sbx_err *err)
{
	*path = NULL;
	if (unpacker_end(t) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "the unpack of '%s' ended "
		    "abnormally", t->tmp);
	if (t->tmp) {
		if (rename(t->tmp, t->final) < 0 && errno != ENOTEMPTY &&
		    errno != EEXIST)
			return sbx_err_set(err, SBX_EX_FAIL, "cannot create "
			    "'%s':", t->final);
		/* Someone else's whole tree is as good as ours. */
		if (access(t->tmp, F_OK) < 0) {
			free(t->tmp);
			t->tmp = NULL;
		}
	}
	*path = t->final;
	t->final = NULL;
	sbx_image_tree_abort(t);
	return 0;
}

int
sbx_image_unpack(const char *root, const char *digest, const json_t *layers,
    char **path, struct sbx_err *err)
{
	struct sbx_image_tree t;
	const json_t *l;
	char *blob;
	size_t i;
	int fd, rc;

	*path = NULL;
	if ((rc = sbx_image_tree_begin(&t, root, digest, err)) < 0)
		return -1;
	if (rc == 0)
		json_array_foreach(layers, i, l) {
			const char *d = json_string_value(l);

			blob = sbx_xasprintf("%s/blobs/sha256/%s", root,
			    d ? d + 7 : "");
			fd = open(blob, O_RDONLY | O_CLOEXEC);
			free(blob);
			if (fd < 0) {
				sbx_err_set(err, SBX_EX_FAIL, "layer %s is not "
				    "in the store (pull the image again):",
				    d ? d : "?");
				sbx_image_tree_abort(&t);
				return -1;
			}
			rc = sbx_image_tree_apply(&t, fd, d, err);
			close(fd);
			if (rc < 0) {
				sbx_image_tree_abort(&t);
				return -1;
			}
		}
	if (sbx_image_tree_commit(&t, path, err) < 0) {
		sbx_image_tree_abort(&t);
		return -1;
	}
	return 0;
}
