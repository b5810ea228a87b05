/* netrules.c - TAP unit tests of the egress rules: parsing, protected
 * addresses and the verdict (lib/net/rules.c) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/net.h"
#include "sbx.h"
#include "tap.h"

/* ip as a sockaddr_in or sockaddr_in6 (static: one at a time). */
static const struct sockaddr *
sa(const char *ip)
{
	static struct sockaddr_storage ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof ss);
	if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
	} else if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
	} else {
		printf("# bad test address %s\n", ip);
		exit(2);
	}
	return (const struct sockaddr *)&ss;
}

/* text parses as a CIDR rule of family, network address net, prefix. */
static int
cidr_is(const char *text, int family, const char *net, int prefix)
{
	struct sbx_net_rule r;
	struct sbx_err err = {0};
	unsigned char want[16] = {0};

	if (sbx_net_rule_parse(text, &r, &err) < 0) {
		printf("# %s: %s\n", text, err.msg);
		return 0;
	}
	inet_pton(family, net, want);
	return r.kind == SBX_NR_CIDR && r.family == family &&
	    r.prefix == prefix && !memcmp(r.addr, want, sizeof want);
}

static int
name_is(const char *text, enum sbx_net_kind kind, const char *domain)
{
	struct sbx_net_rule r;
	struct sbx_err err = {0};

	if (sbx_net_rule_parse(text, &r, &err) < 0) {
		printf("# %s: %s\n", text, err.msg);
		return 0;
	}
	return r.kind == kind && !strcmp(r.domain, domain);
}

/* text is refused with SBX_EX_USAGE and "invalid rule 'TEXT': ...". */
static int
rule_bad(const char *text)
{
	struct sbx_net_rule r;
	struct sbx_err err = {0};
	char want[400];

	snprintf(want, sizeof want, "invalid rule '%s': ", text);
	if (sbx_net_rule_parse(text, &r, &err) == 0) {
		printf("# '%s' was accepted\n", text);
		return 0;
	}
	return err.code == SBX_EX_USAGE &&
	    !strncmp(err.msg, want, strlen(want)) &&
	    strlen(err.msg) > strlen(want);
}

/* Rules from a JSON text, which must parse. */
static struct sbx_net_rules
rules_of(const char *json)
{
	struct sbx_net_rules rs;
	struct sbx_err err = {0};
	json_t *j = json_loads(json, 0, NULL);

	if (!j || sbx_net_rules_from_json(j, &rs, &err) < 0) {
		printf("# %s: %s\n", json, err.msg);
		exit(2);
	}
	json_decref(j);
	return rs;
}

static int
allowed(const char *json, const char *ip, const char *host)
{
	struct sbx_net_rules rs = rules_of(json);
	int r = sbx_net_allowed(&rs, sa(ip), host, 0);

	sbx_net_rules_free(&rs);
	return r;
}

static void
t_addresses(void)
{
	CHECK(cidr_is("1.2.3.4", AF_INET, "1.2.3.4", 32));
	CHECK(cidr_is("10.0.0.0/8", AF_INET, "10.0.0.0", 8));
	CHECK(cidr_is("0.0.0.0/0", AF_INET, "0.0.0.0", 0));
	CHECK(cidr_is("192.168.1.7/32", AF_INET, "192.168.1.7", 32));
	CHECK(cidr_is("2001:db8::1", AF_INET6, "2001:db8::1", 128));
	CHECK(cidr_is("2001:DB8::/32", AF_INET6, "2001:db8::", 32));
	CHECK(cidr_is("::/0", AF_INET6, "::", 0));
}

static void
t_host_bits_masked(void)
{
	CHECK(cidr_is("10.1.2.3/8", AF_INET, "10.0.0.0", 8));
	CHECK(cidr_is("172.31.255.255/12", AF_INET, "172.16.0.0", 12));
	CHECK(cidr_is("1.2.3.4/0", AF_INET, "0.0.0.0", 0));
	CHECK(cidr_is("2001:db8:ffff::1/36", AF_INET6, "2001:db8:f000::",
	    36));
}

