/* Closed-loop YCSB A/B/C/D/F load generator (bench/ycsb.py compiles and runs it) for Redis
 * hashes over RESP and for tuffdb's ekoDB REST face over HTTP/1.1.
 *
 *   ycsb_driver resp|http HOST PORT WORKLOAD CLIENTS RECORDCOUNT SEED WARMUP_S DURATION_S [OPS_CAP]
 *
 * (http: the bearer token in the environment variable YCSB_TOKEN, the table in YCSB_TABLE,
 * default usertable.) WORKLOAD is A, B, C, D, F or "trivial" (PING, GET /api/health: the
 * generator's ceiling). CLIENTS keep-alive connections (TCP_NODELAY), each a closed-loop
 * YCSB client with one request in flight (no pipelining), all driven by one thread through
 * epoll, as wrk -t1 and redis-benchmark do (a thread per client on one pinned core costs a
 * context switch per request; wrk needs one thread per connection to keep a client's
 * read-modify-write state, see ycsb.lua).
 * Why not redis-benchmark: it runs one command per process with uniform keys (-r) and a
 * request count rather than a duration, so it cannot play a YCSB mix at one client, nor a
 * 95/5 mix at eight, nor Zipfian keys. Operations (the same as bench/ycsb_gen/ycsb.lua and
 * bench/_ycsb_drivers.py):
 *   resp: read = HGETALL key (an empty reply is a miss: an error), update = HSET key fieldN
 *         <100 bytes>, insert (D) = HSET key field0 v0 .. field9 v9;
 *   http: read = GET /api/find/TABLE/KEY, update = PUT /api/update/TABLE/KEY
 *         {"fieldN": <100 bytes>}, insert = POST /api/insert/TABLE {"id": KEY, field0..9};
 *         a status outside 2xx is an error; responses need Content-Length (no chunking);
 *   rmw (F) = read then update of one field on the same connection: one op, one sample.
 * Keys "user" + fnv64(n) (YCSB's hashed insert order, as bench/_ycsb_work.py loads them);
 * ScrambledZipfian theta 0.99 over YCSB's 10^10 item space for A, B, C, F; SkewedLatest for D
 * (newest - Zipfian(RECORDCOUNT), disjoint per-client insert ranges, reads above
 * RECORDCOUNT mapped onto the client's own acknowledged keys). splitmix64 per client,
 * seeded SEED * 7919 + client.
 * Window: ops completing in [t0 + WARMUP_S, t0 + WARMUP_S + DURATION_S) count; a client
 * stops after its first op completing later (or after OPS_CAP counted ops). Latency from
 * CLOCK_MONOTONIC when an op's first command is sent to when its last reply is parsed, in a
 * 1 us histogram. Prints one line "YCSB_JSON {...}" (same shape as the wrk script).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HIST_US (1 << 21) /* 2.1 s at 1 us; slower ops land in the last bucket */
#define THETA 0.99
#define YCSB_ITEMS 10000000000ULL
#define YCSB_ZETAN 26.46902820178302
#define POOL 16
#define BUF (1 << 16)

static const char *workload, *token, *table, *hostport;
static int nclients, trivial, is_d, is_f, http;
static uint64_t recordcount, cap;
static double win_start, win_end, p_read;
static uint32_t *hist;

typedef struct {
    double items, zetan, eta;
} zipf_t;
static zipf_t zipf, latest;

typedef struct {
    int id, fd, done, stage; /* stage 1: the HSET half of a read-modify-write in flight */
    uint64_t rng, newest, own;
    double start;
    char in[BUF];
    size_t r, w;
    char out[8192];
    size_t olen;
    char key[32];
    uint64_t ops, errors, errors_all, inserted;
    double stop_us;
    char value[101];
    char pool[POOL][101];
} client_t;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double uniform(client_t *c) { return (double)(splitmix(&c->rng) >> 11) * 0x1.0p-53; }

static uint64_t fnv64(uint64_t n) {
    uint64_t h = 0xCBF29CE484222325ULL;
    for (int i = 0; i < 8; i++) {
        h ^= n & 0xFF;
        h *= 1099511628211ULL;
        n >>= 8;
    }
    if (h >> 63) h = (uint64_t)0 - h; /* Java's Math.abs of a signed long */
    return h;
}

static zipf_t zipfian(double items, double zetan) {
    zipf_t z = {items, zetan, 0};
    if (zetan <= 0) {
        z.zetan = 0;
        for (uint64_t i = 1; i <= (uint64_t)items; i++) z.zetan += 1.0 / pow((double)i, THETA);
    }
    double zeta2 = 1.0 + pow(0.5, THETA);
    z.eta = (1 - pow(2.0 / items, 1 - THETA)) / (1 - zeta2 / z.zetan);
    return z;
}

