// Bounded stress harness for libzmq 4.3.4 "Resource temporarily unavailable
// (src/session_base.cpp:260)".  A parent process forks a child that runs
// iterations on T threads; if the child aborts, the parent counts the abort
// (and its message, read from the child's stderr) and forks a new child for
// the remaining iterations.  Everything is bounded by -n iterations and -s
// seconds; the parent kills a child that makes no progress for 15 s.
//
// One iteration (per thread): make a TCP connection tcp://127.0.0.1:* between
// a sender and a receiver, check it works, queue -m multipart messages of -p
// frames of -b bytes on the sender (DONTWAIT), then shut down in order -o.
#define _GNU_SOURCE
#include <zmq.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <stdatomic.h>
#include <execinfo.h>
static void on_abort(int sig) { void *b[32]; int n = backtrace(b, 32); if (getenv("BT")) backtrace_symbols_fd(b, n, 2); signal(sig, SIG_DFL); raise(sig); }

static int kind = 0;        // 0 PUSH->PULL, 1 DEALER->ROUTER, 2 XPUB->SUB, 3 ROUTER->DEALER
static int order = 0;       // see do_close()
static int nthreads = 4;
static int nmsgs = 2000;    // messages queued before the close
static int nparts = 2;
static int msgbytes = 16;
static int linger_s = 0;    // sender linger (ms, -1 infinite)
static int linger_r = 0;    // receiver linger
static int separate = 1;    // 1: sender and receiver in separate contexts (client/server)
static int sndbuf = 0;      // ZMQ_SNDBUF/RCVBUF if > 0
static int monitors = 0;    // add inproc PAIR monitors to both sockets
static long iters = 10000;
static int seconds = 60;

static atomic_long *done_counter;   // shared with parent
static atomic_long next_iter;       // per child

static void die(const char *what) {
    fprintf(stderr, "harness failure: %s: %s\n", what, zmq_strerror(zmq_errno()));
    _exit(3);
}

static void setint(void *s, int opt, int v) {
    if (zmq_setsockopt(s, opt, &v, sizeof v) != 0) die("setsockopt");
}

typedef struct { void *s; } closearg_t;
static void *close_thread(void *a) { zmq_close(((closearg_t *)a)->s); return NULL; }
static void *term_thread(void *a) { zmq_ctx_term(a); return NULL; }

static void *monitor_pair(void *ctx, void *sock, int tid, const char *tag, long it) {
    char ep[128];
    snprintf(ep, sizeof ep, "inproc://mon-%d-%s-%ld", tid, tag, it);
    if (zmq_socket_monitor(sock, ep, ZMQ_EVENT_ALL) != 0) die("monitor");
    void *p = zmq_socket(ctx, ZMQ_PAIR);
    setint(p, ZMQ_LINGER, 0);
    if (zmq_connect(p, ep) != 0) die("monitor connect");
    return p;
}

