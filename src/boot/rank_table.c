/*
 * The CANN rank table parser (hc_rank_table.h). Everything in the file comes from outside: each
 * value is checked for type, form and range before it is used, and the first problem found is
 * logged once, naming the field by its path in the file ("server_list[1].device[0].rank_id").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "hc_check.h"
#include "hc_rank_table.h"
#include "hc_sha256.h"

/* The rendezvous takes at most this many ranks (HC_BOOT_MAX_RANKS). */
#define MAX_RANKS 65536u

typedef struct {
    const char *origin;
    hc_rank_table_t *table;
} parser_t;

/* Log what is wrong with the field at `where` and return HCCL_E_PARA. */
static HcclResult bad(const parser_t *p, const char *where, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static HcclResult bad(const parser_t *p, const char *where, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    HC_ERROR("rank table %s: %s%s%s", p->origin, where, where[0] != '\0' ? ": " : "", msg);
    return HCCL_E_PARA;
}

/* The string value of obj[key]; *value_p NULL when absent and optional. */
static HcclResult get_string(const parser_t *p, const cJSON *obj, const char *key, const char *where, int required,
                             const char **value_p)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    char path[HC_RANK_TABLE_WHERE_BYTES + 32];

    snprintf(path, sizeof(path), "%s%s%s", where, where[0] != '\0' ? "." : "", key);
    *value_p = NULL;
    if (item == NULL)
        return required ? bad(p, path, "missing (a required field)") : HCCL_SUCCESS;
    if (!cJSON_IsString(item) || item->valuestring == NULL)
        return bad(p, path, "must be a string (rank tables quote every value, e.g. \"0\")");
    *value_p = item->valuestring;
    return HCCL_SUCCESS;
}

/* obj[key] as a decimal number in [min, max]; *present_p 0 when absent and optional. */
static HcclResult get_number(const parser_t *p, const cJSON *obj, const char *key, const char *where, int required,
                             uint32_t min, uint32_t max, uint32_t *value_p, int *present_p)
{
    const char *text;
    char path[HC_RANK_TABLE_WHERE_BYTES + 32];
    unsigned long long v = 0;
    size_t n;

    HC_CHECK(get_string(p, obj, key, where, required, &text));
    *present_p = text != NULL;
    if (text == NULL)
        return HCCL_SUCCESS;
    snprintf(path, sizeof(path), "%s%s%s", where, where[0] != '\0' ? "." : "", key);
    n = strlen(text);
    if (n == 0 || n > 10 || strspn(text, "0123456789") != n)
        return bad(p, path, "\"%.32s\" is not a decimal number", text);
    v = strtoull(text, NULL, 10);
    if (v < min || v > max)
        return bad(p, path, "%llu is out of range (%u to %u)", v, min, max);
    *value_p = (uint32_t)v;
    return HCCL_SUCCESS;
}

/* obj[key] as a numeric IPv4 or IPv6 address copied into out; "" when absent. */
static HcclResult get_ip(const parser_t *p, const cJSON *obj, const char *key, const char *where,
                         char out[HC_RANK_TABLE_IP_BYTES])
{
    const char *text;
    unsigned char raw[16];

    HC_CHECK(get_string(p, obj, key, where, 0, &text));
    out[0] = '\0';
    if (text == NULL)
        return HCCL_SUCCESS;
    if (strlen(text) >= HC_RANK_TABLE_IP_BYTES ||
        (inet_pton(AF_INET, text, raw) != 1 && inet_pton(AF_INET6, text, raw) != 1))
        return bad(p, where, "%s \"%.48s\" is not a numeric IPv4 or IPv6 address", key, text);
    memcpy(out, text, strlen(text) + 1);
    return HCCL_SUCCESS;
}

/* obj[key] as a name of 1..64 characters copied into out. */
static HcclResult get_name(const parser_t *p, const cJSON *obj, const char *key, const char *where,
                           char out[HC_RANK_TABLE_NAME_BYTES])
{
    const char *text;
    size_t n;

    HC_CHECK(get_string(p, obj, key, where, 1, &text));
    n = strlen(text);
    if (n == 0 || n >= HC_RANK_TABLE_NAME_BYTES)
        return bad(p, where, "%s must have 1 to %d characters (it has %zu)", key, HC_RANK_TABLE_NAME_BYTES - 1, n);
    memcpy(out, text, n + 1);
    return HCCL_SUCCESS;
}

