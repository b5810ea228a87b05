/* warm.c - sandboxes made ahead (--warm N), for creates that cannot wait.
 *
 * Most of a create's time is the backend's (the local one: namespaces,
 * mounts, cgroup, disk, network helper; 20-50 ms, more with creates at
 * once on a small machine). With --warm N, sbxd keeps up to N sandboxes
 * made like the last create it answered, and a create that asks for the
 * same (the backend's spec, its labels aside: each is made with its own
 * id) takes one instead of waiting. One thread makes them, one at a time,
 * so filling the pool takes at most one CPU from the creates being
 * answered, and only once no sandbox was taken for QUIET ms: a burst of
 * creates has the CPUs to itself, the pool fills again after it. A
 * parked sandbox has a "creating" entry in the store, as a
 * create under way has: should sbxd die, the next one removes it. When
 * the wanted spec changes, the parked ones of the old spec are killed. A
 * spec that carries a credential (an egress proxy's password, a header
 * to inject) is never kept. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbxd.h"

#define QUIET 250

struct parked {
	char id[SBXD_ID_LEN + 1];
	json_t *ref;
	unsigned long gen;     /* the spec it was made for */
	struct parked *next;
};

static pthread_mutex_t pmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pcv = PTHREAD_COND_INITIALIZER;
static struct parked *pool;
static unsigned npool;
static char *key;              /* the wanted spec, as compact JSON text */
static json_t *want;           /* and as JSON, to make more from */
static unsigned long gen;      /* bumped when the wanted spec changes */
static long long taken_ms;     /* when one was last taken (mono) */
static int quit, started;
static pthread_t th;

/* The spec as the pool compares it (labels aside), or NULL: not kept. */
static json_t *
key_json(const struct sbx_spec *spec, char **text)
{
	json_t *sj;

	*text = NULL;
	if (spec->egress_proxy || spec->net_inject)
		return NULL;
	sj = sbx_spec_json(spec);
	json_object_del(sj, "labels");
	if (!(*text = json_dumps(sj, JSON_COMPACT | JSON_SORT_KEYS))) {
		json_decref(sj);
		return NULL;
	}
	return sj;
}

/* A parked sandbox gone: the backend's, then its store entry. */
static void
drop(struct parked *p)
{
	struct sbx_err err;
	char *path;

	if (sbxd_be_kill(p->ref, &err) < 0 && err.code != SBX_EX_NOSANDBOX) {
		/* Its store entry stays: the next sbxd reaps it. */
		sbxd_log("cannot kill warm sandbox %s: %s", p->id, err.msg);
	} else {
		path = sbx_xasprintf("%s/%s.json", sbxd.store, p->id);
		unlink(path);
		free(path);
	}
	json_decref(p->ref);
	free(p);
}

/* Whether parked sandbox p still runs: one killed from outside (sbx-kill,
 * sbx-gc in sbxd's store) is never handed out. Asked in a worker, as
 * the backend's other calls are (its code is not made for threads). */
static int
alive(struct parked *p)
{
	struct sbx_err err;
	json_t *info = sbxd_be_info(p->ref, &err);
	const char *s = info ? sbx_json_str(info, "status") : NULL;
	int ok = s && !strcmp(s, "running");

	json_decref(info);
	return ok;
}

int
sbxd_warm_take(const struct sbx_spec *spec, char *id, size_t idn,
    json_t **ref)
{
	struct parked *p = NULL, **pp;
	json_t *sj;
	char *k;

	if (!sbxd.o.warm || !(sj = key_json(spec, &k)))
		return 0;
	for (;;) {
		pthread_mutex_lock(&pmu);
		if (quit) {
			pthread_mutex_unlock(&pmu);
			break;
		}
		if (key && !strcmp(k, key)) {
			for (pp = &pool; (p = *pp); pp = &p->next)
				if (p->gen == gen)
					break;
			if (p) {
				*pp = p->next;
				npool--;
				taken_ms = sbx_mono_ms();
			}
		} else {
			free(key);
			json_decref(want);
			key = k;
			want = sj;
			k = NULL;
			sj = NULL;
			gen++;
		}
		pthread_cond_signal(&pcv);
		pthread_mutex_unlock(&pmu);
		if (!p || alive(p))
			break;
		sbxd_log("warm sandbox %s is gone: not handed out", p->id);
		drop(p);
		p = NULL;
	}
	free(k);
	json_decref(sj);
	if (!p)
		return 0;
	snprintf(id, idn, "%s", p->id);
	*ref = p->ref;
	free(p);
	return 1;
}

static void *
filler(void *arg)
{
	struct parked *stale, *p, **pp;
	struct sbx_err err;
	struct timespec ts;
	unsigned long g;
	long long wait;
	json_t *sj, *ref;
	char id[SBXD_ID_LEN + 1];
	int failed = 0;

	(void)arg;
	pthread_mutex_lock(&pmu);
	for (;;) {
		stale = NULL;
		for (pp = &pool; (p = *pp);)
			if (p->gen != gen || quit) {
				*pp = p->next;
				npool--;
				p->next = stale;
				stale = p;
			} else {
				pp = &p->next;
			}
		sj = NULL;
		/* A create that failed: again in a second, not in a loop. */
		wait = failed ? 1000 : QUIET - (sbx_mono_ms() - taken_ms);
		if (!quit && want && npool < sbxd.o.warm && wait <= 0)
			sj = json_deep_copy(want);
		g = gen;
		if (!sj && !stale) {
			if (quit)
				break;
			if (want && npool < sbxd.o.warm) {
				clock_gettime(CLOCK_REALTIME, &ts);
				ts.tv_sec += wait / 1000;
				ts.tv_nsec += wait % 1000 * 1000000;
				if (ts.tv_nsec >= 1000000000) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000;
				}
				pthread_cond_timedwait(&pcv, &pmu, &ts);
				failed = 0;
			} else {
				pthread_cond_wait(&pcv, &pmu);
			}
			continue;
		}
		pthread_mutex_unlock(&pmu);
		while ((p = stale)) {
			stale = p->next;
			drop(p);
		}
		ref = NULL;
		if (sj) {
			sbxd_random_id(id, SBXD_ID_LEN);
			id[SBXD_ID_LEN] = 0;
			json_object_set_new(sj, "labels", json_pack("{s:s}",
			    "sbxd", id));
			if (sbxd_box_creating(id, &err) < 0 ||
			    sbxd_be_create_json(sj, &ref, &err) < 0) {
				sbxd_log("cannot make a warm sandbox: %s",
				    err.msg);
				sbxd_box_reap(id);
				failed = 1;
			}
			json_decref(sj);
		}
		pthread_mutex_lock(&pmu);
		if (ref) {
			p = sbx_xcalloc(1, sizeof *p);
			snprintf(p->id, sizeof p->id, "%s", id);
			p->ref = ref;
			p->gen = g;
			p->next = pool;
			pool = p;
			npool++;
		}
	}
	pthread_mutex_unlock(&pmu);
	return NULL;
}

int
sbxd_warm_start(struct sbx_err *err)
{
	if (!sbxd.o.warm)
		return 0;
	if (pthread_create(&th, NULL, filler, NULL))
		return sbx_err_set(err, SBX_EX_FAIL, "cannot start a thread");
	started = 1;
	return 0;
}

void
sbxd_warm_end(void)
{
	if (!started)
		return;
	pthread_mutex_lock(&pmu);
	quit = 1;
	pthread_cond_signal(&pcv);
	pthread_mutex_unlock(&pmu);
	pthread_join(th, NULL);
	started = 0;
	free(key);
	json_decref(want);
	key = NULL;
	want = NULL;
}
