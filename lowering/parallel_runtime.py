"""The work-sharing pool linked into every library (lowering/parallel.py's loops call it).

A C source like allocation.py's runtime, compiled once per process and linked into the library:
its NEEDED list stays libc, libm (and libpthread where the C library keeps threads apart), nothing
for a C host to install, as XLA and IREE carry their own pools.

    void _sprue_parallel_for(void (*task)(int64_t lo, int64_t hi, void *ctx), void *ctx,
                             int64_t n, int64_t grain)

runs task over [0, n) in chunks of `grain` iterations (the last one shorter). The chunks' bounds
depend on n and grain only, never on the number of threads, so code whose chunks are independent
gives the same bits with any number of threads. The calling thread works too; workers are started
at the first parallel call (none when the count is 1). The count: SPRUE_NUM_THREADS if set, else
the CPUs this process may run on (sched_getaffinity); `sprue_set_num_threads(n)` changes it,
`sprue_get_num_threads()` reads it (both declared in every kernel's C header: runtime/header.py).

One pool per process, however many libraries it loads: each library carries a pool, but only one
of them runs. Two ways, one for each way of loading:
- linked by a C host (`-lk1 -lk2`, or dlopen with RTLD_GLOBAL): the pool's entry points are
  exported (default visibility) and the kernels reach `_sprue_parallel_for` through a dynamic
  relocation (its GOT entry), so the dynamic linker binds every library's calls, and the host's
  sprue_set_num_threads, to the first definition in load order; the other pools are never called. From static archives the
  linker takes the pool object of the first archive that has one (the later ones define nothing
  still undefined). A host that dlopens kernels with RTLD_LOCAL gets a pool per library, unless
  it does what the Python runtime does:
- loaded with RTLD_LOCAL (the Python runtime: cffi), where each library binds to its own pool:
  `sprue_use_pool(parallel_for, set, get)` hands a library the entry points of another's pool
  (runtime/threads.py: the first library loaded, kept loaded for the life of the process); its
  parallel loops and its count then go there, and its own pool never starts a thread.

One job at a time per pool: a call that finds the pool busy (another host thread's call running
a parallel loop, of this library or another that shares the pool) runs its loop itself, serially:
never a wait on another call, so no deadlock, and the machine is not oversubscribed by two jobs.
A thread that cannot be started leaves the loop to those that were (to the caller alone at worst).
A child forked while a job ran (or after) starts with no workers and makes its own at its first
parallel call (pthread_atfork).
"""
from __future__ import annotations

from pathlib import Path