/* "list[index]" or "list[index].sub[sub_index]"; indices are below 65536 (MAX_RANKS). */
static void where_is(char *buf, const char *list, int index, const char *sub, int sub_index)
{
    unsigned i = (unsigned)index & 0x1ffff, j = (unsigned)sub_index & 0x1ffff;

    if (sub == NULL)
        snprintf(buf, HC_RANK_TABLE_WHERE_BYTES, "%.16s[%u]", list, i);
    else
        snprintf(buf, HC_RANK_TABLE_WHERE_BYTES, "%.16s[%u].%.16s[%u]", list, i, sub, j);
}

/* status, version, server_count; the number of servers it promises in *count_p. */
static HcclResult parse_header(parser_t *p, const cJSON *root, uint32_t *count_p)
{
    const char *status, *version;
    int present;

    if (cJSON_GetObjectItemCaseSensitive(root, "version") == NULL &&
        cJSON_GetObjectItemCaseSensitive(root, "group_list") != NULL)
        return bad(p, "version", "missing: this is the old group_list template, which hostccl does not read; "
                                 "write the table in the server_list form (version \"1.0\")");
    HC_CHECK(get_string(p, root, "status", "", 1, &status));
    if (strcmp(status, "completed") != 0)
        return bad(p, "status", "is \"%.32s\", not \"completed\": the table is not ready to use", status);
    HC_CHECK(get_string(p, root, "version", "", 1, &version));
    if (strcmp(version, "1.0") != 0 && strcmp(version, "1.2") != 0)
        return bad(p, "version", "is \"%.32s\"; hostccl reads versions \"1.0\" and \"1.2\"", version);
    snprintf(p->table->version, sizeof(p->table->version), "%s", version);
    return get_number(p, root, "server_count", "", 1, 1, MAX_RANKS, count_p, &present);
}

/* The device array of server i: a non-empty array. */
static HcclResult device_array(parser_t *p, const cJSON *server, int i, const cJSON **devices_p)
{
    char where[HC_RANK_TABLE_WHERE_BYTES + 16];
    const cJSON *devices;

    where_is(where, "server_list", i, NULL, 0);
    if (!cJSON_IsObject(server))
        return bad(p, where, "must be an object with server_id and device");
    devices = cJSON_GetObjectItemCaseSensitive(server, "device");
    strcat(where, ".device");
    if (devices == NULL)
        return bad(p, where, "missing (a required field)");
    if (!cJSON_IsArray(devices) || cJSON_GetArraySize(devices) == 0)
        return bad(p, where, "must be a non-empty array of devices");
    *devices_p = devices;
    return HCCL_SUCCESS;
}

/* Count the devices of every server (the rank_ids must be 0 .. that count - 1) and size the table. */
static HcclResult size_table(parser_t *p, const cJSON *servers, uint32_t server_count)
{
    hc_rank_table_t *t = p->table;
    uint64_t nranks = 0;
    int n = cJSON_GetArraySize(servers);

    if (n == 0)
        return bad(p, "server_list", "is empty");
    if ((uint32_t)n != server_count)
        return bad(p, "server_count", "says %u but server_list has %d servers", server_count, n);
    for (int i = 0; i < n; i++) {
        const cJSON *devices = NULL;
        HC_CHECK(device_array(p, cJSON_GetArrayItem(servers, i), i, &devices));
        nranks += (uint64_t)cJSON_GetArraySize(devices);
    }
    if (nranks > MAX_RANKS)
        return bad(p, "server_list", "has %llu devices; hostccl takes at most %u ranks", (unsigned long long)nranks,
                   MAX_RANKS);
    t->nranks = (uint32_t)nranks;
    t->nservers = (uint32_t)n;
    t->ranks = calloc(t->nranks, sizeof(*t->ranks));
    t->servers = calloc(t->nservers, sizeof(*t->servers));
    if (t->ranks == NULL || t->servers == NULL) {
        HC_ERROR("rank table %s: out of memory for %u ranks", p->origin, t->nranks);
        return HCCL_E_MEMORY;
    }
    for (uint32_t r = 0; r < t->nranks; r++)
        t->ranks[r].server = UINT32_MAX; /* "not seen yet", for the duplicate check */
    return HCCL_SUCCESS;
}

