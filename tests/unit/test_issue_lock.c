/*
 * The issue lock (src/core/hc_issue.h): the one thread that issues on a communicator enters its
 * section without the mutex; a second thread that takes the lock ends that for good, and from its
 * first lock on the two exclude each other. The counter below is updated without atomics, with a
 * pause between its read and its write, and the owner holds its first section open while the
 * taker takes the lock: a taker that did not wait for the section loses that update.
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>
#include <pthread.h>

#include "hc_issue.h"

#define ROUNDS 20000

typedef struct {
    hc_issue_lock_t lock;
    volatile uint64_t counter;
    atomic_int owner_inside;      /* the owner is in its first unlocked section */
    atomic_int taker_bumped;      /* the taker got through its first locked section */
    atomic_int unlocked_sections; /* sections the owner entered without the mutex */
    int first_entered;
} shared_t;

static void bump(shared_t *s)
{
    uint64_t v = s->counter;

    for (int i = 0; i < 50; i++)
        atomic_signal_fence(memory_order_seq_cst); /* widen the window between read and write */
    s->counter = v + 1;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *owner_main(void *arg)
{
    shared_t *s = arg;
    int entered = hc_issue_enter(&s->lock);
    uint64_t v = s->counter;
    int64_t give_up = now_ms() + 200;

    s->first_entered = entered; /* checked by the test's thread */
    atomic_fetch_add(&s->unlocked_sections, entered);
    /* Hold the section open while the taker takes the lock: a taker that does not wait for it gets
     * through now, and the write below loses its update. A correct one waits, and this wait ends
     * at its bound. */
    atomic_store(&s->owner_inside, 1);
    while (!atomic_load(&s->taker_bumped) && now_ms() < give_up)
        sched_yield();
    s->counter = v + 1;
    hc_issue_leave(&s->lock, entered);
    for (int i = 0; i < ROUNDS; i++) {
        entered = hc_issue_enter(&s->lock);
        if (entered)
            atomic_fetch_add(&s->unlocked_sections, 1);
        bump(s);
        hc_issue_leave(&s->lock, entered);
    }
    return NULL;
}

static void *taker_main(void *arg)
{
    shared_t *s = arg;

    while (!atomic_load(&s->owner_inside))
        sched_yield();
    for (int i = 0; i < ROUNDS; i++) {
        hc_issue_lock(&s->lock);
        bump(s);
        atomic_store(&s->taker_bumped, 1);
        hc_issue_unlock(&s->lock);
    }
    return NULL;
}

/* The owner issues unlocked until another thread takes the lock; no update is lost on the way. */
static void test_taker_ends_the_unlocked_path(void **state)
{
    shared_t s = {0};
    pthread_t owner, taker;

    (void)state;
    if (!hc_asym_fence_ready())
        skip(); /* no membarrier: every thread locks, nothing to test here */
    assert_int_equal(hc_issue_lock_init(&s.lock), 0);
    assert_int_equal(pthread_create(&owner, NULL, owner_main, &s), 0);
    assert_int_equal(pthread_create(&taker, NULL, taker_main, &s), 0);
    pthread_join(owner, NULL);
    pthread_join(taker, NULL);
    assert_int_equal(s.first_entered, 1); /* the first issuer owns the lock */
    assert_int_equal(s.counter, 2 * ROUNDS + 1);
    assert_true(atomic_load(&s.unlocked_sections) < ROUNDS); /* the unlocked path ended */
    assert_int_equal(atomic_load(&s.lock.own.shared), 1);
    hc_issue_lock_destroy(&s.lock);
}

static void *enter_once(void *arg)
{
    hc_issue_lock_t *lock = arg;
    int entered = hc_issue_enter(lock);

    hc_issue_leave(lock, entered);
    return (void *)(intptr_t)entered;
}

/* A thread alone keeps the unlocked path; a lock taken by another thread before anyone issued
 * leaves no owner, and the issuer locks. */
static void test_owner_is_the_first_issuer(void **state)
{
    hc_issue_lock_t lock;
    pthread_t other;
    void *entered;

    (void)state;
    if (!hc_asym_fence_ready())
        skip();
    assert_int_equal(hc_issue_lock_init(&lock), 0);
    for (int i = 0; i < 3; i++) {
        int e = hc_issue_enter(&lock);
        assert_int_equal(e, 1);
        hc_issue_leave(&lock, e);
    }
    assert_int_equal(atomic_load(&lock.own.shared), 0);
    assert_int_equal(pthread_create(&other, NULL, enter_once, &lock), 0);
    pthread_join(other, &entered);
    assert_int_equal((intptr_t)entered, 0); /* not the owner: it locked, and shared the lock */
    assert_int_equal(hc_issue_enter(&lock), 0);
    hc_issue_leave(&lock, 0);
    hc_issue_lock_destroy(&lock);

    assert_int_equal(hc_issue_lock_init(&lock), 0);
    hc_issue_lock(&lock); /* before anyone issued */
    hc_issue_unlock(&lock);
    assert_int_equal(pthread_create(&other, NULL, enter_once, &lock), 0);
    pthread_join(other, &entered);
    assert_int_equal((intptr_t)entered, 0);
    hc_issue_lock_destroy(&lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_taker_ends_the_unlocked_path),
        cmocka_unit_test(test_owner_is_the_first_issuer),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