static int one_iteration(int tid, long it) {
    int st, rt;
    switch (kind) {
    case 0: st = ZMQ_PUSH; rt = ZMQ_PULL; break;
    case 1: st = ZMQ_DEALER; rt = ZMQ_ROUTER; break;
    case 2: st = ZMQ_XPUB; rt = ZMQ_SUB; break;
    default: st = ZMQ_ROUTER; rt = ZMQ_DEALER; break;
    }
    void *cs = zmq_ctx_new(), *cr = separate ? zmq_ctx_new() : cs;
    void *snd = zmq_socket(cs, st), *rcv = zmq_socket(cr, rt);
    if (!snd || !rcv) die("socket");
    setint(snd, ZMQ_LINGER, linger_s);
    setint(rcv, ZMQ_LINGER, linger_r);
    setint(snd, ZMQ_SNDHWM, 0);
    setint(rcv, ZMQ_RCVHWM, 0);
    setint(rcv, ZMQ_RCVTIMEO, 5000);
    if (sndbuf > 0) { setint(snd, ZMQ_SNDBUF, sndbuf); setint(rcv, ZMQ_RCVBUF, sndbuf); }
    if (kind == 3) zmq_setsockopt(rcv, ZMQ_ROUTING_ID, "peer", 4);
    if (kind == 2) zmq_setsockopt(rcv, ZMQ_SUBSCRIBE, "", 0);
    void *ms = NULL, *mr = NULL;
    if (monitors) { ms = monitor_pair(cs, snd, tid, "s", it); mr = monitor_pair(cr, rcv, tid, "r", it); }

    // The bound side: XPUB and ROUTER(sender) bind like navigatord; PUSH/DEALER connect.
    void *binder = (kind >= 2) ? snd : rcv, *connector = (kind >= 2) ? rcv : snd;
    char ep[256]; size_t eplen = sizeof ep;
    if (zmq_bind(binder, "tcp://127.0.0.1:*") != 0) die("bind");
    if (zmq_getsockopt(binder, ZMQ_LAST_ENDPOINT, ep, &eplen) != 0) die("last endpoint");
    if (zmq_connect(connector, ep) != 0) die("connect");

    // Establish: send a probe until the receiver gets one (XPUB needs the subscription).
    char buf[64];
    for (int tries = 0;; tries++) {
        if (kind == 3) zmq_send(snd, "peer", 4, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(snd, "probe", 5, ZMQ_DONTWAIT);
        int rc = zmq_recv(rcv, buf, sizeof buf, (kind == 2 || kind == 3) ? ZMQ_DONTWAIT : 0);
        if (rc >= 0) {
            int more; size_t ml = sizeof more;
            zmq_getsockopt(rcv, ZMQ_RCVMORE, &more, &ml);
            while (more) { zmq_recv(rcv, buf, sizeof buf, 0); zmq_getsockopt(rcv, ZMQ_RCVMORE, &more, &ml); }
            break;
        }
        if (tries > 5000) { fprintf(stderr, "no connection\n"); _exit(4); }
        usleep(1000);
    }

    // Queue a backlog of multipart messages.
    char *payload = calloc(1, msgbytes + 1);
    for (int m = 0; m < nmsgs; m++) {
        if (kind == 3) zmq_send(snd, "peer", 4, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        for (int p = 0; p < nparts; p++)
            zmq_send(snd, payload, msgbytes, ZMQ_DONTWAIT | (p < nparts - 1 ? ZMQ_SNDMORE : 0));
    }
    free(payload);

    pthread_t t1, t2;
    closearg_t a1 = {snd}, a2 = {rcv};
    switch (order) {
    case 0: // Swift default: close sender, close receiver, term(s) — one thread
        zmq_close(snd); zmq_close(rcv);
        if (ms) { zmq_close(ms); zmq_close(mr); }
        zmq_ctx_term(cs); if (separate) zmq_ctx_term(cr);
        break;
    case 1: // receiver first
        zmq_close(rcv); zmq_close(snd);
        if (ms) { zmq_close(ms); zmq_close(mr); }
        zmq_ctx_term(cs); if (separate) zmq_ctx_term(cr);
        break;
    case 2: // sender closed + its context terminated, then the receiver's side (client then server)
        zmq_close(snd); if (ms) zmq_close(ms);
        if (separate) zmq_ctx_term(cs);
        zmq_close(rcv); if (mr) zmq_close(mr);
        zmq_ctx_term(cr);
        break;
    case 3: // receiver's side fully closed first, then the sender's (server then client)
        zmq_close(rcv); if (mr) zmq_close(mr);
        if (separate) zmq_ctx_term(cr);
        zmq_close(snd); if (ms) zmq_close(ms);
        zmq_ctx_term(cs);
        break;
    case 4: // both closed at once from two threads, then terms
        pthread_create(&t1, NULL, close_thread, &a1);
        pthread_create(&t2, NULL, close_thread, &a2);
        pthread_join(t1, NULL); pthread_join(t2, NULL);
        if (ms) { zmq_close(ms); zmq_close(mr); }
        zmq_ctx_term(cs); if (separate) zmq_ctx_term(cr);
        break;
    case 5: // zmq_ctx_shutdown on both, then close, then term (cancelled loops)
        zmq_ctx_shutdown(cs); if (separate) zmq_ctx_shutdown(cr);
        zmq_close(snd); zmq_close(rcv);
        if (ms) { zmq_close(ms); zmq_close(mr); }
        zmq_ctx_term(cs); if (separate) zmq_ctx_term(cr);
        break;
    case 6: // zmq_ctx_term of the sender's context running in another thread while sockets close
        if (!separate) die("order 6 needs -S 1");
        pthread_create(&t1, NULL, term_thread, cs);
        usleep(50);
        zmq_close(rcv); zmq_close(snd);
        if (ms) { zmq_close(ms); zmq_close(mr); }
        pthread_join(t1, NULL);
        zmq_ctx_term(cr);
        break;
    case 8: // close the sender, wait about its linger, then close the receiver (linger-timer window)
        zmq_close(snd);
        usleep((linger_s > 0 ? linger_s : 0) * 1000 + (rand_r(&(unsigned){(unsigned)it}) % 400));
        zmq_close(rcv);
        if (ms) { zmq_close(ms); zmq_close(mr); }
        zmq_ctx_term(cs); if (separate) zmq_ctx_term(cr);
        break;
    case 7: // zmq_disconnect / zmq_unbind before close (issue #3442 shape)
        zmq_unbind(binder, ep); zmq_disconnect(connector, ep);
        zmq_close(snd); zmq_close(rcv);
        if (ms) { zmq_close(ms); zmq_close(mr); }
        zmq_ctx_term(cs); if (separate) zmq_ctx_term(cr);
        break;
    }
    return 0;
}

static void *worker(void *arg) {
    int tid = (int)(long)arg;
    long it;
    while ((it = atomic_fetch_add(&next_iter, 1)) < iters) {
        one_iteration(tid, it);
        atomic_fetch_add(done_counter, 1);
    }
    return NULL;
}

static void child(long start) {
    atomic_store(&next_iter, start);
    pthread_t th[64];
    for (int i = 0; i < nthreads; i++) pthread_create(&th[i], NULL, worker, (void *)(long)i);
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    _exit(0);
}

int main(int argc, char **argv) {
    int c;
    while ((c = getopt(argc, argv, "k:o:t:m:p:b:L:R:S:B:M:n:s:")) != -1) {
        switch (c) {
        case 'k': kind = atoi(optarg); break;
        case 'o': order = atoi(optarg); break;
        case 't': nthreads = atoi(optarg); break;
        case 'm': nmsgs = atoi(optarg); break;
        case 'p': nparts = atoi(optarg); break;
        case 'b': msgbytes = atoi(optarg); break;
        case 'L': linger_s = atoi(optarg); break;
        case 'R': linger_r = atoi(optarg); break;
        case 'S': separate = atoi(optarg); break;
        case 'B': sndbuf = atoi(optarg); break;
        case 'M': monitors = atoi(optarg); break;
        case 'n': iters = atol(optarg); break;
        case 's': seconds = atoi(optarg); break;
        default: fprintf(stderr, "bad option\n"); return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    done_counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    atomic_store(done_counter, 0);
    char errfile[] = "/tmp/zmqabort/stderr-XXXXXX";
    int errfd = mkstemp(errfile);
    time_t t0 = time(NULL);
    long aborts = 0, other_deaths = 0, hangs = 0, children = 0;
    while (atomic_load(done_counter) < iters && time(NULL) - t0 < seconds) {
        long start = atomic_load(done_counter);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(errfd, 2);
            signal(SIGABRT, on_abort);
            // Any iteration in flight when a sibling thread aborts is simply lost.
            iters = iters; child(start);
        }
        children++;
        long last = start; time_t lastprog = time(NULL);
        int status = 0;
        for (;;) {
            pid_t r = waitpid(pid, &status, WNOHANG);
            if (r == pid) break;
            long now = atomic_load(done_counter);
            if (now != last) { last = now; lastprog = time(NULL); }
            if (time(NULL) - lastprog > 15 || time(NULL) - t0 >= seconds) {
                if (time(NULL) - lastprog > 15) hangs++;
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                status = 0; // not an abort
                goto next;
            }
            usleep(20000);
        }
        if (WIFSIGNALED(status)) {
            if (WTERMSIG(status) == SIGABRT) aborts++; else other_deaths++;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
            other_deaths++;
        }
        // A child that completed all iterations for a different 'start' wraps up here.
    next:;
    }
    long done = atomic_load(done_counter);
    // Count the libzmq messages in the children's stderr.
    char cmd[512], line[512];
    snprintf(cmd, sizeof cmd, "sort %s | uniq -c | sort -rn | head -5", errfile);
    FILE *f = popen(cmd, "r");
    printf("kind=%d order=%d threads=%d msgs=%d parts=%d bytes=%d linger_s=%d linger_r=%d separate=%d sndbuf=%d monitors=%d\n",
           kind, order, nthreads, nmsgs, nparts, msgbytes, linger_s, linger_r, separate, sndbuf, monitors);
    printf("  iterations=%ld aborts=%ld other_deaths=%ld hangs=%ld children=%ld elapsed=%lds\n",
           done, aborts, other_deaths, hangs, children, (long)(time(NULL) - t0));
    while (f && fgets(line, sizeof line, f)) printf("  stderr: %s", line);
    if (f) pclose(f);
    unlink(errfile);
    return 0;
}
