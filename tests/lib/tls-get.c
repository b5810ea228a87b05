/* tls-get ADDRESS NAME PATH CAFILE: a GET of https://NAME/PATH from
 * ADDRESS port 443, for images with no HTTPS client of their own (a
 * busybox image in a qemu VM: busybox's wget offers no cipher suite for
 * EC certificates). Linked statically by the tests (-lssl -lcrypto), so
 * it resolves nothing itself: ADDRESS is an IPv4 address. The server's
 * chain is verified against CAFILE alone, and its name against NAME (also
 * the SNI); the response's body goes to stdout. Exit: 0, 1 the TLS
 * handshake or verification failed, 2 anything else. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(443)};
	char req[1024], buf[16384], *body;
	size_t have = 0;
	SSL_CTX *ctx;
	SSL *ssl;
	int s, n;

	if (argc != 5 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) {
		fprintf(stderr, "usage: tls-get ADDRESS NAME PATH CAFILE\n");
		return 2;
	}
	if ((s = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
		perror(argv[1]);
		return 2;
	}
	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || SSL_CTX_load_verify_locations(ctx, argv[4], NULL) != 1) {
		ERR_print_errors_fp(stderr);
		return 2;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, s);
	SSL_set_tlsext_host_name(ssl, argv[2]);
	SSL_set1_host(ssl, argv[2]);
	if (SSL_connect(ssl) != 1) {
		fprintf(stderr, "tls-get: handshake: %s\n",
		    X509_verify_cert_error_string(SSL_get_verify_result(ssl)));
		ERR_print_errors_fp(stderr);
		return 1;
	}
	snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s\r\n"
	    "Connection: close\r\n\r\n", argv[3], argv[2]);
	if (SSL_write(ssl, req, (int)strlen(req)) <= 0)
		return 2;
	while (have < sizeof buf - 1 &&
	    (n = SSL_read(ssl, buf + have, (int)(sizeof buf - 1 - have))) > 0)
		have += (size_t)n;
	buf[have] = '\0';
	if (!(body = strstr(buf, "\r\n\r\n")))
		return 2;
	fputs(body + 4, stdout);
	return 0;
}
