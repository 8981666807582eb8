/* A null HTTP/1.1 server for measuring wrk's own ceiling (bench/ycsb.py compiles and runs
 * it on the server core): one epoll thread, keep-alive, every request (GET, no body) gets
 * the same small 200 JSON reply, as tuffdb's GET /api/health would. It prints
 * "http_ok ready on PORT" and serves until killed.
 *
 *   http_ok
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 16384

typedef struct {
    int fd;
    size_t len;
    char buf[BUF];
} conn_t;

static const char REPLY[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            "Content-Length: 15\r\n\r\n{\"status\":\"ok\"}";

int main(void) {
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 512) < 0 ||
        getsockname(ls, (struct sockaddr *)&a, &alen) < 0) {
        perror("http_ok");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    printf("http_ok ready on %d\n", ntohs(a.sin_port));
    fflush(stdout);
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            if (c == NULL) {
                int fd = accept(ls, NULL, NULL);
                if (fd < 0) continue;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                c = calloc(1, sizeof *c);
                c->fd = fd;
                struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
                continue;
            }
            ssize_t got = recv(c->fd, c->buf + c->len, BUF - c->len, 0);
            if (got <= 0) {
                if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                close(c->fd);
                free(c);
                continue;
            }
            c->len += (size_t)got;
            char *p = c->buf, *end;
            while ((end = memmem(p, c->len - (size_t)(p - c->buf), "\r\n\r\n", 4)) != NULL) {
                if (send(c->fd, REPLY, sizeof REPLY - 1, MSG_NOSIGNAL) < 0) break;
                p = end + 4;
            }
            c->len -= (size_t)(p - c->buf);
            memmove(c->buf, p, c->len);
            if (c->len == BUF) c->len = 0; /* not HTTP: drop it */
        }
    }
}
