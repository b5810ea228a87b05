/* stats.c - sbx-stats on daytona: the sandbox's own cgroup files, read
 * through its shell (Daytona has no metrics API for a sandbox, and its
 * docs say /proc/meminfo and nproc show the host's: the cgroup is the
 * truth), and its network counters */
#include <stdlib.h>
#include <string.h>

#include "daytona.h"

/* "KEY VALUE" lines: cgroup v2's files, else v1's; a value is empty where
 * the file is not there, "max" where there is no limit. */
static const char stats_sh[] =
    "c=/sys/fs/cgroup\n"
    "v() { cat \"$1\" 2>/dev/null | head -n 1; }\n"
    "k() { sed -n \"s/^$2 //p\" \"$1\" 2>/dev/null | head -n 1; }\n"
    "if [ -f $c/cgroup.controllers ]; then\n"
    "\techo \"mem $(v $c/memory.current)\"\n"
    "\techo \"mem_max $(v $c/memory.max)\"\n"
    "\techo \"cache $(k $c/memory.stat file)\"\n"
    "\techo \"cpu_us $(k $c/cpu.stat usage_usec)\"\n"
    "\techo \"cpu_max $(v $c/cpu.max)\"\n"
    "\techo \"pids $(v $c/pids.current)\"\n"
    "\techo \"pids_max $(v $c/pids.max)\"\n"
    "else\n"
    "\techo \"mem $(v $c/memory/memory.usage_in_bytes)\"\n"
    "\techo \"mem_max $(v $c/memory/memory.limit_in_bytes)\"\n"
    "\techo \"cache $(k $c/memory/memory.stat cache)\"\n"
    "\tn=$(v $c/cpuacct/cpuacct.usage)\n"
    "\techo \"cpu_us ${n:+$((n / 1000))}\"\n"
    "\techo \"cpu_max $(v $c/cpu/cpu.cfs_quota_us) "
    "$(v $c/cpu/cpu.cfs_period_us)\"\n"
    "\techo \"pids $(v $c/pids/pids.current)\"\n"
    "\techo \"pids_max $(v $c/pids/pids.max)\"\n"
    "fi\n"
    /* No cgroup to read (a sandbox without its cgroupfs, as sbxd's):
     * what its processes use, from their /proc: their CPU time and
     * that of the children they reaped, their resident pages. */
    "if [ ! -f $c/memory.current ] && "
    "[ ! -f $c/memory/memory.usage_in_bytes ]; then\n"
    "\tt=$(getconf CLK_TCK 2>/dev/null || echo 100)\n"
    "\tg=$(getconf PAGESIZE 2>/dev/null || echo 4096)\n"
    "\tcat /proc/[0-9]*/stat 2>/dev/null | awk -v t=\"$t\" -v g=\"$g\" '\n"
    "\t{ s = $0; sub(/.*\\) /, \"\", s); split(s, a, \" \");\n"
    "\t  c += a[12] + a[13] + a[14] + a[15]; m += a[22]; n++ }\n"
    "\tEND { printf \"mem %.0f\\ncpu_us %.0f\\npids %d\\n\",\n"
    "\t  m * g, c * 1000000 / t, n }'\n"
    "fi\n"
    "awk 'NR > 2 { sub(/^ */, \"\"); split($0, a, /[: ]+/);"
    " if (a[1] != \"lo\") { r += a[2]; t += a[10] } }"
    " END { print \"rx \" r; print \"tx \" t }' /proc/net/dev 2>/dev/null\n";

/* The value of line "KEY ..." of out, or NULL: the last such line
 * with a value (the /proc fallback's come after the cgroup's empty
 * ones). */
static const char *
field(const char *out, const char *key, char *buf, size_t n)
{
	size_t kl = strlen(key), l;
	const char *p;

	const char *got = NULL;

	for (p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 :
	    NULL)
		if (!strncmp(p, key, kl) && p[kl] == ' ') {
			l = strcspn(p + kl + 1, "\n");
			if (!l || l >= n)
				continue;
			memcpy(buf, p + kl + 1, l);
			buf[l] = '\0';
			got = buf;
		}
	return got;
}

