/*
 * Profiling (aclprof*): a timeline of the tasks streams run, written as a Chrome trace.
 *
 * While a recording runs, the executor times every task of a recorded device's streams
 * (stream.c, run_one) and the task may describe itself (aclrtHostProfAnnotate): HCCL operations
 * give their collective, bytes, root or peer, communicator and result; copies give their bytes.
 * aclprofStop writes the events as one JSON file, "hostccl_trace_<host>_<pid>_<n>.json", in the
 * directory given to aclprofInit: complete events ("ph":"X") with microsecond timestamps on the
 * CLOCK_REALTIME scale (so that the files of several ranks line up), one trace process per OS
 * process and one trace thread per stream. chrome://tracing and ui.perfetto.dev open it.
 *
 * Cost: none while nothing records beyond one relaxed atomic load per task; while recording, two
 * clock reads and one short critical section per task. Events are kept in chunks allocated as
 * needed, up to MAX_EVENTS per recording; later events are counted as dropped (the file says how
 * many).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <acl/acl_prof.h>

#include "hc_check.h"
#include "hc_compiler.h"
#include "hc_log.h"
#include "hc_rt.h"

#define CHUNK_EVENTS 4096
#define MAX_CHUNKS 256 /* MAX_EVENTS = 1M: about 100 MB at most */
#define MAX_EVENTS (CHUNK_EVENTS * MAX_CHUNKS)
#define MAX_NAMES 64   /* distinct communicator names kept per recording */

struct aclprofConfig {
    uint64_t types;      /* ACL_PROF_* */
    int all_devices;     /* deviceNums 0 */
    uint8_t devices[HC_RT_MAX_DEVICES];
};

typedef struct {
    const char *what;    /* static storage */
    const char *category;
    const char *comm;    /* interned, or NULL */
    const char *dtype, *redop, *peer_role;
    int64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
    uint64_t seq, count, bytes;
    int64_t peer;
    int32_t device, rank;
    uint32_t nranks, stream;
    int result;          /* HcclResult when annotated by HCCL, else the task's aclError */
    int annotated;
} prof_event_t;

static struct {
    pthread_mutex_t lock;  /* guards everything but `running` and `config` (read while running) */
    char dir[4096];        /* "" until aclprofInit */
    atomic_int running;
    struct aclprofConfig config; /* copied at aclprofStart; read under the lock */
    /* Which devices a running recording covers, for the lock-free check on every task: written
     * before `running` is set (release), read after it is seen set (acquire). */
    atomic_int want_all;
    atomic_uchar want[HC_RT_MAX_DEVICES];
    prof_event_t *chunks[MAX_CHUNKS];
    size_t nevents;
    uint64_t dropped;
    char *names[MAX_NAMES];
    size_t nnames;
    int64_t realtime_offset_ns; /* CLOCK_REALTIME - CLOCK_MONOTONIC at aclprofStart */
    unsigned files;             /* traces written by this process */
} prof = {.lock = PTHREAD_MUTEX_INITIALIZER};

static HC_TLS_FAST hc_rt_prof_task_t *tls_task;

/* ---- recording ------------------------------------------------------------------------------- */

int hc_rt_prof_wants(int32_t device)
{
    if (!atomic_load_explicit(&prof.running, memory_order_acquire))
        return 0;
    return atomic_load_explicit(&prof.want_all, memory_order_relaxed) ||
           (device >= 0 && device < HC_RT_MAX_DEVICES && atomic_load_explicit(&prof.want[device], memory_order_relaxed));
}

void hc_rt_prof_task_begin(hc_rt_prof_task_t *task)
{
    task->annotated = 0;
    task->outer = tls_task;
    tls_task = task;
    task->start_ns = hc_now_ns();
}

HC_RT_EXPORT int aclrtHostProfActive(void)
{
    return tls_task != NULL;
}

HC_RT_EXPORT void aclrtHostProfAnnotate(const aclrtHostProfInfo *info)
{
    hc_rt_prof_task_t *task = tls_task;

    if (task == NULL || info == NULL)
        return;
    task->info = *info;
    task->comm[0] = '\0';
    if (info->comm != NULL)
        snprintf(task->comm, sizeof(task->comm), "%s", info->comm);
    task->annotated = 1;
}

/* The interned copy of name (lock held); NULL when the table is full or memory is short. */
static const char *intern(const char *name)
{
    for (size_t i = 0; i < prof.nnames; i++)
        if (strcmp(prof.names[i], name) == 0)
            return prof.names[i];
    if (prof.nnames == MAX_NAMES || (prof.names[prof.nnames] = strdup(name)) == NULL)
        return NULL;
    return prof.names[prof.nnames++];
}