/* Device j of server i, into its rank's slot; its rank_id in *rank_p. */
static HcclResult parse_device(parser_t *p, const cJSON *dev, uint32_t i, int j, uint32_t *rank_p)
{
    hc_rank_table_t *t = p->table;
    char where[HC_RANK_TABLE_WHERE_BYTES];
    hc_rank_table_rank_t parsed = {.server = i, .super_device_id = -1};
    uint32_t rank = 0, sdid = 0;
    int present;

    where_is(where, "server_list", (int)i, "device", j);
    if (!cJSON_IsObject(dev))
        return bad(p, where, "must be an object with device_id and rank_id");
    HC_CHECK(get_number(p, dev, "device_id", where, 1, 0, 65535, &parsed.device_id, &present));
    HC_CHECK(get_number(p, dev, "rank_id", where, 1, 0, UINT32_MAX, &rank, &present));
    HC_CHECK(get_ip(p, dev, "device_ip", where, parsed.device_ip));
    HC_CHECK(get_number(p, dev, "device_port", where, 0, 1, 65535, &parsed.device_port, &present));
    HC_CHECK(get_number(p, dev, "host_port", where, 0, 1, 65535, &parsed.host_port, &present));
    if (strcmp(t->version, "1.2") == 0) {
        HC_CHECK(get_number(p, dev, "super_device_id", where, 0, 0, UINT32_MAX, &sdid, &present));
        parsed.super_device_id = present ? (int64_t)sdid : -1;
    }
    if (rank >= t->nranks)
        return bad(p, where, "rank_id %u is out of range: the table lists %u devices, so rank ids are 0 to %u", rank,
                   t->nranks, t->nranks - 1);
    if (t->ranks[rank].server != UINT32_MAX)
        return bad(p, where, "rank_id %u is a duplicate: %s has it too", rank, t->ranks[rank].where);
    memcpy(parsed.where, where, sizeof(where));
    t->ranks[rank] = parsed;
    *rank_p = rank;
    return HCCL_SUCCESS;
}

/* A server's ranks must be one block (ranks of a host are numbered together, as CANN requires of
 * devices that are physically close), and its device_ids distinct. */
static HcclResult check_server_block(parser_t *p, uint32_t i, uint32_t lo, uint32_t hi, uint32_t count)
{
    hc_rank_table_t *t = p->table;
    char where[HC_RANK_TABLE_WHERE_BYTES];

    where_is(where, "server_list", (int)i, NULL, 0);
    if (hi - lo + 1 != count)
        return bad(p, where, "rank_ids are interleaved with another server's: its %u devices have rank_ids from %u "
                             "to %u; the ranks of a server must be consecutive", count, lo, hi);
    for (uint32_t a = lo; a <= hi; a++)
        for (uint32_t b = lo; b < a; b++)
            if (t->ranks[a].device_id == t->ranks[b].device_id)
                return bad(p, t->ranks[a].where, "device_id %u is a duplicate on this server: %s has it too",
                           t->ranks[a].device_id, t->ranks[b].where);
    t->servers[i].first_rank = lo;
    t->servers[i].nranks = count;
    return HCCL_SUCCESS;
}

static HcclResult parse_server(parser_t *p, const cJSON *server, uint32_t i)
{
    hc_rank_table_t *t = p->table;
    hc_rank_table_server_t *s = &t->servers[i];
    char where[HC_RANK_TABLE_WHERE_BYTES];
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(server, "device");
    uint32_t lo = UINT32_MAX, hi = 0;
    int n = cJSON_GetArraySize(devices);

    where_is(where, "server_list", (int)i, NULL, 0);
    HC_CHECK(get_name(p, server, "server_id", where, s->server_id));
    for (uint32_t k = 0; k < i; k++)
        if (strcmp(t->servers[k].server_id, s->server_id) == 0)
            return bad(p, where, "server_id \"%s\" is a duplicate of server_list[%u]'s", s->server_id, k);
    HC_CHECK(get_ip(p, server, "host_ip", where, s->host_ip));
    s->super_pod = -1;
    for (int j = 0; j < n; j++) {
        uint32_t rank = 0;
        HC_CHECK(parse_device(p, cJSON_GetArrayItem(devices, j), i, j, &rank));
        lo = rank < lo ? rank : lo;
        hi = rank > hi ? rank : hi;
    }
    return check_server_block(p, i, lo, hi, (uint32_t)n);
}