static void
t_v4_mapped_rule(void)
{
	CHECK(cidr_is("::ffff:10.1.2.3", AF_INET, "10.1.2.3", 32));
	CHECK(cidr_is("::ffff:10.0.0.0/104", AF_INET, "10.0.0.0", 8));
	/* Below /96 it is no longer a v4 network. */
	CHECK(cidr_is("::ffff:0:0/80", AF_INET6, "::", 80));
}

static void
t_domains(void)
{
	CHECK(name_is("example.com", SBX_NR_DOMAIN, "example.com"));
	CHECK(name_is("API.Example.COM", SBX_NR_DOMAIN, "api.example.com"));
	CHECK(name_is("example.com.", SBX_NR_DOMAIN, "example.com"));
	CHECK(name_is("localhost", SBX_NR_DOMAIN, "localhost"));
	CHECK(name_is("a-b.c-d.test", SBX_NR_DOMAIN, "a-b.c-d.test"));
	CHECK(name_is("1.2.3.example", SBX_NR_DOMAIN, "1.2.3.example"));
	CHECK(name_is("*.example.org", SBX_NR_WILDCARD, "example.org"));
	CHECK(name_is("*.Example.ORG.", SBX_NR_WILDCARD, "example.org"));
	CHECK(name_is("all", SBX_NR_ALL, ""));
	CHECK(name_is("ALL", SBX_NR_ALL, ""));
}

static void
t_domain_limits(void)
{
	char label[64], name[400];

	memset(label, 'a', 63);
	label[63] = '\0';
	snprintf(name, sizeof name, "%s.test", label);
	CHECK(name_is(name, SBX_NR_DOMAIN, name));
	snprintf(name, sizeof name, "a%s.test", label);
	CHECK(rule_bad(name));
	/* 253 characters, and one more. */
	snprintf(name, sizeof name, "%s.%s.%s.%.61s", label, label, label,
	    label);
	CHECK(strlen(name) == 253);
	CHECK(name_is(name, SBX_NR_DOMAIN, name));
	snprintf(name, sizeof name, "%s.%s.%s.%.62s", label, label, label,
	    label);
	CHECK(rule_bad(name));
	/* The trailing dot does not count. */
	snprintf(name, sizeof name, "%s.%s.%s.%.61s.", label, label, label,
	    label);
	CHECK(strlen(name) == 254);
	{
		struct sbx_net_rule r;
		struct sbx_err err = {0};

		CHECK(sbx_net_rule_parse(name, &r, &err) == 0);
		CHECK(strlen(r.domain) == 253);
	}
}

static void
t_bad_rules(void)
{
	static const char *bad[] = {
		"", "*", "*.", "*foo", "*foo.com", "**.a.com", "*.*.a.com",
		"a.*.com", "a..b", ".a.com", "a.com..", ".", "-a.com",
		"a-.com", "a.-b.com", "a b", "a_b.com", "http://x",
		"example.com/", "example.com:443", "1.2.3.4/33",
		"::/129", "1.2.3.4/", "1.2.3.4/x", "1.2.3.4/-1", "1.2.3.4/+8",
		"1.2.3.4/8/8", "1.2.3.4/0008", "1.2.3.256", "1.2.3", "123",
		"01.2.3.4", "fe80::1%eth0", "[::1]", "a.com\n",
	};
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (!rule_bad(bad[i])) {
			printf("# not refused: '%s'\n", bad[i]);
			CHECK(0);
		}
}