/* A free event slot (lock held), or NULL when the recording is full. */
static prof_event_t *next_slot(void)
{
    size_t chunk = prof.nevents / CHUNK_EVENTS;

    if (prof.nevents == MAX_EVENTS)
        return NULL;
    if (prof.chunks[chunk] == NULL && (prof.chunks[chunk] = malloc(CHUNK_EVENTS * sizeof(prof_event_t))) == NULL)
        return NULL;
    return &prof.chunks[chunk][prof.nevents++ % CHUNK_EVENTS];
}

/* HCCL operations are what ACL_PROF_HCCL_TRACE asks for; every other task is ACL_PROF_TASK_TIME's. */
static int wanted(const hc_rt_prof_task_t *task)
{
    int hccl = task->annotated && task->info.category != NULL && strcmp(task->info.category, "hccl") == 0;

    return (prof.config.types & (hccl ? ACL_PROF_HCCL_TRACE : ACL_PROF_TASK_TIME)) != 0;
}

static void fill_event(prof_event_t *ev, const hc_rt_prof_task_t *task)
{
    const aclrtHostProfInfo *info = &task->info;

    ev->annotated = task->annotated;
    ev->comm = NULL;
    if (!task->annotated)
        return;
    ev->what = info->name != NULL ? info->name : ev->what;
    ev->category = info->category != NULL ? info->category : ev->category;
    ev->comm = task->comm[0] != '\0' ? intern(task->comm) : NULL;
    ev->dtype = info->dtype;
    ev->redop = info->redop;
    ev->peer_role = info->peer_role;
    ev->seq = info->seq;
    ev->count = info->count;
    ev->bytes = info->bytes;
    ev->peer = info->peer;
    ev->rank = info->rank;
    ev->nranks = info->nranks;
    ev->result = info->result;
}

void hc_rt_prof_task_end(hc_rt_prof_task_t *task, const char *what, int32_t device, unsigned stream_number,
                         aclError err)
{
    int64_t end_ns = hc_now_ns();
    prof_event_t *ev;

    tls_task = task->outer;
    pthread_mutex_lock(&prof.lock);
    if (atomic_load(&prof.running) && wanted(task)) {
        ev = next_slot();
        if (ev == NULL) {
            prof.dropped++;
        } else {
            *ev = (prof_event_t){.what = what, .category = "task", .start_ns = task->start_ns, .end_ns = end_ns,
                                 .device = device, .stream = stream_number, .result = err, .rank = -1, .peer = -1};
            fill_event(ev, task);
        }
    }
    pthread_mutex_unlock(&prof.lock);
}

/* ---- the Chrome trace ------------------------------------------------------------------------- */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void write_args(FILE *f, const prof_event_t *ev)
{
    fprintf(f, "\"args\":{\"device\":%d,\"stream\":%u", ev->device, ev->stream);
    if (ev->annotated && ev->comm != NULL) {
        fprintf(f, ",\"comm\":");
        json_string(f, ev->comm);
    }
    if (ev->annotated && ev->rank >= 0)
        fprintf(f, ",\"rank\":%d,\"nranks\":%u,\"seq\":%llu", ev->rank, ev->nranks, (unsigned long long)ev->seq);
    if (ev->annotated)
        fprintf(f, ",\"count\":%llu,\"bytes\":%llu", (unsigned long long)ev->count, (unsigned long long)ev->bytes);
    if (ev->annotated && ev->dtype != NULL)
        fprintf(f, ",\"dtype\":\"%s\"", ev->dtype);
    if (ev->annotated && ev->redop != NULL)
        fprintf(f, ",\"op\":\"%s\"", ev->redop);
    if (ev->annotated && ev->peer >= 0)
        fprintf(f, ",\"%s\":%lld", ev->peer_role != NULL ? ev->peer_role : "peer", (long long)ev->peer);
    if (ev->annotated && ev->rank >= 0)
        fprintf(f, ",\"result\":\"%s\"}", hc_result_name((HcclResult)ev->result));
    else
        fprintf(f, ",\"result\":%d}", ev->result);
}

/* Microseconds with three decimals from whole nanoseconds, written from integers: a double holds
 * today's CLOCK_REALTIME microseconds (~1.8e15) only to a quarter of a microsecond, and "%.3f" of it
 * printed that error as digits. */
static void write_us(FILE *f, const char *key, int64_t ns)
{
    lldiv_t us = lldiv(llabs((long long)ns), 1000);

    fprintf(f, "\"%s\":%s%lld.%03lld,", key, ns < 0 ? "-" : "", us.quot, us.rem);
}

