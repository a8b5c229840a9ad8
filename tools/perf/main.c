/*
 * main() of every perf tool. CMake compiles this file once per tool with HC_PERF_COLL naming the
 * collective's ops table (hc_perf_coll_all_reduce for all_reduce_test, ...); everything else is the
 * shared driver in the hc_perf library.
 */
#include "perf.h"

#ifndef HC_PERF_COLL
#error "HC_PERF_COLL must name a collective's ops table, e.g. -DHC_PERF_COLL=hc_perf_coll_all_reduce"
#endif

int main(int argc, char **argv)
{
    return hc_perf_main(&HC_PERF_COLL, argc, argv);
}