PARALLEL_C = r"""/* sprue's work-sharing pool (lowering/parallel_runtime.py). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* sched_getaffinity, CPU_COUNT */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Exported, and reached through the GOT: a C host linking several libraries binds them all to
   one pool (the module doc of lowering/parallel_runtime.py). */
#if defined(__GNUC__) || defined(__clang__)
#define SPRUE_EXPORT __attribute__((visibility("default")))
#else
#define SPRUE_EXPORT
#endif
#define SPRUE_MAX_THREADS 256

typedef void (*sprue_task)(int64_t lo, int64_t hi, void *ctx);
typedef void (*sprue_for_fn)(sprue_task task, void *ctx, int64_t n, int64_t grain);
typedef int (*sprue_set_fn)(int n);
typedef int (*sprue_get_fn)(void);

typedef struct {
  pthread_mutex_t lock;        /* guards all but `next` */
  pthread_cond_t wake;         /* a job was published (or the workers are told to stop) */
  pthread_cond_t done;         /* the last worker left the job */
  int threads;                 /* wanted, the caller included; 0: not read yet */
  int started;                 /* workers running */
  int stopping;                /* the library is being unloaded: workers leave */
  int busy;                    /* a job is running */
  atomic_int active;           /* workers inside the job (changed under the lock) */
  atomic_ullong generation;    /* the job's number (written under the lock) */
  sprue_task task;
  void *ctx;
  int64_t n, grain, chunks;
  atomic_llong next;           /* the next chunk to take */
} sprue_pool;

static sprue_pool sprue_the_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                                    PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
static pthread_t sprue_workers[SPRUE_MAX_THREADS];

/* The pool that serves this library when it is not its own (sprue_use_pool): filled once, then
   `sprue_forwarding` set (release; read with acquire before the entries are used). */
static struct { sprue_for_fn parallel_for; sprue_set_fn set; sprue_get_fn get; } sprue_owner;
static atomic_int sprue_forwarding;
#define SPRUE_FORWARDING() atomic_load_explicit(&sprue_forwarding, memory_order_acquire)

static int sprue_default_threads(void) {
  const char *env = getenv("SPRUE_NUM_THREADS");
  if (env && *env) {
    long v = strtol(env, NULL, 10);
    return v < 1 ? 1 : v > SPRUE_MAX_THREADS ? SPRUE_MAX_THREADS : (int)v;
  }
#if defined(__linux__)
  {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
      int n = CPU_COUNT(&set);
      return n < 1 ? 1 : n > SPRUE_MAX_THREADS ? SPRUE_MAX_THREADS : n;
    }
  }
#endif
  return 1;
}

/* A worker that finished a job watches for the next one for this long before it sleeps: loops
   that run a parallel op on every trip (a power iteration's matrix-vector product, a training
   loop's steps) publish jobs microseconds apart, and waking a sleeping thread costs more (a futex
   wake, on a VM an interrupt to another virtual CPU). 50 matrix-vector products of 1000 x 1000 in a
   fori_loop (benchmarks' power_iter), 2-thread time / 1-thread time in four alternating runs:
   0.65-0.94 sleeping at once, 0.58-0.63 watching first. */
#define SPRUE_SPIN_NS 50000

static int64_t sprue_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Without the lock: whether a job after `seen` is published within SPRUE_SPIN_NS. */
static int sprue_spin_for_job(sprue_pool *p, uint64_t seen) {
  int64_t until = sprue_now_ns() + SPRUE_SPIN_NS;
  for (int i = 0;; ++i) {
    if (atomic_load_explicit(&p->generation, memory_order_acquire) != seen) return 1;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63 && sprue_now_ns() > until) return 0;
  }
}

/* Without the lock: whether the workers inside the job leave it within SPRUE_SPIN_NS. The caller
   that published a job runs chunks too and then waits for the workers' last ones: asleep on a
   condition variable, it is woken by a futex call (on a VM an interrupt), which took longer than
   the chunk it waited for (power_iter: 2 threads 1.25-1.3x faster than 1 sleeping at once). */
static void sprue_spin_until_idle(sprue_pool *p) {
  int64_t until = sprue_now_ns() + SPRUE_SPIN_NS;
  for (int i = 0;; ++i) {
    if (atomic_load_explicit(&p->active, memory_order_acquire) == 0) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63 && sprue_now_ns() > until) return;
  }
}

static void sprue_run_chunks(sprue_task task, void *ctx, int64_t n, int64_t grain, int64_t chunks,
                             atomic_llong *next) {
  for (;;) {
    int64_t c = atomic_fetch_add_explicit(next, 1, memory_order_relaxed);
    if (c >= chunks) return;
    int64_t lo = c * grain, hi = lo + grain < n ? lo + grain : n;
    task(lo, hi, ctx);
  }
}

static void *sprue_worker(void *arg) {
  sprue_pool *p = &sprue_the_pool;
  int index = (int)(intptr_t)arg;   /* workers past the wanted count stay out of jobs */
  uint64_t seen = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    if (atomic_load(&p->generation) == seen) {
      pthread_mutex_unlock(&p->lock);
      sprue_spin_for_job(p, seen);
      pthread_mutex_lock(&p->lock);
    }
    while (atomic_load(&p->generation) == seen) pthread_cond_wait(&p->wake, &p->lock);
    seen = atomic_load(&p->generation);
    if (p->stopping) break;
    if (!p->busy || index >= p->threads - 1) continue;   /* woken late: that job is over */
    sprue_task task = p->task;
    void *ctx = p->ctx;
    int64_t n = p->n, grain = p->grain, chunks = p->chunks;
    p->active++;
    pthread_mutex_unlock(&p->lock);
    sprue_run_chunks(task, ctx, n, grain, chunks, &p->next);
    pthread_mutex_lock(&p->lock);
    if (--p->active == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* fork: the parent's lock is held across it, and the child starts afresh with no workers */
static void sprue_fork_prepare(void) { pthread_mutex_lock(&sprue_the_pool.lock); }
static void sprue_fork_parent(void) { pthread_mutex_unlock(&sprue_the_pool.lock); }
static void sprue_fork_child(void) {
  sprue_pool *p = &sprue_the_pool;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  p->started = p->busy = p->active = p->stopping = 0;
}
/* At load, not at the first parallel loop: a fork while another thread holds the lock for a moment
   (sprue_use_pool, sprue_set_num_threads) must not leave it held in the child, whose next call
   of those would wait for ever. (dlclose unregisters the handlers with the library.) */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((constructor))
#endif
static void sprue_register_fork(void) {
  pthread_atfork(sprue_fork_prepare, sprue_fork_parent, sprue_fork_child);
}

/* Under the lock: starts workers up to threads - 1; how many run. */
static int sprue_start_workers(sprue_pool *p) {
  pthread_attr_t attr;
  if (p->threads == 0) p->threads = sprue_default_threads();
  if (p->started >= p->threads - 1) return p->started;
  if (pthread_attr_init(&attr) != 0) return p->started;
  pthread_attr_setstacksize(&attr, 1 << 20);   /* tasks are loop bodies: little stack */
  while (p->started < p->threads - 1) {
    if (pthread_create(&sprue_workers[p->started], &attr, sprue_worker, (void *)(intptr_t)p->started) != 0)
      break;   /* (no more threads: fewer workers) */
    p->started++;
  }
  pthread_attr_destroy(&attr);
  return p->started;
}

SPRUE_EXPORT void _sprue_parallel_for(sprue_task task, void *ctx, int64_t n, int64_t grain) {
  sprue_pool *p = &sprue_the_pool;
  int64_t chunks;
  atomic_llong mine;
  if (SPRUE_FORWARDING()) {
    sprue_owner.parallel_for(task, ctx, n, grain);
    return;
  }
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  chunks = (n - 1) / grain + 1;
  if (chunks > 1 && pthread_mutex_trylock(&p->lock) == 0) {
    if (!p->busy && p->threads != 1 && sprue_start_workers(p) > 0 && p->threads > 1) {
      p->busy = 1;
      p->task = task, p->ctx = ctx, p->n = n, p->grain = grain, p->chunks = chunks;
      atomic_store_explicit(&p->next, 0, memory_order_relaxed);
      p->generation++;
      pthread_cond_broadcast(&p->wake);
      pthread_mutex_unlock(&p->lock);
      sprue_run_chunks(task, ctx, n, grain, chunks, &p->next);
      sprue_spin_until_idle(p);
      pthread_mutex_lock(&p->lock);
      while (p->active > 0) pthread_cond_wait(&p->done, &p->lock);
      p->busy = 0;
      pthread_mutex_unlock(&p->lock);
      return;
    }
    pthread_mutex_unlock(&p->lock);
  }
  atomic_init(&mine, 0);   /* busy, one thread, or no workers: the caller runs every chunk */
  sprue_run_chunks(task, ctx, n, grain, chunks, &mine);
}

/* The library is unloaded (dlclose: the Python runtime drops a function no longer used): its
   workers must not outlive their code, nor wait on a pool whose memory the next library loaded
   at the same address reuses. They are idle (no call runs while a library is unloaded): told to
   stop and joined. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((destructor))
#endif
static void sprue_stop_workers(void) {
  sprue_pool *p = &sprue_the_pool;
  int i, started;
  pthread_mutex_lock(&p->lock);
  p->stopping = 1;
  p->generation++;
  started = p->started;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (i = 0; i < started; ++i) pthread_join(sprue_workers[i], NULL);
  pthread_mutex_lock(&p->lock);
  p->started = 0;
  pthread_mutex_unlock(&p->lock);
}

/* The number of threads parallel loops use, the caller included (1: no threads are started);
   workers already started beyond it stay idle. The previous number. */
SPRUE_EXPORT int sprue_set_num_threads(int n) {
  sprue_pool *p = &sprue_the_pool;
  int old;
  if (SPRUE_FORWARDING()) return sprue_owner.set(n);
  pthread_mutex_lock(&p->lock);
  if (p->threads == 0) p->threads = sprue_default_threads();
  old = p->threads;
  p->threads = n < 1 ? 1 : n > SPRUE_MAX_THREADS ? SPRUE_MAX_THREADS : n;
  pthread_mutex_unlock(&p->lock);
  return old;
}

SPRUE_EXPORT int sprue_get_num_threads(void) {
  sprue_pool *p = &sprue_the_pool;
  int n;
  if (SPRUE_FORWARDING()) return sprue_owner.get();
  pthread_mutex_lock(&p->lock);
  if (p->threads == 0) p->threads = sprue_default_threads();
  n = p->threads;
  pthread_mutex_unlock(&p->lock);
  return n;
}

/* From now on this library's parallel loops and thread count are those of the pool whose entry
   points these are (another library's: one pool per process). Once, before the library's first
   parallel loop: its own pool then never starts a thread. 0: done (or already so); -1: refused
   (a null entry, this library's own pool, already another's, or workers of its own started). */
SPRUE_EXPORT int sprue_use_pool(sprue_for_fn parallel_for, sprue_set_fn set, sprue_get_fn get) {
  sprue_pool *p = &sprue_the_pool;
  int done = -1;
  if (!parallel_for || !set || !get || parallel_for == &_sprue_parallel_for) return -1;
  pthread_mutex_lock(&p->lock);
  if (!SPRUE_FORWARDING() && p->started == 0) {
    sprue_owner.parallel_for = parallel_for, sprue_owner.set = set, sprue_owner.get = get;
    atomic_store_explicit(&sprue_forwarding, 1, memory_order_release);
    done = 0;
  } else if (SPRUE_FORWARDING() && sprue_owner.parallel_for == parallel_for) {
    done = 0;   /* (the library opened again: dlopen handed back the loaded one) */
  }
  pthread_mutex_unlock(&p->lock);
  return done;
}
"""

PARALLEL_SOURCE = "sprue_parallel.c"
PARALLEL_SYMBOL = "_sprue_parallel_for"


def parallel_source(directory: Path, name: str) -> Path:
    """Writes the pool's C source for kernel `name` into directory; its path."""
    path = directory / f"{name}.{PARALLEL_SOURCE}"
    path.write_text(PARALLEL_C)
    return path


__all__ = ["PARALLEL_C", "PARALLEL_SOURCE", "PARALLEL_SYMBOL", "parallel_source"]
