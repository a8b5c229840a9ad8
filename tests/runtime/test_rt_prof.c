/*
 * Profiling: aclprof records a real timeline of stream tasks and writes it as a Chrome trace. The
 * file is parsed (cJSON) and checked: the tasks are there, in stream order, with their bytes; only
 * the devices and kinds of task the configuration asks for are; errors follow CANN's codes.
 */
#include <dirent.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <acl/acl_prof.h>
#include <cjson/cJSON.h>

#include "rt_test.h"
#include "../common/trace_file.h"

static char base[128], dir[256]; /* a scratch directory, and where the traces go */

static void noop_func(void *args)
{
    (void)args;
}

/* The first complete event named name, or NULL. */
static const cJSON *find_event(const cJSON *trace, const char *name)
{
    const cJSON *ev;

    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(trace, "traceEvents")) {
        const cJSON *ph = cJSON_GetObjectItem(ev, "ph"), *n = cJSON_GetObjectItem(ev, "name");

        if (strcmp(ph->valuestring, "X") == 0 && strcmp(n->valuestring, name) == 0)
            return ev;
    }
    return NULL;
}

static double num(const cJSON *obj, const char *key)
{
    const cJSON *item = cJSON_GetObjectItem(obj, key);

    assert_non_null(item);
    return item->valuedouble;
}

static void test_timeline(void **state)
{
    static char src[1000], dst[1000];
    uint32_t devices[1] = {0};
    aclprofConfig *config;
    aclrtStream stream, other;
    const cJSON *copy, *func, *set;
    cJSON *trace;
    double slack;

    (void)state;
    snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), "/sub/dir");
    assert_int_equal(aclprofInit(dir, strlen(dir)), ACL_SUCCESS); /* creates the directories */
    config = aclprofCreateConfig(devices, 1, ACL_AICORE_PIPE_UTILIZATION, NULL,
                                 ACL_PROF_TASK_TIME | ACL_PROF_HCCL_TRACE | ACL_PROF_ACL_API);
    assert_non_null(config);
    assert_int_equal(aclrtSetDevice(1), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&other), ACL_SUCCESS);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    assert_int_equal(aclprofStart(config), ACL_SUCCESS);
    assert_int_equal(aclprofStart(config), ACL_ERROR_PROF_ALREADY_RUN);
    assert_int_equal(aclrtMemcpyAsync(dst, sizeof(dst), src, sizeof(src), ACL_MEMCPY_HOST_TO_HOST, stream),
                     ACL_SUCCESS);
    assert_int_equal(aclrtLaunchHostFunc(stream, noop_func, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtMemsetAsync(dst, sizeof(dst), 0, 100, stream), ACL_SUCCESS);
    assert_int_equal(aclrtLaunchHostFunc(other, noop_func, NULL), ACL_SUCCESS); /* device 1: not recorded */
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(other), ACL_SUCCESS);
    assert_int_equal(aclprofStop(config), ACL_SUCCESS);
    assert_int_equal(aclprofStop(config), ACL_ERROR_PROF_NOT_RUN);

    trace = t_take_trace(dir);
    assert_non_null(trace);
    copy = find_event(trace, "memcpy");
    func = find_event(trace, "host func");
    set = find_event(trace, "memset");
    assert_non_null(copy);
    assert_non_null(func);
    assert_non_null(set);
    assert_int_equal((int)num(cJSON_GetObjectItem(copy, "args"), "bytes"), 1000);
    assert_int_equal((int)num(cJSON_GetObjectItem(set, "args"), "bytes"), 100);
    assert_int_equal((int)num(cJSON_GetObjectItem(func, "args"), "device"), 0);
    assert_true(num(copy, "dur") >= 0);
    /* Stream order is on the timeline: each task starts after the one before it ended. The file has
     * whole nanoseconds, but a double holds today's epoch microseconds only to a quarter of one, so
     * each value parsed may be off by half that spacing (below ts * DBL_EPSILON). */
    slack = num(set, "ts") * DBL_EPSILON + 0.002;
    assert_true(num(func, "ts") >= num(copy, "ts") + num(copy, "dur") - slack);
    assert_true(num(set, "ts") >= num(func, "ts") + num(func, "dur") - slack);
    assert_int_equal((int)num(cJSON_GetObjectItem(trace, "otherData"), "events"), 3); /* not device 1's */
    cJSON_Delete(trace);

    /* HCCL operations only: the copies are not recorded (and a trace is still written). */
    assert_int_equal(aclprofDestroyConfig(config), ACL_SUCCESS);
    config = aclprofCreateConfig(NULL, 0, ACL_AICORE_NONE, NULL, ACL_PROF_HCCL_TRACE);
    assert_non_null(config);
    assert_int_equal(aclprofStart(config), ACL_SUCCESS);
    assert_int_equal(aclrtMemcpyAsync(dst, sizeof(dst), src, sizeof(src), ACL_MEMCPY_HOST_TO_HOST, stream),
                     ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(aclprofFinalize(), ACL_SUCCESS); /* stops and writes */
    trace = t_take_trace(dir);
    assert_non_null(trace);
    assert_null(find_event(trace, "memcpy"));
    cJSON_Delete(trace);
    assert_int_equal(aclprofDestroyConfig(config), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(other), ACL_SUCCESS);
}

static void test_errors(void **state)
{
    uint32_t bad[1] = {8};
    aclprofConfig *config;

    (void)state;
    config = aclprofCreateConfig(NULL, 0, ACL_AICORE_NONE, NULL, ACL_PROF_TASK_TIME);
    assert_non_null(config);
    assert_int_equal(aclprofStart(config), ACL_ERROR_UNINITIALIZE);
    assert_int_equal(aclprofFinalize(), ACL_ERROR_UNINITIALIZE);
    assert_null(aclprofCreateConfig(bad, 1, ACL_AICORE_NONE, NULL, ACL_PROF_TASK_TIME));
    assert_null(aclprofCreateConfig(NULL, 1, ACL_AICORE_NONE, NULL, ACL_PROF_TASK_TIME));
    assert_int_equal(aclprofInit(NULL, 4), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofInit(dir, strlen(dir) + 5), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofInit("/proc/no/such/dir", 17), ACL_ERROR_INVALID_FILE);
    assert_int_equal(aclprofInit(dir, strlen(dir)), ACL_SUCCESS);
    assert_int_equal(aclprofInit(dir, strlen(dir)), ACL_ERROR_REPEAT_INITIALIZE);
    assert_int_equal(aclprofStop(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofFinalize(), ACL_SUCCESS);
    assert_int_equal(aclprofDestroyConfig(config), ACL_SUCCESS);
    assert_int_equal(aclprofDestroyConfig(NULL), ACL_ERROR_INVALID_PARAM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_timeline),
    };
    char cmd[200];
    int failed;

    snprintf(base, sizeof(base), "/tmp/hostccl_prof_test_XXXXXX");
    assert_non_null(mkdtemp(base));
    snprintf(dir, sizeof(dir), "%s", base);
    failed = cmocka_run_group_tests(tests, NULL, NULL);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    if (system(cmd) != 0)
        failed = 1;
    return failed;
}
