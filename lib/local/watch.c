/* watch.c - the agent's record of what changed under the workdir, so that
 * a pull lists only the directories touched since the last one (inotify).
 *
 * Every batch of events read is one generation. A directory remembers the
 * last generation a file in it changed; a directory made, moved in or
 * removed is a mark of its own ("tree": list all of it, "gone": forget all
 * under it). A pull asks with the token of its last complete listing
 * ("ID:GEN"); when events may have been lost since (the queue overflowed,
 * a directory moved, a watch could not be set) the answer is "list it
 * all". Writes through mmap are seen only when the file is closed (a
 * process that keeps a mapping open and writes goes unseen until then):
 * `sbx-sync pull --full` lists everything. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "local.h"

#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | \
	IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | \
	IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
/* Once a directory is known to have changed, what happens to its files
 * tells nothing more until a pull asks: only its structure is watched. */
#define WATCH_QUIET (WATCH_MASK & ~(uint32_t)(IN_MODIFY | IN_ATTRIB | \
	IN_CLOSE_WRITE))
#define MAX_MARKS 4096

struct dwatch {
	char *path;   /* relative to the workdir, "" for itself; NULL: free */
	uint64_t gen; /* the last generation a file in it changed, 0: never */
	int seen;     /* found again by the last walk */
	int quiet;    /* watched with WATCH_QUIET */
};

struct mark {
	char *path;
	uint32_t kind; /* SBX_DIRTY_TREE or SBX_DIRTY_GONE */
	uint64_t gen;
};

static struct {
	int fd;            /* inotify, -1: not watching */
	char *root;        /* the workdir, absolute */
	char id[17];       /* this agent's, so that a restart is noticed */
	uint64_t gen;      /* the current generation */
	uint64_t full_gen; /* events may be lost at this generation */
	int broken;        /* no watching at all: every answer is "all" */
	int stale;         /* a directory moved: paths must be learnt again */
	struct dwatch *w;  /* indexed by watch descriptor */
	size_t nw;
	struct mark *marks;
	size_t nmarks;
} wt = {.fd = -1};

static char *
join(const char *dir, const char *name)
{
	return *dir ? sbx_xasprintf("%s/%s", dir, name) : sbx_xstrdup(name);
}

static void
set_watch(int wd, const char *path)
{
	if (wd < 0)
		return;
	if ((size_t)wd >= wt.nw) {
		size_t n = (size_t)wd * 2 + 16;

		wt.w = sbx_xrealloc(wt.w, n * sizeof *wt.w);
		memset(wt.w + wt.nw, 0, (n - wt.nw) * sizeof *wt.w);
		wt.nw = n;
	}
	free(wt.w[wd].path);
	wt.w[wd].path = sbx_xstrdup(path);
	wt.w[wd].seen = 1;
	wt.w[wd].quiet = 0;
}

/* Watch the directory of wd with mask; the mask of a watch can only be
 * set through its path, so a path that now names another directory
 * (moved, not yet learnt again) gets its full mask back and fails. */
static int
set_mask(int wd, uint32_t mask)
{
	char *abs = *wt.w[wd].path ? sbx_xasprintf("%s/%s", wt.root,
	    wt.w[wd].path) : sbx_xstrdup(wt.root);
	int got = inotify_add_watch(wt.fd, abs, mask);

	if (got >= 0 && got != wd) {
		inotify_add_watch(wt.fd, abs, WATCH_MASK);
		got = -1;
	}
	free(abs);
	return got;
}

/* Watch dir (relative) and every directory below it. Fails only when
 * the kernel refuses a watch for want of room: then we cannot know. */
static void
add_tree(const char *rel)
{
	char *abs = *rel ? sbx_xasprintf("%s/%s", wt.root, rel) :
	    sbx_xstrdup(wt.root);
	struct dirent *de;
	DIR *d;
	int wd = inotify_add_watch(wt.fd, abs, WATCH_MASK);

	if (wd < 0) {
		if (errno == ENOSPC || errno == ENOMEM)
			wt.broken = 1;
		free(abs);
		return;
	}
	set_watch(wd, rel);
	if ((d = opendir(abs))) {
		while (!wt.broken && (de = readdir(d))) {
			char *sub;

			if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") ||
			    !strcmp(de->d_name, ".."))
				continue;
			sub = join(rel, de->d_name);
			add_tree(sub);
			free(sub);
		}
		closedir(d);
	}
	free(abs);
}

static void
add_mark(const char *path, uint32_t kind)
{
	size_t i;

	for (i = 0; i < wt.nmarks; i++)
		if (wt.marks[i].kind == kind && !strcmp(wt.marks[i].path,
		    path)) {
			wt.marks[i].gen = wt.gen;
			return;
		}
	if (wt.nmarks == MAX_MARKS) {
		/* So many directories came and went: list it all once. */
		for (i = 0; i < wt.nmarks; i++)
			free(wt.marks[i].path);
		wt.nmarks = 0;
		wt.full_gen = wt.gen;
		return;
	}
	wt.marks = sbx_xrealloc(wt.marks, (wt.nmarks + 1) * sizeof *wt.marks);
	wt.marks[wt.nmarks++] = (struct mark){sbx_xstrdup(path), kind, wt.gen};
}

/* Paths of watches below a moved directory are stale: learn them all
 * again (a watch on the same directory keeps its descriptor), and drop
 * the watches of directories moved out. */
static void
relearn(void)
{
	size_t i;

	wt.full_gen = wt.gen;
	wt.stale = 0;
	for (i = 0; i < wt.nw; i++)
		wt.w[i].seen = 0;
	add_tree("");
	for (i = 0; i < wt.nw; i++)
		if (wt.w[i].path && !wt.w[i].seen) {
			inotify_rm_watch(wt.fd, (int)i);
			free(wt.w[i].path);
			wt.w[i].path = NULL;
		}
}