static void write_event(FILE *f, const prof_event_t *ev, int pid)
{
    fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",", ev->what, ev->category);
    write_us(f, "ts", ev->start_ns + prof.realtime_offset_ns);
    write_us(f, "dur", ev->end_ns - ev->start_ns);
    fprintf(f, "\"pid\":%d,\"tid\":%u,", pid, ev->stream);
    write_args(f, ev);
    fputc('}', f);
}

/* Metadata: the process's name, and one name per stream that has events. */
static void write_names(FILE *f, int pid, const char *host)
{
    unsigned *named = calloc(prof.nevents + 1, sizeof(*named));
    size_t nnamed = 0;
    char process[128];

    snprintf(process, sizeof(process), "%s pid %d", host, pid);
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":", pid);
    json_string(f, process);
    fprintf(f, "}}");
    for (size_t i = 0; named != NULL && i < prof.nevents; i++) {
        const prof_event_t *ev = &prof.chunks[i / CHUNK_EVENTS][i % CHUNK_EVENTS];
        size_t k = 0;

        while (k < nnamed && named[k] != ev->stream)
            k++;
        if (k < nnamed)
            continue;
        named[nnamed++] = ev->stream;
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":"
                   "\"device %d stream %u\"}}", pid, ev->stream, ev->device, ev->stream);
    }
    free(named);
}

/* Write the recording to a new file of the session's directory (lock held). The file appears whole:
 * it is written under a temporary name and renamed. */
static aclError write_trace(void)
{
    char host[64] = "host", path[sizeof(prof.dir) + 128], tmp[sizeof(path) + 8];
    int pid = (int)getpid();
    FILE *f;

    gethostname(host, sizeof(host) - 1);
    snprintf(path, sizeof(path), "%s/hostccl_trace_%s_%d_%u.json", prof.dir, host, pid, prof.files);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f == NULL) {
        HC_ERROR("aclprofStop: cannot write the trace %s: %s", tmp, strerror(errno));
        return ACL_ERROR_WRITE_FILE;
    }
    fprintf(f, "{\"traceEvents\":[\n");
    write_names(f, pid, host);
    for (size_t i = 0; i < prof.nevents; i++)
        write_event(f, &prof.chunks[i / CHUNK_EVENTS][i % CHUNK_EVENTS], pid);
    fprintf(f, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"producer\":\"hostccl\",\"events\":%zu,"
               "\"dropped_events\":%llu,\"clock\":\"CLOCK_REALTIME\"}}\n",
            prof.nevents, (unsigned long long)prof.dropped);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        HC_ERROR("aclprofStop: cannot write the trace %s: %s", path, strerror(errno));
        unlink(tmp);
        return ACL_ERROR_WRITE_FILE;
    }
    prof.files++;
    HC_INFO("profiling: %zu events written to %s", prof.nevents, path);
    return ACL_SUCCESS;
}

static void clear_events(void)
{
    for (size_t i = 0; i < MAX_CHUNKS; i++) {
        free(prof.chunks[i]);
        prof.chunks[i] = NULL;
    }
    for (size_t i = 0; i < prof.nnames; i++)
        free(prof.names[i]);
    prof.nevents = 0;
    prof.nnames = 0;
    prof.dropped = 0;
}

/* ---- the aclprof calls ----------------------------------------------------------------------- */

/* mkdir -p: every missing directory of path, mode 0750. */
static int make_dirs(char *path)
{
    struct stat st;

    for (char *p = path + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0750) != 0 && errno != EEXIST) {
            *p = '/';
            return -1;
        }
        *p = '/';
    }
    if (mkdir(path, 0750) != 0 && errno != EEXIST)
        return -1;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
}

