/* Listening socket of hwidd's HTTPS transport: parsed from "ADDR:PORT" and
 * bound here (not by MHD) so that a failure can say exactly why. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "error.h"
#include "http-internal.h"

/* "ADDR:PORT" with a numeric IPv4 address, or "[IPv6]:PORT". */
static int parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *ret_len) {
        char host[INET6_ADDRSTRLEN + 1];
        const char *port, *end;
        unsigned long p;
        char *e = NULL;

        if (!s || !*s)
                return hwid_fail(HWID_E_CONFIG, "no listen address given");
        if (s[0] == '[') {
                end = strchr(s, ']');
                if (!end || end[1] != ':')
                        return hwid_fail(HWID_E_CONFIG, "listen address '%s' is not [IPv6]:PORT", s);
                port = end + 2;
                s++;
        } else {
                end = strrchr(s, ':');
                if (!end || memchr(s, ':', (size_t) (end - s)))
                        return hwid_fail(HWID_E_CONFIG, "listen address '%s' is not ADDR:PORT or [IPv6]:PORT", s);
                port = end + 1;
        }
        if ((size_t) (end - s) >= sizeof(host))
                return hwid_fail(HWID_E_CONFIG, "listen address is too long");
        memcpy(host, s, (size_t) (end - s));
        host[end - s] = '\0';
        errno = 0;
        p = strtoul(port, &e, 10);
        if (!*port || *e || errno || p > 65535 || *port == '-' || *port == '+')
                return hwid_fail(HWID_E_CONFIG, "listen port '%s' is not a number from 0 to 65535", port);
        memset(ss, 0, sizeof(*ss));
        if (inet_pton(AF_INET, host, &((struct sockaddr_in *) ss)->sin_addr) == 1) {
                ((struct sockaddr_in *) ss)->sin_family = AF_INET;
                ((struct sockaddr_in *) ss)->sin_port = htons((uint16_t) p);
                *ret_len = sizeof(struct sockaddr_in);
        } else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *) ss)->sin6_addr) == 1) {
                ((struct sockaddr_in6 *) ss)->sin6_family = AF_INET6;
                ((struct sockaddr_in6 *) ss)->sin6_port = htons((uint16_t) p);
                *ret_len = sizeof(struct sockaddr_in6);
        } else
                return hwid_fail(HWID_E_CONFIG, "listen address '%s' is not a numeric IPv4 or IPv6 address", host);
        return 0;
}

int http_listen_open(const char *listen_on, int *ret_fd) {
        struct sockaddr_storage ss;
        socklen_t len = 0;
        int fd, one = 1, r, e;

        if ((r = parse_listen(listen_on, &ss, &len)) < 0)
                return r;
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return hwid_fail(HWID_E_IO, "cannot listen on %s: %s", listen_on, strerror(errno));
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ss.ss_family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *) &ss, len) < 0 || listen(fd, SOMAXCONN) < 0) {
                e = errno;
                close(fd);
                return hwid_fail(HWID_E_IO, "cannot listen on %s: %s", listen_on,
                                 e == EADDRINUSE ? "address in use" : strerror(e));
        }
        *ret_fd = fd;
        return 0;
}

int http_listen_port(int fd) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);

        if (fd < 0 || getsockname(fd, (struct sockaddr *) &ss, &len) < 0)
                return -1;
        return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                              : ((struct sockaddr_in *) &ss)->sin_port);
}
