/* Closed-loop YCSB A/B/C/D/F driver for Redis hashes (bench/ycsb.py compiles and runs it).
 *
 *   redis_ycsb HOST PORT WORKLOAD THREADS RECORDCOUNT SEED WARMUP_S DURATION_S [OPS_CAP]
 *
 * WORKLOAD is A, B, C, D, F or "trivial" (PING: the generator's ceiling). One POSIX thread
 * per client, each with one blocking TCP connection (TCP_NODELAY) and one request in flight
 * (no pipelining). Why not redis-benchmark: it runs one command per process with uniform
 * keys (-r) and a request count rather than a duration, so it cannot play a YCSB mix at one
 * client, nor a 95/5 mix at eight, nor Zipfian keys; this driver plays exactly the mixes,
 * keys and distributions of bench/ycsb_gen/ycsb.lua (the wrk script for tuffdb's HTTP face):
 *   read = HGETALL key (an empty reply is a miss: an error), update = HSET key fieldN
 *   <100 bytes>, insert (D) = HSET key field0 v0 .. field9 v9, rmw (F) = HGETALL then HSET
 *   of one field, one op and one latency sample.
 * Keys "user" + fnv64(n) (YCSB's hashed insert order, as bench/_ycsb_work.py loads them);
 * ScrambledZipfian theta 0.99 over YCSB's 10^10 item space for A, B, C, F; SkewedLatest for D
 * (newest - Zipfian(RECORDCOUNT), disjoint per-thread insert ranges, reads above
 * RECORDCOUNT mapped onto the thread's own acknowledged keys). splitmix64 per thread,
 * seeded SEED * 7919 + thread.
 * Window: ops completing in [t0 + WARMUP_S, t0 + WARMUP_S + DURATION_S) count; a thread stops
 * after its first op completing later (or after OPS_CAP counted ops). Latency from CLOCK_MONOTONIC around each op, in a
 * 1 us histogram. Prints one line "YCSB_JSON {...}" (same shape as the wrk script).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HIST_US (1 << 21) /* 2.1 s at 1 us; slower ops land in the last bucket */
#define THETA 0.99
#define YCSB_ITEMS 10000000000ULL
#define YCSB_ZETAN 26.46902820178302
#define POOL 16

static const char *host, *port, *workload;
static int nthreads;
static uint64_t recordcount, seed, cap;
static double win_start, win_end;
static pthread_barrier_t barrier;

typedef struct {
    double items, zetan, eta;
} zipf_t;