HC_RT_EXPORT aclError aclprofInit(const char *profilerResultPath, size_t length)
{
    char dir[sizeof(prof.dir)];
    aclError res = ACL_SUCCESS;

    if (profilerResultPath == NULL || length == 0 || length >= sizeof(dir) ||
        strnlen(profilerResultPath, length) != length) {
        HC_ERROR("aclprofInit: %s", profilerResultPath == NULL ? "profilerResultPath is NULL" :
                 "length must be the path's length (1 to 4095 characters)");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    memcpy(dir, profilerResultPath, length);
    dir[length] = '\0';
    pthread_mutex_lock(&prof.lock);
    if (prof.dir[0] != '\0') {
        HC_ERROR("aclprofInit: a profiling session (%s) is already initialised; aclprofFinalize it first", prof.dir);
        res = ACL_ERROR_REPEAT_INITIALIZE;
    } else if (make_dirs(dir) != 0) {
        HC_ERROR("aclprofInit: cannot create the directory %s: %s", dir, strerror(errno));
        res = ACL_ERROR_INVALID_FILE;
    } else {
        memcpy(prof.dir, dir, length + 1);
    }
    pthread_mutex_unlock(&prof.lock);
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums,
                                                aclprofAicoreMetrics aicoreMetrics,
                                                const aclprofAicoreEvents *aicoreEvents, uint64_t dataTypeConfig)
{
    int32_t count = hc_rt_device_count();
    aclprofConfig *config;

    (void)aicoreMetrics; /* there are no AI Cores to measure */
    if ((deviceNums > 0 && deviceIdList == NULL) || aicoreEvents != NULL) {
        HC_ERROR("aclprofCreateConfig: %s", aicoreEvents != NULL ? "aicoreEvents must be NULL" :
                 "deviceIdList is NULL with deviceNums > 0");
        (void)hc_rt_ret(ACL_ERROR_INVALID_PARAM);
        return NULL;
    }
    for (uint32_t i = 0; i < deviceNums; i++) {
        if (deviceIdList[i] >= (uint32_t)count) {
            HC_ERROR("aclprofCreateConfig: device %u is not one of this process's %d devices", deviceIdList[i], count);
            (void)hc_rt_ret(ACL_ERROR_INVALID_PARAM);
            return NULL;
        }
    }
    config = calloc(1, sizeof(*config));
    if (config == NULL) {
        HC_ERROR("aclprofCreateConfig: out of memory");
        (void)hc_rt_ret(ACL_ERROR_BAD_ALLOC);
        return NULL;
    }
    config->types = dataTypeConfig;
    config->all_devices = deviceNums == 0;
    for (uint32_t i = 0; i < deviceNums; i++)
        config->devices[deviceIdList[i]] = 1;
    return config;
}

HC_RT_EXPORT aclError aclprofDestroyConfig(const aclprofConfig *profilerConfig)
{
    if (profilerConfig == NULL) {
        HC_ERROR("aclprofDestroyConfig: profilerConfig is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    free((void *)profilerConfig);
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclprofStart(const aclprofConfig *profilerConfig)
{
    struct timespec real;
    aclError res = ACL_SUCCESS;

    if (profilerConfig == NULL) {
        HC_ERROR("aclprofStart: profilerConfig is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    pthread_mutex_lock(&prof.lock);
    if (prof.dir[0] == '\0') {
        HC_ERROR("aclprofStart: call aclprofInit first (it says where the trace goes)");
        res = ACL_ERROR_UNINITIALIZE;
    } else if (atomic_load(&prof.running)) {
        HC_ERROR("aclprofStart: a recording is already running; aclprofStop it first");
        res = ACL_ERROR_PROF_ALREADY_RUN;
    } else {
        prof.config = *profilerConfig;
        atomic_store_explicit(&prof.want_all, profilerConfig->all_devices, memory_order_relaxed);
        for (int d = 0; d < HC_RT_MAX_DEVICES; d++)
            atomic_store_explicit(&prof.want[d], profilerConfig->devices[d], memory_order_relaxed);
        clear_events();
        clock_gettime(CLOCK_REALTIME, &real);
        prof.realtime_offset_ns = (int64_t)real.tv_sec * HC_NS_PER_S + real.tv_nsec - hc_now_ns();
        atomic_store_explicit(&prof.running, 1, memory_order_release);
    }
    pthread_mutex_unlock(&prof.lock);
    return hc_rt_ret(res);
}

/* Stop the recording and write it (lock held). */
static aclError stop_locked(void)
{
    aclError res;

    atomic_store(&prof.running, 0);
    res = write_trace();
    clear_events();
    return res;
}

HC_RT_EXPORT aclError aclprofStop(const aclprofConfig *profilerConfig)
{
    aclError res;

    if (profilerConfig == NULL) {
        HC_ERROR("aclprofStop: profilerConfig is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    pthread_mutex_lock(&prof.lock);
    if (!atomic_load(&prof.running)) {
        HC_ERROR("aclprofStop: no recording is running (aclprofStart)");
        res = ACL_ERROR_PROF_NOT_RUN;
    } else {
        res = stop_locked();
    }
    pthread_mutex_unlock(&prof.lock);
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclprofFinalize(void)
{
    aclError res = ACL_SUCCESS;

    pthread_mutex_lock(&prof.lock);
    if (prof.dir[0] == '\0') {
        HC_ERROR("aclprofFinalize: no profiling session is initialised (aclprofInit)");
        res = ACL_ERROR_UNINITIALIZE;
    } else {
        if (atomic_load(&prof.running))
            res = stop_locked();
        prof.dir[0] = '\0';
    }
    pthread_mutex_unlock(&prof.lock);
    return hc_rt_ret(res);
}

void hc_rt_prof_finalize_quietly(void)
{
    pthread_mutex_lock(&prof.lock);
    if (atomic_load(&prof.running))
        (void)stop_locked();
    prof.dir[0] = '\0';
    pthread_mutex_unlock(&prof.lock);
}
