/*
 * The fast clock (hc_fast_now_ns): it stays within a few microseconds of the monotonic clock, before
 * its rate is known (the first 10 ms), after, and across the anchors it sets every 100 ms, and no
 * thread's reads go back, with several threads reading at once.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hc_time.h"

#define SPAN_NS (350 * HC_NS_PER_MS) /* past the first rate and three anchors */
#define SLACK_NS (5 * 1000)          /* the rate's error over an anchor's reach, and the reads' own time */

typedef struct {
    int64_t reads;
    int64_t went_back;  /* reads below the thread's previous one */
    int64_t outside;    /* monotonic reads outside the fast reads around them, by more than SLACK_NS */
    int64_t worst;      /* the farthest such */
} tally_t;

/* For SPAN_NS: fast, monotonic, fast; the monotonic read must lie between the two fast ones. */
static void *read_for_a_span(void *arg)
{
    tally_t *t = arg;
    int64_t start = hc_now_ns(), prev = 0;

    while (hc_now_ns() - start < SPAN_NS) {
        int64_t a = hc_fast_now_ns(), m = hc_now_ns(), b = hc_fast_now_ns();
        int64_t off = m < a - SLACK_NS ? a - m : m > b + SLACK_NS ? m - b : 0;

        t->reads += 2;
        t->went_back += (a < prev) + (b < a);
        prev = b;
        if (off != 0) {
            t->outside++;
            t->worst = off > t->worst ? off : t->worst;
        }
    }
    return NULL;
}

static void check(const tally_t *t)
{
    print_message("%lld reads, %lld went back, %lld outside by up to %lld ns\n", (long long)t->reads,
                  (long long)t->went_back, (long long)t->outside, (long long)t->worst);
    assert_true(t->reads > 1000);
    assert_int_equal(t->went_back, 0);
    assert_int_equal(t->outside, 0);
}

static void test_follows_the_monotonic_clock(void **state)
{
    tally_t t = {0};

    (void)state;
    read_for_a_span(&t);
    check(&t);
}

static void test_threads_read_at_once(void **state)
{
    enum { THREADS = 3 };
    pthread_t threads[THREADS];
    tally_t t[THREADS] = {{0}};

    (void)state;
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, read_for_a_span, &t[i]), 0);
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(threads[i], NULL), 0);
        check(&t[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_follows_the_monotonic_clock),
        cmocka_unit_test(test_threads_read_at_once),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
