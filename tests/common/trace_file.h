/*
 * The profiler's trace file (aclprofStart's output, docs/runtime.md) for cmocka tests: the one
 * hostccl_trace_* file in a directory, parsed. Include after <cmocka.h> and <cjson/cJSON.h>.
 */
#ifndef HC_TEST_TRACE_FILE_H
#define HC_TEST_TRACE_FILE_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first hostccl_trace_* file in dir, parsed (NULL when there is none); the file is removed. */
static inline cJSON *t_take_trace(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    cJSON *json = NULL;
    char path[600];

    assert_non_null(d);
    while ((e = readdir(d)) != NULL && json == NULL) {
        FILE *f;
        long size;
        char *text;

        if (strncmp(e->d_name, "hostccl_trace_", 14) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        f = fopen(path, "r");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        size = ftell(f);
        rewind(f);
        text = calloc(1, (size_t)size + 1);
        assert_non_null(text);
        assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
        fclose(f);
        json = cJSON_Parse(text);
        assert_non_null(json);
        free(text);
        unlink(path);
    }
    closedir(d);
    return json;
}

#endif /* HC_TEST_TRACE_FILE_H */