static void
t_from_json(void)
{
	struct sbx_net_rules rs;
	struct sbx_err err = {0};
	json_t *j;

	rs = rules_of("{\"allow_out\":[\"1.2.3.4\",\"a.test\"],"
	    "\"deny_out\":[\"all\"]}");
	CHECK(rs.nallow == 2 && rs.ndeny == 1);
	CHECK(rs.allow[1].kind == SBX_NR_DOMAIN && rs.deny[0].kind ==
	    SBX_NR_ALL);
	CHECK(sbx_net_rules_want_host(&rs));
	sbx_net_rules_free(&rs);
	CHECK(rs.allow == NULL && rs.nallow == 0);

	rs = rules_of("{}");
	CHECK(rs.nallow == 0 && rs.ndeny == 0 && !rs.allow && !rs.deny);
	CHECK(!sbx_net_rules_want_host(&rs));
	sbx_net_rules_free(&rs);

	rs = rules_of("{\"id\":\"x\",\"deny_out\":[\"10.0.0.0/8\"],"
	    "\"allow_out\":null}");
	CHECK(rs.nallow == 0 && rs.ndeny == 1);
	CHECK(!sbx_net_rules_want_host(&rs));
	sbx_net_rules_free(&rs);

	rs = rules_of("{\"deny_out\":[\"*.a.test\"]}");
	CHECK(sbx_net_rules_want_host(&rs));
	sbx_net_rules_free(&rs);

	/* A bad rule: the message names it, the rules stay empty. */
	j = json_loads("{\"allow_out\":[\"1.2.3.4\"],"
	    "\"deny_out\":[\"a.test\",\"a..b\"]}", 0, NULL);
	CHECK(sbx_net_rules_from_json(j, &rs, &err) == -1);
	CHECK(err.code == SBX_EX_USAGE);
	CHECK(!strncmp(err.msg, "invalid rule 'a..b': ", 21));
	CHECK(!rs.allow && !rs.deny && !rs.nallow && !rs.ndeny);
	json_decref(j);

	j = json_loads("{\"allow_out\":\"1.2.3.4\"}", 0, NULL);
	CHECK(sbx_net_rules_from_json(j, &rs, &err) == -1);
	CHECK(strstr(err.msg, "allow_out") && !rs.allow);
	json_decref(j);

	j = json_loads("{\"deny_out\":[\"a.test\",7]}", 0, NULL);
	CHECK(sbx_net_rules_from_json(j, &rs, &err) == -1);
	CHECK(strstr(err.msg, "deny_out") && !rs.deny && !rs.ndeny);
	json_decref(j);

	j = json_loads("[]", 0, NULL);
	CHECK(sbx_net_rules_from_json(j, &rs, &err) == -1);
	json_decref(j);
}