void
sbx_watch_start(const char *workdir)
{
	unsigned char r[8];
	size_t i;

	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		memcpy(r, &(uint64_t){(uint64_t)getpid() ^ (uint64_t)time(NULL)},
		    sizeof r);
	for (i = 0; i < sizeof r; i++)
		snprintf(wt.id + 2 * i, 3, "%02x", r[i]);
	wt.root = sbx_xstrdup(workdir);
	wt.gen = 1;
	wt.full_gen = 1;
}

/* Watching starts at the first pull, which lists it all (no token can
 * name this agent before its first answer): a sandbox never pulled from
 * pays nothing, and its end waits for no SRCU grace period (closing an
 * inotify fd that has marks does: 1-20 ms of every kill). */
static void
begin(void)
{
	if (wt.fd >= 0 || wt.broken || !wt.root)
		return;
	if ((wt.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
		wt.broken = 1;
		return;
	}
	add_tree("");
}

int
sbx_watch_fd(void)
{
	return wt.fd;
}

static void
on_event(const struct inotify_event *ev)
{
	struct dwatch *w;
	char *child;

	if (ev->mask & IN_Q_OVERFLOW) {
		relearn();
		return;
	}
	if (ev->wd < 0 || (size_t)ev->wd >= wt.nw || !(w = &wt.w[ev->wd])->path)
		return;
	if (ev->mask & IN_IGNORED) {
		if (!*w->path)
			wt.broken = 1; /* the workdir itself is gone */
		free(w->path);
		w->path = NULL;
		return;
	}
	if (!ev->len) {
		/* The workdir itself moved or went away. */
		if (!*w->path && ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF))
			wt.broken = 1;
		return;
	}
	w->gen = wt.gen;
	if (!(ev->mask & IN_ISDIR)) {
		if (!w->quiet && set_mask(ev->wd, WATCH_QUIET) >= 0)
			w->quiet = 1;
		return;
	}
	child = join(w->path, ev->name);
	if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
		/* Whatever was made in it before its watch is listed. */
		add_tree(child);
		add_mark(child, SBX_DIRTY_TREE);
	}
	if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
		add_mark(child, SBX_DIRTY_GONE);
	if (ev->mask & (IN_MOVED_FROM | IN_MOVED_TO))
		wt.stale = 1;
	free(child);
}

void
sbx_watch_read(void)
{
	char buf[65536] __attribute__((aligned(__alignof__(
	    struct inotify_event))));
	ssize_t n;
	char *p;

	if (wt.fd < 0)
		return;
	while ((n = read(wt.fd, buf, sizeof buf)) > 0) {
		wt.gen++;
		for (p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const void *)p;

			on_event(ev);
			p += sizeof *ev + ev->len;
		}
		if (wt.stale)
			relearn();
	}
}

/* The answer to a pull: SBX_MSG_DIRTYREP with the token of now, whether
 * everything must be listed, and the directories changed since. */
void
sbx_watch_reply(int sock, struct sbx_msg *m)
{
	const char *since = sbx_msg_get_str(m), *dir = sbx_msg_get_str(m);
	struct sbx_buf b = SBX_BUF_INIT, list = SBX_BUF_INIT;
	char token[64], *end;
	uint64_t from = 0;
	uint32_t n = 0, all;
	size_t i, idlen = strlen(wt.id);

	begin();

	/* What happened so far, then every watch in full again: a change
	 * from now on shows at a later generation than this answer's (one
	 * in between, unseen, is in a directory listed after this). */
	sbx_watch_read();
	for (i = 0; i < wt.nw; i++)
		if (wt.w[i].path && wt.w[i].quiet) {
			if (set_mask((int)i, WATCH_MASK) < 0)
				wt.stale = 1;
			wt.w[i].quiet = 0;
		}
	if (wt.stale)
		relearn();
	/* dir "": the workdir, which is all we watch. */
	all = wt.broken || wt.fd < 0 || !since || !dir || (*dir &&
	    strcmp(dir, wt.root)) || strncmp(since, wt.id, idlen) ||
	    since[idlen] != ':';
	if (!all) {
		errno = 0;
		from = strtoull(since + idlen + 1, &end, 10);
		all = errno || *end || from < wt.full_gen || from > wt.gen;
	}
	for (i = 0; !all && i < wt.nw; i++)
		if (wt.w[i].path && wt.w[i].gen > from) {
			sbx_msg_put_u32(&list, SBX_DIRTY_FLAT);
			sbx_msg_put_str(&list, wt.w[i].path);
			n++;
		}
	for (i = 0; !all && i < wt.nmarks; i++)
		if (wt.marks[i].gen > from) {
			sbx_msg_put_u32(&list, wt.marks[i].kind);
			sbx_msg_put_str(&list, wt.marks[i].path);
			n++;
		}
	if (!all && list.len > SBX_MSG_MAX / 2)
		all = 1;
	snprintf(token, sizeof token, "%s:%" PRIu64, wt.id, wt.gen);
	sbx_msg_put_str(&b, token);
	sbx_msg_put_u32(&b, all);
	sbx_msg_put_u32(&b, all ? 0 : n);
	if (!all && list.len)
		sbx_buf_add(&b, list.data, list.len);
	sbx_msg_send(sock, SBX_MSG_DIRTYREP, b.data, b.len, NULL, 0);
	sbx_buf_release(&b);
	sbx_buf_release(&list);
}
