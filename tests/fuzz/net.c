/* net.c - fuzz the network parsers (lib/net/): rules, ports, inject
 * headers, proxy URLs, sniffed first bytes; the first byte picks one */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "sbx.h"
#include "net/net.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_err err = {0};
	struct sbx_net_rule r;
	struct sbx_net_rules rs = {0};
	struct sbx_net_proxy px;
	unsigned port, host_port;
	char host[256], *s;
	json_t *list, *j;
	const char *bad;
	struct sockaddr_in sin = {.sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(0x5db8d822)};
	struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6,
	    .sin6_addr.s6_addr = {0x20, 0x01, 0x0d, 0xb8, [15] = 1}};

	if (!size)
		return 0;
	s = fuzz_str(data + 1, size - 1);
	switch (data[0] % 6) {
	case 0:
		if (sbx_net_rule_parse(s, &r, &err) == 0) {
			rs.allow = &r;
			rs.nallow = 1;
			(void)sbx_net_allowed(&rs, (struct sockaddr *)&sin,
			    "example.com", 0);
			rs.allow = NULL;
			rs.nallow = 0;
			rs.deny = &r;
			rs.ndeny = 1;
			(void)sbx_net_allowed(&rs, (struct sockaddr *)&sin6,
			    "a.example.com", 0);
		}
		break;
	case 1:
		(void)sbx_net_port_parse(s, &port, &host_port, &err);
		break;
	case 2:
		list = json_array();
		(void)sbx_net_inject_parse(s, list, &err);
		json_decref(list);
		break;
	case 3:
		(void)sbx_net_proxy_parse(s, &px, &err);
		break;
	case 4:
		if (sbx_net_sniff(data + 1, size - 1, host, sizeof host) == 1 &&
		    strlen(host) >= sizeof host)
			abort();
		break;
	case 5:
		/* {"allow_out": [...], "deny_out": [...]}, as a request or a
		 * state file gives it. */
		if (!(j = json_loads(s, 0, NULL)))
			break;
		if (sbx_net_rules_from_json(j, &rs, &err) == 0) {
			(void)sbx_net_rules_want_host(&rs);
			sbx_net_rules_free(&rs);
		}
		(void)sbx_net_e2b_check(json_object_get(j, "allow_out"),
		    json_object_get(j, "deny_out"), 0, &bad, &err);
		json_decref(j);
		break;
	}
	free(s);
	return 0;
}