static void
t_protected(void)
{
	static const struct {
		const char *ip;
		enum sbx_net_protect want;
	} t[] = {
		{"127.0.0.1", SBX_NP_LOOPBACK},
		{"127.255.255.254", SBX_NP_LOOPBACK},
		{"::1", SBX_NP_LOOPBACK},
		{"::ffff:127.0.0.1", SBX_NP_LOOPBACK},
		{"0.0.0.0", SBX_NP_LOCAL},
		{"0.1.2.3", SBX_NP_LOCAL},
		{"224.0.0.1", SBX_NP_LOCAL},
		{"239.255.255.250", SBX_NP_LOCAL},
		{"240.0.0.1", SBX_NP_LOCAL},
		{"255.255.255.255", SBX_NP_LOCAL},
		{"::", SBX_NP_LOCAL},
		{"ff02::1", SBX_NP_LOCAL},
		{"169.254.169.254", SBX_NP_LINKLOCAL},
		{"::ffff:169.254.169.254", SBX_NP_LINKLOCAL},
		{"fe80::1", SBX_NP_LINKLOCAL},
		{"febf::1", SBX_NP_LINKLOCAL},
		{"10.0.0.1", SBX_NP_PRIVATE},
		{"172.16.0.1", SBX_NP_PRIVATE},
		{"172.31.255.255", SBX_NP_PRIVATE},
		{"192.168.0.1", SBX_NP_PRIVATE},
		{"100.64.0.1", SBX_NP_PRIVATE},
		{"100.127.255.255", SBX_NP_PRIVATE},
		{"fc00::1", SBX_NP_PRIVATE},
		{"fd00::100", SBX_NP_PRIVATE},
		{"::ffff:10.0.0.1", SBX_NP_PRIVATE},
		/* Just outside, and the tests' internet. */
		{"172.15.255.255", SBX_NP_NONE},
		{"172.32.0.0", SBX_NP_NONE},
		{"100.63.255.255", SBX_NP_NONE},
		{"100.128.0.0", SBX_NP_NONE},
		{"169.253.0.1", SBX_NP_NONE},
		{"126.255.255.255", SBX_NP_NONE},
		{"128.0.0.1", SBX_NP_NONE},
		{"223.255.255.255", SBX_NP_NONE},
		{"198.51.100.7", SBX_NP_NONE},
		{"198.18.0.1", SBX_NP_NONE},
		{"198.19.255.255", SBX_NP_NONE},
		{"192.0.2.1", SBX_NP_NONE},
		{"::2", SBX_NP_NONE},
		{"fec0::1", SBX_NP_NONE},
		{"fe00::1", SBX_NP_NONE},
		{"2001:db8::1", SBX_NP_NONE},
		{"::ffff:198.18.0.1", SBX_NP_NONE},
	};
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++)
		if (sbx_net_protected(sa(t[i].ip), 0) != t[i].want) {
			printf("# %s: %d, not %d\n", t[i].ip,
			    sbx_net_protected(sa(t[i].ip), 0), t[i].want);
			CHECK(0);
		}
	/* The host's own address; a class says more when there is one. */
	CHECK(sbx_net_protected(sa("198.18.0.1"), 1) == SBX_NP_HOST);
	CHECK(sbx_net_protected(sa("10.0.0.1"), 1) == SBX_NP_PRIVATE);
	CHECK(sbx_net_protected(sa("127.0.0.1"), 1) == SBX_NP_LOOPBACK);
}

static void
t_no_rules(void)
{
	CHECK(allowed("{}", "198.18.0.1", NULL));
	CHECK(allowed("{}", "2001:db8::1", "a.test"));
	CHECK(!allowed("{}", "10.0.0.1", NULL));
	CHECK(!allowed("{}", "169.254.169.254", NULL));
	CHECK(!allowed("{}", "127.0.0.1", NULL));
	CHECK(!allowed("{}", "::1", NULL));
	CHECK(!allowed("{}", "255.255.255.255", NULL));
}

static void
t_protected_opened_by_cidr_only(void)
{
	CHECK(allowed("{\"allow_out\":[\"10.1.0.0/16\"]}", "10.1.2.3", NULL));
	CHECK(!allowed("{\"allow_out\":[\"10.1.0.0/16\"]}", "10.2.0.1",
	    NULL));
	CHECK(allowed("{\"allow_out\":[\"169.254.169.254\"]}",
	    "169.254.169.254", NULL));
	CHECK(allowed("{\"allow_out\":[\"fd00::/8\"]}", "fd00::1", NULL));
	CHECK(allowed("{\"allow_out\":[\"10.0.0.0/8\"]}", "::ffff:10.0.0.1",
	    NULL));
	/* all, /0 and names never open one. */
	CHECK(!allowed("{\"allow_out\":[\"all\"]}", "10.0.0.1", NULL));
	CHECK(!allowed("{\"allow_out\":[\"0.0.0.0/0\"]}", "10.0.0.1", NULL));
	CHECK(!allowed("{\"allow_out\":[\"::/0\"]}", "fd00::1", NULL));
	CHECK(!allowed("{\"allow_out\":[\"metadata.test\"]}",
	    "169.254.169.254", "metadata.test"));
	CHECK(!allowed("{\"allow_out\":[\"*.test\"]}", "10.0.0.1", "a.test"));
	/* Allowing it does not let a deny rule close it again, as for any
	 * address: allow wins. */
	CHECK(allowed("{\"allow_out\":[\"10.0.0.0/8\"],"
	    "\"deny_out\":[\"10.0.0.1\"]}", "10.0.0.1", NULL));
}

