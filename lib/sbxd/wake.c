/* wake.c - streams that wait off MHD's threads.
 *
 * A stream with nothing to send suspends its connection (the pool thread
 * goes on with other connections) and leaves a struct sbxd_wait here;
 * one thread resumes it when its fd is readable, its time comes, a
 * producer wakes it, or sbxd stops. Resumes happen on that thread with
 * no lock of ours held; a connection is suspended under wmu, so a
 * wake-up never comes before the suspend it ends. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sbxd.h"

static pthread_mutex_t wmu = PTHREAD_MUTEX_INITIALIZER;
static struct sbxd_wait *armed;   /* suspended, waiting */
static int efd = -1;
static int stopping, quit;
static pthread_t th;
static unsigned long round_no;

static void
poke(void)
{
	uint64_t one = 1;

	if (write(efd, &one, sizeof one) < 0 && errno != EAGAIN)
		sbxd_log("cannot wake the stream thread: %s", strerror(errno));
}

int
sbxd_wait(struct sbxd_wait *w, struct MHD_Connection *c, int fd,
    long long until)
{
	pthread_mutex_lock(&wmu);
	if (w->kicked || stopping) {
		w->kicked = 0;
		pthread_mutex_unlock(&wmu);
		return 1;
	}
	w->c = c;
	w->fd = fd;
	w->until = until;
	w->armed = 1;
	w->next = armed;
	armed = w;
	MHD_suspend_connection(c);
	pthread_mutex_unlock(&wmu);
	poke();
	return 0;
}

void
sbxd_wake(struct sbxd_wait *w)
{
	pthread_mutex_lock(&wmu);
	w->kicked = 1;
	if (w->armed)
		poke();
	pthread_mutex_unlock(&wmu);
}

void
sbxd_wait_cancel(struct sbxd_wait *w)
{
	struct sbxd_wait **pp;

	pthread_mutex_lock(&wmu);
	if (w->armed)
		for (pp = &armed; *pp; pp = &(*pp)->next)
			if (*pp == w) {
				*pp = w->next;
				w->armed = 0;
				break;
			}
	pthread_mutex_unlock(&wmu);
}

static void *
wake_main(void *arg)
{
	struct pollfd *pf = sbx_xcalloc(1, sizeof *pf);
	struct MHD_Connection **res = NULL;
	struct sbxd_wait *w, **pp;
	size_t cap = 1, rcap = 0, n = 1, nr, i;
	long long now, next;
	uint64_t v;
	int timeout, due;

	(void)arg;
	pf[0].fd = efd;
	pf[0].events = POLLIN;
	for (;;) {
		pthread_mutex_lock(&wmu);
		if (quit) {
			pthread_mutex_unlock(&wmu);
			break;
		}
		now = sbx_mono_ms();
		nr = 0;
		next = 0;
		for (pp = &armed; (w = *pp);) {
			due = w->kicked || stopping ||
			    (w->until && now >= w->until) ||
			    (w->fd >= 0 && w->round == round_no && w->slot &&
			    pf[w->slot].revents);
			if (!due) {
				if (w->until && (!next || w->until < next))
					next = w->until;
				pp = &w->next;
				continue;
			}
			*pp = w->next;
			w->armed = 0;
			w->kicked = 0;
			if (nr == rcap) {
				rcap = rcap ? 2 * rcap : 64;
				res = sbx_xrealloc(res, rcap * sizeof *res);
			}
			res[nr++] = w->c;
		}
		round_no++;
		n = 1;
		for (w = armed; w; w = w->next) {
			w->slot = 0;
			if (w->fd < 0)
				continue;
			if (n == cap) {
				cap *= 2;
				pf = sbx_xrealloc(pf, cap * sizeof *pf);
			}
			pf[n].fd = w->fd;
			pf[n].events = POLLIN;
			pf[n].revents = 0;
			w->slot = n++;
			w->round = round_no;
		}
		pthread_mutex_unlock(&wmu);
		for (i = 0; i < nr; i++)
			MHD_resume_connection(res[i]);
		timeout = -1;
		if (next) {
			now = sbx_mono_ms();
			timeout = next <= now ? 0 : next - now > 60000 ? 60000 :
			    (int)(next - now);
		}
		pf[0].revents = 0;
		if (poll(pf, n, timeout) < 0 && errno != EINTR) {
			sbxd_log("the stream thread cannot poll: %s",
			    strerror(errno));
			sleep(1);
		}
		if (pf[0].revents && read(efd, &v, sizeof v) < 0 &&
		    errno != EAGAIN)
			sbxd_log("the stream thread cannot read its eventfd");
	}
	free(pf);
	free(res);
	return NULL;
}

int
sbxd_wake_start(struct sbx_err *err)
{
	if ((efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot make an eventfd:");
	if (pthread_create(&th, NULL, wake_main, NULL)) {
		close(efd);
		efd = -1;
		return sbx_err_set(err, SBX_EX_FAIL, "cannot start a thread");
	}
	return 0;
}

void
sbxd_wake_all(void)
{
	pthread_mutex_lock(&wmu);
	stopping = 1;
	poke();
	pthread_mutex_unlock(&wmu);
}

void
sbxd_wake_end(void)
{
	pthread_mutex_lock(&wmu);
	quit = 1;
	poke();
	pthread_mutex_unlock(&wmu);
	pthread_join(th, NULL);
	close(efd);
	efd = -1;
}
