/* conf.c - DIR/net.json as a snapshot of rules and resolvers, swapped
 * whole on SIGHUP and held by refs while connections use it */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "netd.h"

struct netd netd = {.mu = PTHREAD_MUTEX_INITIALIZER, .pidfd = -1,
    .tcp = -1, .udp = -1, .raw4 = -1, .raw6 = -1, .inside = -1};

static void
zfree(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

static void
conf_free(struct netd_conf *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->ninject; i++) {
		free(c->inject[i].host);
		free(c->inject[i].name);
		zfree(c->inject[i].value);
		zfree(c->inject[i].template);
	}
	free(c->inject);
	sbx_net_rules_free(&c->rules);
	free(c->id);
	if (c->px_pass) {
		explicit_bzero(c->px_pass, strlen(c->px_pass));
		free(c->px_pass);
	}
	free(c);
}

/* "IP", "IP:PORT" or "[v6]:PORT" (a v6 without a port is taken whole). */
static int
dns_parse(const char *s, struct netd_conf *c)
{
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
	    .ai_socktype = SOCK_DGRAM}, *ai;
	char host[INET6_ADDRSTRLEN + 32];
	const char *port = "53", *p;
	uint64_t v;
	size_t n;

	if (*s == '[') {
		if (!(p = strchr(s, ']')) || (p[1] && p[1] != ':'))
			return -1;
		n = (size_t)(p - s - 1);
		if (p[1])
			port = p + 2;
		s++;
	} else if ((p = strchr(s, ':')) && !strchr(p + 1, ':')) {
		n = (size_t)(p - s);
		port = p + 1;
	} else {
		n = strlen(s);
	}
	if (n == 0 || n >= sizeof host || sbx_parse_u64(port, 1, 65535,
	    &v) < 0)
		return -1;
	memcpy(host, s, n);
	host[n] = '\0';
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return -1;
	if (c->ndns < NETD_MAX_DNS) {
		memcpy(&c->dns[c->ndns], ai->ai_addr, ai->ai_addrlen);
		c->dnslen[c->ndns++] = ai->ai_addrlen;
	}
	freeaddrinfo(ai);
	return 0;
}

/* The host's resolvers, as its own lookups use them. Unreadable or
 * empty: none, and each query fails (logged) rather than going somewhere
 * nobody chose. */
static void
dns_resolv_conf(struct netd_conf *c)
{
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[512], *p, *e;

	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "nameserver", 10) != 0 ||
		    !isspace((unsigned char)line[10]))
			continue;
		for (p = line + 10; isspace((unsigned char)*p); p++)
			;
		for (e = p; *e && !isspace((unsigned char)*e); e++)
			;
		*e = '\0';
		/* Bare addresses only: "a:b" would read as v4 and port. */
		if (strchr(p, ':') && *p != '[') {
			char *w = sbx_xasprintf("[%s]", p);

			dns_parse(w, c);
			free(w);
		} else {
			dns_parse(p, c);
		}
	}
	fclose(f);
}

/* DIR/net.secret.json's "inject", when net.json names injections. */
static int
inject_load(const char *dir, const json_t *names, struct netd_conf *c,
    struct sbx_err *err)
{
	char *path;
	json_t *root, *a, *v;
	const char *host, *name, *value, *tmpl;
	size_t i;
	int rc = -1;

	if (!json_array_size(names))
		return 0;
	path = sbx_xasprintf("%s/net.secret.json", dir);
	if (!(root = sbx_json_load_object(path, err)))
		goto out;
	a = json_object_get(root, "inject");
	c->inject = sbx_xcalloc(json_array_size(a) + 1, sizeof *c->inject);
	json_array_foreach(a, i, v) {
		host = sbx_json_str(v, "host");
		name = sbx_json_str(v, "name");
		value = sbx_json_str(v, "value");
		tmpl = sbx_json_str(v, "template");
		if (!host || !name || (!value && !tmpl)) {
			sbx_err_set(err, SBX_EX_DATA, "'%s': injection %zu is "
			    "incomplete", path, i);
			goto out;
		}
		c->inject[c->ninject].host = sbx_xstrdup(host);
		c->inject[c->ninject].name = sbx_xstrdup(name);
		c->inject[c->ninject].value = value ? sbx_xstrdup(value) :
		    NULL;
		c->inject[c->ninject++].template = !value ? sbx_xstrdup(tmpl) :
		    NULL;
	}
	rc = 0;
out:
	/* jansson's copy of the values: gone with root, not wiped (it
	 * has no hook for that); ours are. */
	json_decref(root);
	free(path);
	return rc;
}