static uint64_t zipf_next(client_t *c, const zipf_t *z) {
    double u = uniform(c), uz = u * z->zetan;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + pow(0.5, THETA)) return 1;
    uint64_t r = (uint64_t)(z->items * pow(z->eta * u - z->eta + 1, 1.0 / (1.0 - THETA)));
    return r > (uint64_t)z->items - 1 ? (uint64_t)z->items - 1 : r;
}

/* ------------------------------------------------------------------ RESP */
/* Parses one reply from b[*pos..n): 1 complete (advances *pos), 0 incomplete, -1 bad. */
static int parse(const char *b, size_t n, size_t *pos, int *err, long long *elems) {
    const char *nl = memchr(b + *pos, '\n', n - *pos);
    if (!nl) return 0;
    char type = b[*pos];
    long long num = strtoll(b + *pos + 1, NULL, 10);
    size_t p = (size_t)(nl - b) + 1;
    if (elems) *elems = -1;
    switch (type) {
    case '+': case ':': break;
    case '-': *err = 1; break;
    case '$':
        if (num >= 0) {
            if (n - p < (size_t)num + 2) return 0;
            p += (size_t)num + 2;
        }
        break;
    case '*':
        if (elems) *elems = num;
        for (long long i = 0; i < num; i++) {
            int r = parse(b, n, &p, err, NULL);
            if (r <= 0) return r;
        }
        break;
    default: return -1;
    }
    *pos = p;
    return 1;
}

static void command(client_t *c, int argc, const char **argv) {
    char *p = c->out;
    p += sprintf(p, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(argv[i]);
        p += sprintf(p, "$%zu\r\n", n);
        memcpy(p, argv[i], n);
        p += n;
        *p++ = '\r';
        *p++ = '\n';
    }
    c->olen = (size_t)(p - c->out);
}

/* Parses one HTTP/1.1 response from b[*pos..n): 1 complete, 0 incomplete, -1 bad;
 * *err for a status outside 2xx; *elems = 1 for a 200 with a body (a found record). */
static int parse_http(const char *b, size_t n, size_t *pos, int *err, long long *elems) {
    const char *start = b + *pos, *end = memmem(start, n - *pos, "\r\n\r\n", 4);
    if (!end) return 0;
    if (end - start < 12 || memcmp(start, "HTTP/1.", 7) != 0) return -1;
    int status = atoi(start + 9);
    long long length = -1;
    for (const char *p = start; p < end;) {
        const char *eol = memmem(p, (size_t)(end - p) + 2, "\r\n", 2);
        if (!eol) break;
        if (eol - p > 15 && strncasecmp(p, "content-length:", 15) == 0) length = strtoll(p + 15, NULL, 10);
        p = eol + 2;
    }
    if (length < 0) return -1; /* no Content-Length: chunked or close-delimited, unsupported */
    size_t body = (size_t)(end - b) + 4;
    if (n - body < (size_t)length) return 0;
    *pos = body + (size_t)length;
    if (status < 200 || status > 299) *err = 1;
    *elems = status == 200 && length > 2 ? 1 : 0;
    return 1;
}