/* Entry k of super_pod_list: its id and the servers it claims. */
static HcclResult parse_super_pod(parser_t *p, const cJSON *pod, uint32_t k)
{
    hc_rank_table_t *t = p->table;
    char where[HC_RANK_TABLE_WHERE_BYTES];
    const cJSON *list;
    int n;

    where_is(where, "super_pod_list", (int)k, NULL, 0);
    if (!cJSON_IsObject(pod))
        return bad(p, where, "must be an object with super_pod_id and server_list");
    HC_CHECK(get_name(p, pod, "super_pod_id", where, t->super_pods[k]));
    for (uint32_t q = 0; q < k; q++)
        if (strcmp(t->super_pods[q], t->super_pods[k]) == 0)
            return bad(p, where, "super_pod_id \"%s\" is a duplicate of super_pod_list[%u]'s", t->super_pods[k], q);
    list = cJSON_GetObjectItemCaseSensitive(pod, "server_list");
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
        return bad(p, where, "server_list must be a non-empty array of {\"server_id\": ...}");
    n = cJSON_GetArraySize(list);
    for (int j = 0; j < n; j++) {
        char name[HC_RANK_TABLE_NAME_BYTES], entry[HC_RANK_TABLE_WHERE_BYTES];
        uint32_t s;
        where_is(entry, "super_pod_list", (int)k, "server_list", j);
        if (!cJSON_IsObject(cJSON_GetArrayItem(list, j)))
            return bad(p, entry, "must be an object with server_id");
        HC_CHECK(get_name(p, cJSON_GetArrayItem(list, j), "server_id", entry, name));
        for (s = 0; s < t->nservers && strcmp(t->servers[s].server_id, name) != 0; s++)
            ;
        if (s == t->nservers)
            return bad(p, entry, "server_id \"%s\" is not in the top-level server_list", name);
        if (t->servers[s].super_pod >= 0)
            return bad(p, entry, "server \"%s\" is already in super pod \"%s\"", name,
                       t->super_pods[t->servers[s].super_pod]);
        t->servers[s].super_pod = (int32_t)k;
    }
    return HCCL_SUCCESS;
}

/* Version 1.2's super pods: every server in exactly one, the servers of a pod consecutive in
 * server_list (CANN forbids configuring pods interleaved), super_device_id distinct within a pod. */
static HcclResult parse_super_pods(parser_t *p, const cJSON *root)
{
    hc_rank_table_t *t = p->table;
    const cJSON *pods = cJSON_GetObjectItemCaseSensitive(root, "super_pod_list");
    int n;

    if (pods == NULL)
        return HCCL_SUCCESS;
    if (!cJSON_IsArray(pods) || cJSON_GetArraySize(pods) == 0)
        return bad(p, "super_pod_list", "must be a non-empty array");
    n = cJSON_GetArraySize(pods);
    if ((uint32_t)n > t->nservers)
        return bad(p, "super_pod_list", "has %d super pods for %u servers", n, t->nservers);
    t->super_pods = calloc((size_t)n, sizeof(*t->super_pods));
    if (t->super_pods == NULL)
        return HCCL_E_MEMORY;
    t->nsuper_pods = (uint32_t)n;
    for (int k = 0; k < n; k++)
        HC_CHECK(parse_super_pod(p, cJSON_GetArrayItem(pods, k), (uint32_t)k));
    for (uint32_t s = 0; s < t->nservers; s++) {
        char where[HC_RANK_TABLE_WHERE_BYTES];
        where_is(where, "server_list", (int)s, NULL, 0);
        if (t->servers[s].super_pod < 0)
            return bad(p, where, "server \"%s\" is in no super pod of super_pod_list", t->servers[s].server_id);
        for (uint32_t q = 0; q + 1 < s; q++)
            if (t->servers[q].super_pod == t->servers[s].super_pod &&
                t->servers[s - 1].super_pod != t->servers[s].super_pod)
                return bad(p, where, "super pod \"%s\" is interleaved with another: list the servers of a super "
                                     "pod together", t->super_pods[t->servers[s].super_pod]);
    }
    return HCCL_SUCCESS;
}