/* net.json's egress_proxy, and its password from net.secret.json
 * (which only sbx-create and sbx-net write; never printed). */
static int
proxy_load(const char *dir, const json_t *root, struct netd_conf *c,
    struct sbx_err *err)
{
	const json_t *u = json_object_get(root, "egress_proxy");
	char *path;
	json_t *sec;
	const char *pw;
	struct stat st;

	if (!u || json_is_null(u))
		return 0;
	if (!json_is_string(u))
		return sbx_err_set(err, SBX_EX_DATA, "net.json: "
		    "\"egress_proxy\" is not a string");
	if (sbx_net_proxy_parse(json_string_value(u), &c->px, err) < 0)
		return -1;
	c->proxy = 1;
	if (!*c->px.user)
		return 0;
	path = sbx_xasprintf("%s/net.secret.json", dir);
	sec = stat(path, &st) == 0 ? sbx_json_load_object(path, err) : NULL;
	free(path);
	if ((pw = sbx_json_str(json_object_get(sec, "egress_proxy"),
	    "password"))) {
		c->px_pass = sbx_xstrdup(pw);
		explicit_bzero((char *)pw, strlen(pw));
	}
	json_decref(sec);
	if (!c->px_pass)
		return sbx_err_set(err, SBX_EX_CRED, "no password for the "
		    "egress proxy's user '%s' in net.secret.json", c->px.user);
	if (strlen(c->px_pass) > 255)
		return sbx_err_set(err, SBX_EX_USAGE, "the egress proxy's "
		    "password is longer than 255 bytes");
	return 0;
}

int
netd_conf_load(const char *dir, struct netd_conf **out,
    struct sbx_err *err)
{
	struct netd_conf *c = sbx_xcalloc(1, sizeof *c);
	char *path = sbx_xasprintf("%s/net.json", dir);
	json_t *root, *dns, *v;
	const char *id;
	size_t i;
	int rc = -1;

	if (!(root = sbx_json_load_object(path, err)))
		goto out;
	id = sbx_json_str(root, "id");
	c->id = sbx_xstrdup(id ? id : "");
	/* Deny with published ports: only those in, nothing out. */
	c->egress = !sbx_json_str(root, "network") || strcmp(sbx_json_str(
	    root, "network"), "deny") != 0;
	if (sbx_net_rules_from_json(root, &c->rules, err) < 0)
		goto out;
	if (inject_load(dir, json_object_get(root, "inject"), c, err) < 0)
		goto out;
	c->want_host = sbx_net_rules_want_host(&c->rules) || c->ninject;
	dns = json_object_get(root, "dns");
	if (dns && !json_is_array(dns) && !json_is_null(dns)) {
		sbx_err_set(err, SBX_EX_DATA, "'%s': \"dns\" is not an array",
		    path);
		goto out;
	}
	json_array_foreach(dns, i, v) {
		if (!json_is_string(v) || dns_parse(json_string_value(v),
		    c) < 0) {
			sbx_err_set(err, SBX_EX_DATA, "'%s': invalid resolver "
			    "%s", path, json_is_string(v) ?
			    json_string_value(v) : "(not a string)");
			goto out;
		}
	}
	if (c->ndns == 0)
		dns_resolv_conf(c);
	if (proxy_load(dir, root, c, err) < 0)
		goto out;
	c->refs = 1;
	*out = c;
	c = NULL;
	rc = 0;
out:
	conf_free(c);
	json_decref(root);
	free(path);
	return rc;
}

struct netd_conf *
netd_conf_get(void)
{
	struct netd_conf *c;

	pthread_mutex_lock(&netd.mu);
	c = netd.conf;
	c->refs++;
	pthread_mutex_unlock(&netd.mu);
	return c;
}

void
netd_conf_put(struct netd_conf *c)
{
	int last;

	pthread_mutex_lock(&netd.mu);
	last = --c->refs == 0;
	pthread_mutex_unlock(&netd.mu);
	if (last)
		conf_free(c);
}

void
netd_conf_set(struct netd_conf *c)
{
	struct netd_conf *old;

	pthread_mutex_lock(&netd.mu);
	old = netd.conf;
	netd.conf = c;
	pthread_mutex_unlock(&netd.mu);
	netd_resolve_flush();
	if (old)
		netd_conf_put(old);
}

void
netd_addr_fmt(const struct sockaddr *sa, char *buf, size_t n, int *port)
{
	const struct sockaddr_in *a4 = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;

	*port = 0;
	buf[0] = '\0';
	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &a4->sin_addr, buf, (socklen_t)n);
		*port = ntohs(a4->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &a6->sin6_addr, buf, (socklen_t)n);
		*port = ntohs(a6->sin6_port);
	}
}