static void http_req(client_t *c, const char *method, const char *path, const char *body) {
    size_t blen = body ? strlen(body) : 0;
    int n = snprintf(c->out, sizeof c->out,
                     "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n", method, path,
                     hostport, token);
    if (body)
        n += snprintf(c->out + n, sizeof c->out - (size_t)n,
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", blen, body);
    else
        n += snprintf(c->out + n, sizeof c->out - (size_t)n, "\r\n");
    c->olen = (size_t)n;
}

static int flush_out(client_t *c) {
    size_t off = 0;
    while (off < c->olen) {
        ssize_t n = send(c->fd, c->out + off, c->olen - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            continue; /* an empty socket buffer takes a 4 KiB command at once: never long */
        } else {
            return -1;
        }
    }
    return 0;
}

static void rand_string(client_t *c, char *s, int n) {
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    for (int i = 0; i < n; i++) s[i] = alnum[splitmix(&c->rng) % 62];
    s[n] = 0;
}

static const char *fields[10] = {"field0", "field1", "field2", "field3", "field4",
                                 "field5", "field6", "field7", "field8", "field9"};

static void update_cmd(client_t *c) {
    const char *field = fields[splitmix(&c->rng) % 10];
    if (http) {
        char path[128], body[160];
        snprintf(path, sizeof path, "/api/update/%s/%s", table, c->key);
        snprintf(body, sizeof body, "{\"%s\":\"%s\"}", field, c->value);
        http_req(c, "PUT", path, body);
        return;
    }
    const char *argv[] = {"HSET", c->key, field, c->value};
    command(c, 4, argv);
}

static void read_cmd(client_t *c) {
    if (http) {
        char path[128];
        snprintf(path, sizeof path, "/api/find/%s/%s", table, c->key);
        http_req(c, "GET", path, NULL);
        return;
    }
    const char *argv[] = {"HGETALL", c->key};
    command(c, 2, argv);
}

static void insert_cmd(client_t *c) {
    const char *vals[10];
    for (int f = 0; f < 10; f++) vals[f] = c->pool[splitmix(&c->rng) % POOL];
    if (http) {
        char path[128], body[1400];
        int n = snprintf(body, sizeof body, "{\"id\":\"%s\"", c->key);
        for (int f = 0; f < 10; f++)
            n += snprintf(body + n, sizeof body - (size_t)n, ",\"%s\":\"%s\"", fields[f], vals[f]);
        snprintf(body + n, sizeof body - (size_t)n, "}");
        snprintf(path, sizeof path, "/api/insert/%s", table);
        http_req(c, "POST", path, body);
        return;
    }
    const char *argv[22] = {"HSET", c->key};
    for (int f = 0; f < 10; f++) {
        argv[2 + 2 * f] = fields[f];
        argv[3 + 2 * f] = vals[f];
    }
    command(c, 22, argv);
}

/* Picks the next op, builds its first command and sends it. */
static int next_op(client_t *c) {
    c->stage = 0;
    c->start = now_us();
    if (trivial) {
        if (http) {
            http_req(c, "GET", "/api/health", NULL);
        } else {
            const char *argv[] = {"PING"};
            command(c, 1, argv);
        }
        return flush_out(c);
    }
    int is_read = uniform(c) < p_read;
    uint64_t n;
    if (is_d) {
        if (!is_read) {
            c->newest = recordcount + (uint64_t)c->id + c->own * (uint64_t)nclients;
            c->own++;
            sprintf(c->key, "user%llu", (unsigned long long)fnv64(c->newest));
            insert_cmd(c);
            c->stage = 2; /* an insert */
            return flush_out(c);
        }
        uint64_t z = zipf_next(c, &latest);
        n = z > c->newest ? 0 : c->newest - z;
        if (n >= recordcount) { /* another client's key may not exist yet: read our own */
            long long off = (long long)(n - recordcount) - c->id;
            n = off >= 0 ? recordcount + (uint64_t)c->id + (uint64_t)(off / nclients) * (uint64_t)nclients
                         : recordcount - 1;
        }
    } else {
        n = fnv64(zipf_next(c, &zipf)) % recordcount;
    }
    sprintf(c->key, "user%llu", (unsigned long long)fnv64(n));
    if (is_read || is_f) {
        read_cmd(c);
        c->stage = is_read ? 3 : 0; /* 3: a plain read; 0: the read half of an rmw */
    } else {
        update_cmd(c);
        c->stage = 4; /* an update */
    }
    return flush_out(c);
}

/* A whole reply arrived: continue the op, or count it and start the next one. */
static int on_reply(client_t *c, int err, long long elems) {
    int read_half = !trivial && (c->stage == 3 || (is_f && c->stage == 0));
    if (read_half && elems <= 0) err = 1; /* a missing record: a read miss */
    if (!trivial && is_f && c->stage == 0 && !err) {
        update_cmd(c);
        c->stage = 1;
        return flush_out(c);
    }
    double t = now_us();
    if (err) c->errors_all++;
    if (c->stage == 2 && !err) c->inserted++;
    if (t >= win_start && t < win_end) {
        if (!err) {
            uint64_t us = (uint64_t)(t - c->start);
            hist[us < HIST_US ? us : HIST_US - 1]++;
            c->ops++;
        } else {
            c->errors++;
        }
    }
    if (t >= win_end || (cap && c->ops >= cap)) {
        c->stop_us = t - win_start;
        c->done = 1;
        return 0;
    }
    return next_op(c);
}

static int connect_to(const char *host, const char *port) {
    struct addrinfo hints = {0}, *res;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) return -1;
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

int main(int argc, char **argv) {
    if ((argc != 10 && argc != 11) || (strcmp(argv[1], "resp") != 0 && strcmp(argv[1], "http") != 0)) {
        fprintf(stderr, "usage: %s resp|http HOST PORT WORKLOAD CLIENTS RECORDCOUNT SEED WARMUP_S"
                " DURATION_S [OPS_CAP]\n", argv[0]);
        return 2;
    }
    http = strcmp(argv[1], "http") == 0;
    argv++; /* the rest as before: HOST PORT ... */
    argc--;
    static char hp[300];
    snprintf(hp, sizeof hp, "%s:%s", argv[1], argv[2]);
    hostport = hp;
    token = getenv("YCSB_TOKEN") ? getenv("YCSB_TOKEN") : "";
    table = getenv("YCSB_TABLE") ? getenv("YCSB_TABLE") : "usertable";
    workload = argv[3];
    nclients = atoi(argv[4]);
    recordcount = strtoull(argv[5], NULL, 10);
    uint64_t seed = strtoull(argv[6], NULL, 10);
    cap = argc == 10 ? strtoull(argv[9], NULL, 10) : 0;
    if (nclients < 1 || recordcount < 1 || !strchr("ABCDFt", workload[0])) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    trivial = strcmp(workload, "trivial") == 0;
    is_d = workload[0] == 'D';
    is_f = workload[0] == 'F';
    p_read = workload[0] == 'A' ? 0.5 : workload[0] == 'B' ? 0.95 : workload[0] == 'C' ? 1.0
           : workload[0] == 'D' ? 0.95 : 0.5;
    zipf = zipfian((double)YCSB_ITEMS, YCSB_ZETAN);
    if (is_d) latest = zipfian((double)recordcount, 0);
    hist = calloc(HIST_US, sizeof *hist);
    client_t *cs = calloc((size_t)nclients, sizeof *cs);
    int ep = epoll_create1(0);
    if (!hist || !cs || ep < 0) return 1;
    for (int i = 0; i < nclients; i++) {
        client_t *c = &cs[i];
        c->id = i;
        c->rng = seed * 7919 + (uint64_t)i;
        c->newest = recordcount - 1;
        c->stop_us = -1;
        rand_string(c, c->value, 100);
        for (int k = 0; k < POOL; k++) rand_string(c, c->pool[k], 100);
        c->fd = connect_to(argv[1], argv[2]);
        if (c->fd < 0) {
            fprintf(stderr, "connect: %s\n", strerror(errno));
            return 1;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    win_start = now_us() + atof(argv[7]) * 1e6;
    win_end = win_start + atof(argv[8]) * 1e6;
    int live = nclients, failed = 0;
    for (int i = 0; i < nclients; i++)
        if (next_op(&cs[i]) < 0) return 1;
    struct epoll_event evs[256];
    while (live > 0) {
        int n = epoll_wait(ep, evs, 256, 1000);
        if (n < 0 && errno != EINTR) break;
        for (int e = 0; e < n; e++) {
            client_t *c = evs[e].data.ptr;
            if (c->done) continue;
            if (c->r > 0 && c->r == c->w) c->r = c->w = 0;
            if (c->w == BUF) { /* compact (a reply never nears 64 KiB here) */
                memmove(c->in, c->in + c->r, c->w - c->r);
                c->w -= c->r;
                c->r = 0;
            }
            ssize_t got = recv(c->fd, c->in + c->w, BUF - c->w, 0);
            if (got <= 0) {
                if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                c->done = 1;
                failed++;
                live--;
                continue;
            }
            c->w += (size_t)got;
            for (;;) { /* one reply per op; at most one in flight, but be general */
                int err = 0;
                long long elems;
                size_t pos = c->r;
                int r = http ? parse_http(c->in, c->w, &pos, &err, &elems)
                             : parse(c->in, c->w, &pos, &err, &elems);
                if (r == 0) break;
                if (r < 0 || on_reply(c, err, elems) < 0) {
                    c->done = 1;
                    failed++;
                    break;
                }
                c->r = pos;
                if (c->done) break;
            }
            if (c->done) {
                live--;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
            }
        }
    }
    uint64_t ops = 0, errors = 0, errors_all = 0;
    printf("YCSB_JSON {\"threads\":[");
    for (int i = 0; i < nclients; i++) {
        client_t *c = &cs[i];
        ops += c->ops;
        errors += c->errors;
        errors_all += c->errors_all;
        printf("%s{\"id\":%d,\"ops\":%llu,\"errors\":%llu,\"inserted\":%llu,\"stop_us\":%.0f}",
               i ? "," : "", i, (unsigned long long)c->ops, (unsigned long long)c->errors,
               (unsigned long long)c->inserted, c->stop_us);
    }
    printf("],\"hist_us\":{");
    int first = 1;
    for (uint64_t us = 0; us < HIST_US; us++) {
        if (hist[us]) {
            printf("%s\"%llu\":%u", first ? "" : ",", (unsigned long long)us, hist[us]);
            first = 0;
        }
    }
    printf("},\"ops\":%llu,\"errors\":%llu,\"errors_all\":%llu,\"failed_threads\":%d}\n",
           (unsigned long long)ops, (unsigned long long)errors, (unsigned long long)errors_all,
           failed);
    return failed ? 1 : 0;
}