/* super_device_id names an NPU within its super pod (all servers are one pod without a list). */
static HcclResult check_super_device_ids(parser_t *p)
{
    hc_rank_table_t *t = p->table;

    for (uint32_t a = 0; a < t->nranks; a++)
        for (uint32_t b = 0; b < a && t->ranks[a].super_device_id >= 0; b++)
            if (t->ranks[b].super_device_id == t->ranks[a].super_device_id &&
                t->servers[t->ranks[a].server].super_pod == t->servers[t->ranks[b].server].super_pod)
                return bad(p, t->ranks[a].where, "super_device_id %lld is a duplicate in its super pod: %s has it too",
                           (long long)t->ranks[a].super_device_id, t->ranks[b].where);
    return HCCL_SUCCESS;
}

/* Where parsing stopped, as line and column, for a JSON syntax error. */
static HcclResult syntax_error(const parser_t *p, const char *text, size_t len, const char *end)
{
    size_t offset = end != NULL && end >= text && end <= text + len ? (size_t)(end - text) : 0;
    unsigned line = 1, column = 1;

    for (size_t i = 0; i < offset; i++, column++)
        if (text[i] == '\n')
            line++, column = 0;
    if (len == 0)
        return bad(p, "", "is empty, not JSON");
    return bad(p, "", "is not valid JSON: parsing stopped at line %u, column %u", line, column);
}

static HcclResult parse_root(parser_t *p, const cJSON *root)
{
    const cJSON *servers;
    uint32_t server_count;

    if (!cJSON_IsObject(root))
        return bad(p, "", "the top level must be a JSON object");
    HC_CHECK(parse_header(p, root, &server_count));
    servers = cJSON_GetObjectItemCaseSensitive(root, "server_list");
    if (servers == NULL)
        return bad(p, "server_list", "missing (a required field)");
    if (!cJSON_IsArray(servers))
        return bad(p, "server_list", "must be an array of servers");
    HC_CHECK(size_table(p, servers, server_count));
    for (uint32_t i = 0; i < p->table->nservers; i++)
        HC_CHECK(parse_server(p, cJSON_GetArrayItem(servers, (int)i), i));
    /* Every device holds a distinct rank_id below nranks, so every rank is present. */
    if (strcmp(p->table->version, "1.2") == 0) {
        HC_CHECK(parse_super_pods(p, root));
        HC_CHECK(check_super_device_ids(p));
    }
    return HCCL_SUCCESS;
}