static void
t_host_address(void)
{
	struct sbx_net_rules rs = rules_of("{\"allow_out\":[\"all\"]}");

	CHECK(!sbx_net_allowed(&rs, sa("198.18.0.1"), NULL, 1));
	sbx_net_rules_free(&rs);
	rs = rules_of("{\"allow_out\":[\"198.18.0.1\"]}");
	CHECK(sbx_net_allowed(&rs, sa("198.18.0.1"), NULL, 1));
	sbx_net_rules_free(&rs);
	rs = rules_of("{}");
	CHECK(!sbx_net_allowed(&rs, sa("198.18.0.1"), "a.test", 1));
	sbx_net_rules_free(&rs);
}

static void
t_allow_wins(void)
{
	const char *r = "{\"allow_out\":[\"198.18.1.0/24\",\"a.test\"],"
	    "\"deny_out\":[\"all\"]}";

	CHECK(allowed(r, "198.18.1.5", NULL));
	CHECK(!allowed(r, "198.18.2.5", NULL));
	CHECK(allowed(r, "198.18.2.5", "a.test"));
	CHECK(allowed(r, "198.18.2.5", "A.Test"));
	CHECK(!allowed(r, "198.18.2.5", "b.test"));
	CHECK(!allowed(r, "2001:db8::1", NULL));
	CHECK(allowed("{\"allow_out\":[\"all\"],"
	    "\"deny_out\":[\"198.51.100.7\"]}", "198.51.100.7", NULL));
	CHECK(allowed("{\"allow_out\":[\"198.51.100.7\"],"
	    "\"deny_out\":[\"198.51.100.7\"]}", "198.51.100.7", NULL));
}

static void
t_deny(void)
{
	const char *r = "{\"deny_out\":[\"198.18.1.0/24\",\"bad.test\","
	    "\"*.evil.test\",\"2001:db8::/32\"]}";

	CHECK(!allowed(r, "198.18.1.1", NULL));
	CHECK(!allowed(r, "::ffff:198.18.1.1", NULL));
	CHECK(allowed(r, "198.18.2.1", NULL));
	CHECK(!allowed(r, "198.18.2.1", "bad.test"));
	CHECK(allowed(r, "198.18.2.1", "notbad.test"));
	CHECK(allowed(r, "198.18.2.1", "a.bad.test"));
	CHECK(!allowed(r, "198.18.2.1", "a.evil.test"));
	CHECK(!allowed(r, "198.18.2.1", "a.b.evil.test"));
	CHECK(allowed(r, "198.18.2.1", "evil.test"));
	CHECK(allowed(r, "198.18.2.1", "notevil.test"));
	CHECK(!allowed(r, "2001:db8:1::1", NULL));
	CHECK(allowed(r, "2001:db9::1", NULL));
	/* A v4 rule never matches a v6 address, nor the reverse. */
	CHECK(allowed("{\"deny_out\":[\"0.0.0.0/0\"]}", "2001:db8::1", NULL));
	CHECK(!allowed("{\"deny_out\":[\"0.0.0.0/0\"]}", "::ffff:198.51.100.7",
	    NULL));
	CHECK(allowed("{\"deny_out\":[\"::/0\"]}", "198.51.100.7", NULL));
	CHECK(!allowed("{\"deny_out\":[\"all\"]}", "2001:db8::1", NULL));
}

