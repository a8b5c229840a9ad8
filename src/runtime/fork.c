/*
 * fork() safety of the runtime. A child of fork() has only the thread that called fork(): the
 * parent's stream workers do not exist in it, and locks those threads held would stay locked. So
 * around fork() every module takes its locks (prepare) and releases them in both processes; in the
 * child each also drops what was the parent's: streams and events (a call with one of their handles
 * fails, saying so), the default streams, and the shared arena, which the child keeps as a private
 * copy while new allocations come from an arena of its own. fork + exec needs none of this (every
 * descriptor of the runtime is close-on-exec), but must not be harmed by it either.
 *
 * Order: prepare takes the locks in the order the code nests them (init, devices, handles; the
 * arena alone), the others release them in reverse.
 */
#include <pthread.h>

#include "hc_rt.h"

static void prepare(void)
{
    hc_rt_init_fork_prepare();
    hc_rt_device_fork_prepare();
    hc_rt_handle_fork_prepare();
    hc_rt_arena_fork_prepare();
}

static void parent(void)
{
    hc_rt_arena_fork_parent();
    hc_rt_handle_fork_parent();
    hc_rt_device_fork_parent();
    hc_rt_init_fork_parent();
}

static void child(void)
{
    hc_rt_stream_fork_child();
    hc_rt_arena_fork_child();
    hc_rt_handle_fork_child();
    hc_rt_device_fork_child();
    hc_rt_init_fork_child();
}

__attribute__((constructor)) static void register_fork_handlers(void)
{
    pthread_atfork(prepare, parent, child);
}
