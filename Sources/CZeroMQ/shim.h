#ifndef NAVIGATOR_CZEROMQ_SHIM_H
#define NAVIGATOR_CZEROMQ_SHIM_H

#include <zmq.h>
#include <errno.h>
#include <pthread.h>

// libzmq defines its own errno values as arithmetic macros (ZMQ_HAUSNUMERO + n) and only when the
// platform lacks them; Swift does not import such macros reliably, so they are re-exported here as
// constants with one definition each.
static const int czmq_ETERM = ETERM;
static const int czmq_EFSM = EFSM;
static const int czmq_ENOCOMPATPROTO = ENOCOMPATPROTO;
static const int czmq_EMTHREAD = EMTHREAD;
static const int czmq_ENOTSUP = ENOTSUP;
static const int czmq_EPROTONOSUPPORT = EPROTONOSUPPORT;
static const int czmq_EADDRINUSE = EADDRINUSE;
static const int czmq_EADDRNOTAVAIL = EADDRNOTAVAIL;
static const int czmq_ECONNREFUSED = ECONNREFUSED;
static const int czmq_ENOTSOCK = ENOTSOCK;
static const int czmq_EHOSTUNREACH = EHOSTUNREACH;

#if defined(__linux__)
// glibc declares it only under _GNU_SOURCE, which must not differ from the Glibc module's view.
extern int pthread_setname_np(pthread_t thread, const char *name);
#endif

// Names the calling thread (Linux keeps 15 bytes); visible in top -H, gdb and perf.
static inline void czmq_set_thread_name(const char *name) {
#if defined(__linux__)
    pthread_setname_np(pthread_self(), name);
#else
    (void)name;
#endif
}

#if defined(__linux__)
// epoll, for readers of many plain sockets (navload's HTTP streams): ZeroMQ.EventPoll.
#include <sys/epoll.h>
#endif

// Closes, in a child started by posix_spawn with these actions, every descriptor from `low` up
// (glibc 2.34 and later: posix_spawn_file_actions_addclosefrom_np, which Swift's Glibc module
// does not show). Returns 0, an error number, or ENOSYS where the C library has no such action.
#if defined(__linux__)
#include <spawn.h>
#endif
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
#endif
static inline int czmq_spawn_close_from(void *actions, int low) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    return posix_spawn_file_actions_addclosefrom_np((posix_spawn_file_actions_t *)actions, low);
#else
    (void)actions;
    (void)low;
    return ENOSYS;
#endif
}

// Hands whole free pages of the heap back to the system (glibc's malloc_trim); 0 elsewhere.
#if defined(__GLIBC__)
extern int malloc_trim(size_t pad);
#endif
static inline int czmq_trim_heap(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}

// Fixes malloc's trim and mmap thresholds (glibc's mallopt; 0 elsewhere, and when refused): set,
// they no longer rise as the process frees large blocks.
#if defined(__GLIBC__)
extern int mallopt(int param, int value);
#endif
static inline int czmq_fix_heap_thresholds(int trim, int mmap) {
#if defined(__GLIBC__)
    // M_TRIM_THRESHOLD and M_MMAP_THRESHOLD of <malloc.h>.
    return mallopt(-1, trim) != 0 && mallopt(-3, mmap) != 0;
#else
    (void)trim;
    (void)mmap;
    return 0;
#endif
}

#endif