static void
t_wildcard_allow(void)
{
	const char *r = "{\"allow_out\":[\"*.example.org\"],"
	    "\"deny_out\":[\"all\"]}";

	CHECK(allowed(r, "198.18.0.1", "a.example.org"));
	CHECK(allowed(r, "198.18.0.1", "a.b.example.org"));
	CHECK(!allowed(r, "198.18.0.1", "example.org"));
	CHECK(!allowed(r, "198.18.0.1", "aexample.org"));
	CHECK(!allowed(r, "198.18.0.1", ".example.org"));
	CHECK(!allowed(r, "198.18.0.1", "example.org.evil"));
	CHECK(!allowed(r, "198.18.0.1", NULL));
}

/* E2B's constraints: verdict and the entry named. */
static int
e2b(const char *allow, const char *deny, int all_denied, int want,
    const char *want_bad)
{
	json_t *a = json_loads(allow, 0, NULL), *d = json_loads(deny, 0, NULL);
	struct sbx_err err = {0};
	const char *bad;
	int got = (int)sbx_net_e2b_check(a, d, all_denied, &bad, &err);
	int ok = got == want && (want_bad ? bad && !strcmp(bad, want_bad) :
	    !bad);

	if (!ok)
		printf("# %s %s: %d '%s'\n", allow, deny, got, bad ? bad : "");
	json_decref(a);
	json_decref(d);
	return ok;
}

static void
t_e2b_check(void)
{
	CHECK(e2b("[\"198.18.0.1\"]", "[\"10.0.0.0/8\"]", 0, SBX_NE_OK, NULL));
	CHECK(e2b("[\"a.test\"]", "[\"0.0.0.0/0\"]", 0, SBX_NE_OK,
	    "a.test"));
	CHECK(e2b("[\"*.a.test\"]", "[\"all\"]", 0, SBX_NE_OK, "*.a.test"));
	CHECK(e2b("[\"a.test\"]", "[]", 1, SBX_NE_OK, "a.test"));
	CHECK(e2b("[\"a.test\"]", "[]", 0, SBX_NE_ALLOW_DOMAIN, "a.test"));
	/* E2B wants 0.0.0.0/0 itself: ::/0 or a wide v4 CIDR is not it */
	CHECK(e2b("[\"a.test\"]", "[\"::/0\"]", 0, SBX_NE_ALLOW_DOMAIN,
	    "a.test"));
	CHECK(e2b("[\"a.test\"]", "[\"0.0.0.0/1\"]", 0, SBX_NE_ALLOW_DOMAIN,
	    "a.test"));
	CHECK(e2b("[]", "[\"a.test\"]", 0, SBX_NE_DENY_DOMAIN, "a.test"));
	CHECK(e2b("[\"1.2.3.4/33\"]", "[]", 0, SBX_NE_RULE, "1.2.3.4/33"));
	CHECK(e2b("[7]", "[]", 0, SBX_NE_RULE, NULL));
	CHECK(e2b("null", "null", 0, SBX_NE_OK, NULL));
}

static const struct tap_test tests[] = {
	{"IPs and CIDRs parse, v4 and v6", t_addresses},
	{"a CIDR's host bits are masked, not refused", t_host_bits_masked},
	{"a v4-mapped v6 rule is a v4 rule", t_v4_mapped_rule},
	{"domains, single labels, wildcards and all", t_domains},
	{"labels up to 63, names up to 253, trailing dot aside",
	    t_domain_limits},
	{"bad rules fail with usage and name the rule", t_bad_rules},
	{"rules from JSON; a bad one leaves them empty", t_from_json},
	{"each protected class, and its edges", t_protected},
	{"no rules: public allowed, protected denied", t_no_rules},
	{"only an allow CIDR (not /0 or all) opens a protected address",
	    t_protected_opened_by_cidr_only},
	{"the host's own address is protected", t_host_address},
	{"allow wins over deny", t_allow_wins},
	{"deny by CIDR, name, wildcard and all", t_deny},
	{"a wildcard matches strictly below its domain", t_wildcard_allow},
	{"E2B's constraints on allowOut and denyOut", t_e2b_check},
};

int
main(void)
{
	return tap_run(tests, sizeof tests / sizeof tests[0]);
}
