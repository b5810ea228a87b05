/* log.c - DIR/net.log: one JSON line per connection or query, appended,
 * the file renamed to net.log.1 once it passes 1 MiB */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "netd.h"

#define LOG_MAX (1 << 20)

static struct {
	pthread_mutex_t mu;
	char *path, *old;
	int fd;
	long long warned;          /* when we last said a write failed */
} lg = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, -1, 0};

static int
log_reopen(void)
{
	/* 0600: the lines name every host the sandbox talked to. */
	int fd = open(lg.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
	    0600);

	if (fd < 0)
		return -1;
	if (lg.fd >= 0)
		close(lg.fd);
	lg.fd = fd;
	return 0;
}

int
netd_log_open(const char *dir, struct sbx_err *err)
{
	lg.path = sbx_xasprintf("%s/net.log", dir);
	lg.old = sbx_xasprintf("%s/net.log.1", dir);
	if (log_reopen() < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':",
		    lg.path);
	return 0;
}

/* "2026-12-04T21:00:00.123Z" into buf, of 32 bytes at least */
static void
now_fmt(char *buf, size_t n)
{
	struct timespec ts;
	struct tm tm;
	size_t k;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	k = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + k, n - k, ".%03dZ", (int)(ts.tv_nsec / 1000000));
}

static void
log_write(const char *line, size_t n)
{
	struct stat st;
	long long now;

	pthread_mutex_lock(&lg.mu);
	if (lg.fd < 0 && log_reopen() < 0)
		goto fail;
	if (sbx_write_all(lg.fd, line, n) < 0)
		goto fail;
	/* fstat, not a count of our own: the file may have been cut or
	 * removed by someone else meanwhile. */
	if (fstat(lg.fd, &st) == 0 && st.st_size >= LOG_MAX) {
		if (rename(lg.path, lg.old) < 0 || log_reopen() < 0)
			goto fail;
	}
	pthread_mutex_unlock(&lg.mu);
	return;
fail:
	/* A full disk would say so at every connection: once a minute. */
	now = sbx_mono_ms();
	if (!lg.warned || now - lg.warned > 60000) {
		lg.warned = now;
		sbx_warn("cannot write '%s':", lg.path);
	}
	pthread_mutex_unlock(&lg.mu);
}

void
netd_log(const struct netd_logrec *r)
{
	char t[40], addr[64];
	json_t *o;
	char *s, *line;
	size_t n;
	int port;

	now_fmt(t, sizeof t);
	netd_addr_fmt(r->dest, addr, sizeof addr, &port);
	o = json_object();
	json_object_set_new(o, "time", json_string(t));
	json_object_set_new(o, "sandbox", json_string(r->sandbox));
	json_object_set_new(o, "proto", json_string(r->proto));
	json_object_set_new(o, "dest", json_string(addr));
	json_object_set_new(o, "port", json_integer(port));
	if (r->host)
		json_object_set_new(o, "host", sbx_json_bytes(r->host,
		    strlen(r->host)));
	json_object_set_new(o, "verdict", json_string(!r->allow ? "deny" :
	    r->inject ? "inject" : "allow"));
	json_object_set_new(o, "bytes_out", json_integer(
	    (json_int_t)r->bytes_out));
	json_object_set_new(o, "bytes_in", json_integer(
	    (json_int_t)r->bytes_in));
	if (r->error)
		json_object_set_new(o, "error", json_string(r->error));
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!s)
		return;
	/* One write of the whole line: readers never see half of one. */
	n = strlen(s);
	line = sbx_xmalloc(n + 1);
	memcpy(line, s, n);
	line[n] = '\n';
	log_write(line, n + 1);
	free(line);
	free(s);
}