typedef struct {
    int id, fd, failed;
    uint64_t rng;
    char buf[1 << 16];
    size_t r, w;
    uint32_t *hist;
    uint64_t ops, errors, errors_all, inserted;
    double stop_us;
    char value[101];
    char pool[POOL][101];
    char out[4096];
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

/* ------------------------------------------------------------------ RESP I/O */
static int fill(client_t *c) {
    if (c->r > 0) {
        memmove(c->buf, c->buf + c->r, c->w - c->r);
        c->w -= c->r;
        c->r = 0;
    }
    if (c->w == sizeof c->buf) return -1;
    ssize_t n = recv(c->fd, c->buf + c->w, sizeof c->buf - c->w, 0);
    if (n <= 0) return -1;
    c->w += (size_t)n;
    return 0;
}

/* Reads one line; returns its first byte and the integer after it in *num. */
static int line(client_t *c, long long *num) {
    for (;;) {
        char *nl = memchr(c->buf + c->r, '\n', c->w - c->r);
        if (nl) {
            char type = c->buf[c->r];
            *num = strtoll(c->buf + c->r + 1, NULL, 10);
            c->r = (size_t)(nl - c->buf) + 1;
            return type;
        }
        if (fill(c) < 0) return -1;
    }
}

static int skip(client_t *c, size_t n) {
    while (c->w - c->r < n) {
        n -= c->w - c->r;
        c->r = c->w;
        if (fill(c) < 0) return -1;
    }
    c->r += n;
    return 0;
}

/* One reply; *err set on an error reply; *elems = array length (-1 if not an array). */
static int reply(client_t *c, int *err, long long *elems) {
    long long num;
    int type = line(c, &num);
    if (elems) *elems = -1;
    switch (type) {
    case '+': case ':': return 0;
    case '-': *err = 1; return 0;
    case '$': return num >= 0 ? skip(c, (size_t)num + 2) : 0;
    case '*':
        if (elems) *elems = num;
        for (long long i = 0; i < num; i++)
            if (reply(c, err, NULL) < 0) return -1;
        return 0;
    default: return -1;
    }
}

/* Builds a RESP command from argv into c->out; returns its length. */
static size_t command(client_t *c, int argc, const char **argv) {
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
    return (size_t)(p - c->out);
}

/* Sends a command and reads its reply: 0 ok, 1 error reply or miss, -1 connection lost. */
static int call(client_t *c, int argc, const char **argv, int want_fields) {
    size_t len = command(c, argc, argv), off = 0;
    while (off < len) {
        ssize_t n = send(c->fd, c->out + off, len - off, MSG_NOSIGNAL);
        if (n <= 0) return -1;
        off += (size_t)n;
    }
    int err = 0;
    long long elems;
    if (reply(c, &err, &elems) < 0) return -1;
    if (want_fields && elems <= 0) err = 1; /* HGETALL of a missing key: a read miss */
    return err;
}

static int connect_to(void) {
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
    return fd;
}

static void rand_string(client_t *c, char *s, int n) {
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    for (int i = 0; i < n; i++) s[i] = alnum[splitmix(&c->rng) % 62];
    s[n] = 0;
}

/* ------------------------------------------------------------------ one client */
static void *run(void *arg) {
    client_t *c = arg;
    c->rng = seed * 7919 + (uint64_t)c->id;
    rand_string(c, c->value, 100);
    for (int i = 0; i < POOL; i++) rand_string(c, c->pool[i], 100);
    c->fd = connect_to();
    c->hist = calloc(HIST_US, sizeof *c->hist);
    int trivial = strcmp(workload, "trivial") == 0, d = strcmp(workload, "D") == 0;
    double p_read = 0; /* share of reads; the rest is update (A, B), insert (D) or rmw (F) */
    switch (workload[0]) {
    case 'A': p_read = 0.5; break;
    case 'B': p_read = 0.95; break;
    case 'C': p_read = 1.0; break;
    case 'D': p_read = 0.95; break;
    case 'F': p_read = 0.5; break;
    }
    zipf_t zipf = zipfian((double)YCSB_ITEMS, YCSB_ZETAN), latest = {0};
    if (d) latest = zipfian((double)recordcount, 0);
    uint64_t newest = recordcount - 1, own = 0;
    char key[32], field[16];
    const char *fields[10];
    char fieldnames[10][8];
    for (int f = 0; f < 10; f++) {
        sprintf(fieldnames[f], "field%d", f);
        fields[f] = fieldnames[f];
    }
    pthread_barrier_wait(&barrier);
    if (c->fd < 0 || c->hist == NULL) {
        c->failed = 1;
        return NULL;
    }
    for (;;) {
        double start = now_us();
        int rc;
        if (trivial) {
            const char *argv[] = {"PING"};
            rc = call(c, 1, argv, 0);
        } else {
            int is_read = uniform(c) < p_read;
            uint64_t n;
            if (d) {
                if (!is_read) {
                    newest = recordcount + (uint64_t)c->id + own * (uint64_t)nthreads;
                    own++;
                    sprintf(key, "user%llu", (unsigned long long)fnv64(newest));
                    const char *argv[22] = {"HSET", key};
                    for (int f = 0; f < 10; f++) {
                        argv[2 + 2 * f] = fields[f];
                        argv[3 + 2 * f] = c->pool[splitmix(&c->rng) % POOL];
                    }
                    rc = call(c, 22, argv, 0);
                    if (rc == 0) c->inserted++;
                    goto done;
                }
                uint64_t z = zipf_next(c, &latest);
                n = z > newest ? 0 : newest - z;
                if (n >= recordcount) {
                    long long idx = ((long long)(n - recordcount) - c->id) / nthreads;
                    if ((long long)(n - recordcount) - c->id < 0) idx = -1;
                    n = idx >= 0 ? recordcount + (uint64_t)c->id + (uint64_t)idx * nthreads
                                 : recordcount - 1;
                }
            } else {
                n = fnv64(zipf_next(c, &zipf)) % recordcount;
            }
            sprintf(key, "user%llu", (unsigned long long)fnv64(n));
            if (is_read || workload[0] == 'F') {
                const char *argv[] = {"HGETALL", key};
                rc = call(c, 2, argv, 1);
                if (rc != 0 || is_read) goto done;
            }
            sprintf(field, "field%d", (int)(splitmix(&c->rng) % 10));
            const char *argv[] = {"HSET", key, field, c->value};
            rc = call(c, 4, argv, 0);
        }
    done:;
        double t = now_us();
        if (rc < 0) {
            c->failed = 1;
            return NULL;
        }
        if (rc) c->errors_all++;
        if (t >= win_start && t < win_end) {
            if (rc == 0) {
                uint64_t us = (uint64_t)(t - start);
                c->hist[us < HIST_US ? us : HIST_US - 1]++;
                c->ops++;
            } else {
                c->errors++;
            }
        }
        if (t >= win_end || (cap && c->ops >= cap)) {
            c->stop_us = t - win_start;
            return NULL;
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 9 && argc != 10) {
        fprintf(stderr, "usage: %s HOST PORT WORKLOAD THREADS RECORDCOUNT SEED WARMUP_S DURATION_S"
                " [OPS_CAP]\n", argv[0]);
        return 2;
    }
    host = argv[1];
    port = argv[2];
    workload = argv[3];
    nthreads = atoi(argv[4]);
    recordcount = strtoull(argv[5], NULL, 10);
    seed = strtoull(argv[6], NULL, 10);
    cap = argc == 10 ? strtoull(argv[9], NULL, 10) : 0;
    if (nthreads < 1 || recordcount < 1 || !strchr("ABCDFt", workload[0])) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    client_t *cs = calloc((size_t)nthreads, sizeof *cs);
    pthread_t *ts = calloc((size_t)nthreads, sizeof *ts);
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++) {
        cs[i].id = i;
        pthread_create(&ts[i], NULL, run, &cs[i]);
    }
    win_start = now_us() + atof(argv[7]) * 1e6;
    win_end = win_start + atof(argv[8]) * 1e6;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < nthreads; i++) pthread_join(ts[i], NULL);
    uint64_t ops = 0, errors = 0, errors_all = 0;
    int failed = 0;
    printf("YCSB_JSON {\"threads\":[");
    for (int i = 0; i < nthreads; i++) {
        ops += cs[i].ops;
        errors += cs[i].errors;
        errors_all += cs[i].errors_all;
        failed += cs[i].failed;
        printf("%s{\"id\":%d,\"ops\":%llu,\"errors\":%llu,\"inserted\":%llu,\"failed\":%d,"
               "\"stop_us\":%.0f}",
               i ? "," : "", i, (unsigned long long)cs[i].ops, (unsigned long long)cs[i].errors,
               (unsigned long long)cs[i].inserted, cs[i].failed, cs[i].stop_us);
    }
    printf("],\"hist_us\":{");
    int first = 1;
    for (uint64_t us = 0; us < HIST_US; us++) {
        uint64_t sum = 0;
        for (int i = 0; i < nthreads; i++)
            if (cs[i].hist) sum += cs[i].hist[us];
        if (sum) {
            printf("%s\"%llu\":%llu", first ? "" : ",", (unsigned long long)us,
                   (unsigned long long)sum);
            first = 0;
        }
    }
    printf("},\"ops\":%llu,\"errors\":%llu,\"errors_all\":%llu,\"failed_threads\":%d}\n",
           (unsigned long long)ops, (unsigned long long)errors, (unsigned long long)errors_all,
           failed);
    return failed ? 1 : 0;
}