/* A count of out's, or null (none, "max", not a number). */
static json_t *
count(const char *out, const char *key)
{
	char buf[64], *e;
	long long v;

	if (!field(out, key, buf, sizeof buf))
		return json_null();
	v = strtoll(buf, &e, 10);
	return *e || v < 0 ? json_null() : json_integer(v);
}

json_t *
sbx_dt_stats(const json_t *ref, struct sbx_err *err)
{
	char *argv[] = {"sh", "-c", (char *)stats_sh, NULL};
	struct sbx_exec_opts o = {.capture = 1, .max_output = 4096,
	    .cwd = "/", .timeout_ms = 30000};
	struct sbx_exec_result res = {0};
	struct dt d;
	json_t *s, *out = NULL, *lim;
	const char *id, *st;
	char buf[64], *e;
	double q, p;

	if (sbx_dt_ref_open(&d, ref, &id, &s, err) < 0)
		return NULL;
	st = sbx_json_str(s, "state");
	if (!st || strcmp(st, "started")) {
		/* Stopped: nothing runs, nothing to read. */
		sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%s' is %s, not "
		    "running", id, st ? st : "in no state");
		goto out;
	}
	if (sbx_dt_exec(ref, argv, &o, &res, err) < 0)
		goto out;
	if (res.exit_code || !res.out.data) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot read the sandbox's "
		    "cgroup (its shell exited %d)", res.exit_code);
		goto out;
	}
	out = json_object();
	json_object_set_new(out, "backend", json_string("daytona"));
	json_object_set_new(out, "id", json_string(id));
	json_object_set_new(out, "status", json_string("running"));
	json_object_set_new(out, "cpu_s", json_null());
	if (field(res.out.data, "cpu_us", buf, sizeof buf) &&
	    strtoll(buf, &e, 10) >= 0 && !*e)
		json_object_set_new(out, "cpu_s", json_real((double)strtoll(
		    buf, NULL, 10) / 1e6));
	/* cpu.max "QUOTA PERIOD" (v1: the same two files), else the
	 * sandbox's size. */
	if (field(res.out.data, "cpu_max", buf, sizeof buf) &&
	    sscanf(buf, "%lf %lf", &q, &p) == 2 && q > 0 && p > 0)
		json_object_set_new(out, "cpus", json_real(q / p));
	else
		json_object_set_new(out, "cpus", sbx_json_int(s, "cpu", 0) > 0 ?
		    json_real((double)sbx_json_int(s, "cpu", 0)) :
		    json_null());
	json_object_set_new(out, "memory_bytes", count(res.out.data, "mem"));
	lim = count(res.out.data, "mem_max");
	/* v1's "no limit" is a huge number: the sandbox's size then. */
	if (json_is_null(lim) || json_integer_value(lim) >= (1LL << 50)) {
		json_decref(lim);
		lim = sbx_json_int(s, "memory", 0) > 0 ? json_integer(
		    sbx_json_int(s, "memory", 0) << 30) : json_null();
	}
	json_object_set_new(out, "memory_limit", lim);
	json_object_set_new(out, "memory_cache", count(res.out.data,
	    "cache"));
	json_object_set_new(out, "disk_bytes", json_null());
	json_object_set_new(out, "disk_limit", sbx_json_int(s, "disk", 0) >
	    0 ? json_integer(sbx_json_int(s, "disk", 0) << 30) : json_null());
	json_object_set_new(out, "pids", count(res.out.data, "pids"));
	json_object_set_new(out, "pids_limit", count(res.out.data,
	    "pids_max"));
	json_object_set_new(out, "net_rx_bytes", count(res.out.data, "rx"));
	json_object_set_new(out, "net_tx_bytes", count(res.out.data, "tx"));
out:
	sbx_buf_release(&res.out);
	sbx_buf_release(&res.err);
	json_decref(s);
	sbx_dt_close(&d);
	return out;
}