HcclResult hc_rank_table_parse(const char *origin, const char *text, size_t len, hc_rank_table_t **table_p)
{
    parser_t p = {.origin = origin != NULL ? origin : "(memory)"};
    const char *end = NULL;
    cJSON *root;
    HcclResult res;

    if (len > HC_RANK_TABLE_MAX_BYTES)
        return bad(&p, "", "is %zu bytes; a rank table may have at most %u", len, HC_RANK_TABLE_MAX_BYTES);
    root = len > 0 ? cJSON_ParseWithLengthOpts(text, len, &end, 0) : NULL;
    if (root == NULL)
        return syntax_error(&p, text, len, end);
    /* cJSON stops after the first value; anything but white space after it is not JSON either. */
    while (end < text + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
        end++;
    if (end < text + len) {
        cJSON_Delete(root);
        return syntax_error(&p, text, len, end);
    }
    p.table = calloc(1, sizeof(*p.table));
    if (p.table == NULL) {
        cJSON_Delete(root);
        return HCCL_E_MEMORY;
    }
    res = parse_root(&p, root);
    cJSON_Delete(root);
    if (res != HCCL_SUCCESS) {
        hc_rank_table_free(p.table);
        return res;
    }
    *table_p = p.table;
    return HCCL_SUCCESS;
}

/* The whole file, or its first HC_RANK_TABLE_MAX_BYTES + 1 bytes when it is longer (the parser
 * then says it is too long). Not fstat's size: the table may come through a pipe. */
static HcclResult read_file(const char *path, char **text_p, size_t *len_p)
{
    size_t cap = 65536, len = 0;
    char *text = malloc(cap);
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0 || text == NULL) {
        HC_ERROR("cannot open rank table %s: %s", path, fd < 0 ? strerror(errno) : "out of memory");
        free(text);
        if (fd >= 0)
            close(fd);
        return fd < 0 ? HCCL_E_OPEN_FILE_FAILURE : HCCL_E_MEMORY;
    }
    while (len <= HC_RANK_TABLE_MAX_BYTES) {
        ssize_t n;
        if (len == cap) {
            char *grown = realloc(text, cap * 2);
            if (grown == NULL)
                break;
            text = grown;
            cap *= 2;
        }
        n = read(fd, text + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            HC_ERROR("cannot read rank table %s: %s", path, strerror(errno));
            free(text);
            close(fd);
            return HCCL_E_OPEN_FILE_FAILURE;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    *text_p = text;
    *len_p = len;
    return HCCL_SUCCESS;
}

HcclResult hc_rank_table_load(const char *path, hc_rank_table_t **table_p)
{
    char *text = NULL;
    size_t len = 0;
    HcclResult res;

    HC_CHECK(read_file(path, &text, &len));
    res = hc_rank_table_parse(path, text, len, table_p);
    free(text);
    return res;
}

void hc_rank_table_free(hc_rank_table_t *table)
{
    if (table == NULL)
        return;
    free(table->ranks);
    free(table->servers);
    free(table->super_pods);
    free(table);
}

HcclResult hc_rank_table_rendezvous(const hc_rank_table_t *table, uint32_t base_port, hc_sockaddr_t *addr_p)
{
    const hc_rank_table_rank_t *r0 = &table->ranks[0];
    const hc_rank_table_server_t *s0 = &table->servers[r0->server];
    const char *ip = r0->device_ip[0] != '\0' ? r0->device_ip : s0->host_ip[0] != '\0' ? s0->host_ip : NULL;
    uint32_t port = r0->host_port != 0 ? r0->host_port : base_port + r0->device_id;
    char text[HC_RANK_TABLE_IP_BYTES + 16];

    if (ip == NULL && table->nservers > 1) {
        HC_ERROR("rank table: %s has no device_ip and server \"%s\" no host_ip: with several servers, rank 0 "
                 "serves the rendezvous there and the other ranks must know the address", r0->where, s0->server_id);
        return HCCL_E_PARA;
    }
    if (port == 0 || port > 65535) {
        HC_ERROR("rank table: rank 0's rendezvous port HCCL_IF_BASE_PORT %u + device_id %u = %u is not a port; "
                 "lower HCCL_IF_BASE_PORT or set host_port at %s", base_port, r0->device_id, port, r0->where);
        return HCCL_E_PARA;
    }
    ip = ip != NULL ? ip : "127.0.0.1";
    snprintf(text, sizeof(text), strchr(ip, ':') != NULL ? "[%s]:%u" : "%s:%u", ip, port);
    return hc_sockaddr_parse(text, addr_p);
}

static void digest_u32(hc_sha256_t *ctx, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};

    hc_sha256_update(ctx, b, sizeof(b));
}

/* A string with its length, so that "ab"+"c" and "a"+"bc" differ. */
static void digest_str(hc_sha256_t *ctx, const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;

    digest_u32(ctx, (uint32_t)n);
    hc_sha256_update(ctx, s, n);
}

void hc_rank_table_digest(const hc_rank_table_t *table, const char *secret, uint8_t digest[32])
{
    hc_sha256_t ctx;

    hc_sha256_init(&ctx);
    digest_str(&ctx, "hostccl rank table rendezvous 1");
    digest_str(&ctx, secret);
    digest_str(&ctx, table->version);
    digest_u32(&ctx, table->nranks);
    for (uint32_t r = 0; r < table->nranks; r++) {
        const hc_rank_table_rank_t *rank = &table->ranks[r];
        const hc_rank_table_server_t *server = &table->servers[rank->server];
        digest_str(&ctx, server->server_id);
        digest_str(&ctx, server->host_ip);
        digest_u32(&ctx, rank->device_id);
        digest_str(&ctx, rank->device_ip);
        digest_u32(&ctx, rank->device_port);
        digest_u32(&ctx, rank->host_port);
    }
    hc_sha256_final(&ctx, digest);
}
