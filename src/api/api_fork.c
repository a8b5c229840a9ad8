/*
 * fork() safety of libhccl (the runtime's part is in src/runtime/fork.c). A child of fork() starts
 * with no communicators, outside any group, and without the parent's rendezvous servers (whose
 * threads it does not have: its exit would otherwise join them, and could wake the parent's through
 * the stop pipe they share). Locks are taken around fork() so that the child's copies are
 * consistent, and released in both processes.
 */
#include <pthread.h>

#include "hc_api.h"
#include "hc_boot.h"
#include "hc_comm.h"

static void prepare(void)
{
    hc_comm_fork_prepare();
    hc_boot_server_fork_prepare();
}

static void parent(void)
{
    hc_boot_server_fork_parent();
    hc_comm_fork_parent();
}

static void child(void)
{
    hc_api_group_fork_child();
    hc_boot_server_fork_child();
    hc_comm_fork_child();
}

__attribute__((constructor)) static void register_fork_handlers(void)
{
    pthread_atfork(prepare, parent, child);
}
