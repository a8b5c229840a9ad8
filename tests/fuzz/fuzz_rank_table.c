/*
 * Fuzz target: the CANN rank table parser (src/boot/rank_table.c). The table is a file the user
 * or a scheduler writes; every rank parses it. The input is the file's bytes.
 *
 * Properties: parsing never crashes and either refuses with HCCL_E_PARA (or HCCL_E_MEMORY) or
 * yields a table that is usable as it stands: version 1.0 or 1.2, ranks 0..N-1 each on a server
 * whose block of consecutive ranks holds it, distinct terminated server ids, numeric or empty
 * addresses, super pods in range; the rendezvous address is either found or refused with
 * HCCL_E_PARA; and writing the table back as JSON and parsing that gives the same digest (what was
 * accepted means the same when written out again).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fuzz_target.h"
#include "hc_check.h"
#include "hc_rank_table.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_logs_default_off();
    return 0;
}

static void check_text(const char *s, size_t cap, int may_be_empty)
{
    const char *end = memchr(s, '\0', cap);

    hc_assert(end != NULL);
    hc_assert(may_be_empty || end != s);
}

static void check_ip(const char *ip)
{
    unsigned char raw[16];

    check_text(ip, HC_RANK_TABLE_IP_BYTES, 1);
    hc_assert(ip[0] == '\0' || inet_pton(AF_INET, ip, raw) == 1 || inet_pton(AF_INET6, ip, raw) == 1);
}

static void check_servers(const hc_rank_table_t *t)
{
    uint32_t covered = 0;

    hc_assert(t->nservers >= 1 && t->nservers <= t->nranks);
    for (uint32_t s = 0; s < t->nservers; s++) {
        const hc_rank_table_server_t *srv = &t->servers[s];
        check_text(srv->server_id, sizeof(srv->server_id), 0);
        check_ip(srv->host_ip);
        hc_assert(srv->nranks >= 1 && srv->first_rank + srv->nranks <= t->nranks);
        for (uint32_t r = srv->first_rank; r < srv->first_rank + srv->nranks; r++)
            hc_assert(t->ranks[r].server == s);
        for (uint32_t q = 0; q < s; q++)
            hc_assert(strcmp(t->servers[q].server_id, srv->server_id) != 0);
        hc_assert(t->nsuper_pods == 0 ? srv->super_pod == -1
                                      : srv->super_pod >= 0 && (uint32_t)srv->super_pod < t->nsuper_pods);
        covered += srv->nranks;
    }
    hc_assert(covered == t->nranks);
}

static void check_ranks(const hc_rank_table_t *t)
{
    for (uint32_t r = 0; r < t->nranks; r++) {
        const hc_rank_table_rank_t *rank = &t->ranks[r];
        hc_assert(rank->server < t->nservers);
        hc_assert(rank->device_id <= 65535 && rank->device_port <= 65535 && rank->host_port <= 65535);
        hc_assert(rank->super_device_id >= -1);
        check_ip(rank->device_ip);
        check_text(rank->where, sizeof(rank->where), 0);
    }
}

static void add_number(cJSON *obj, const char *key, uint64_t v)
{
    char text[24];

    snprintf(text, sizeof(text), "%llu", (unsigned long long)v);
    cJSON_AddStringToObject(obj, key, text);
}

static void add_device(cJSON *devices, const hc_rank_table_t *t, uint32_t r)
{
    const hc_rank_table_rank_t *rank = &t->ranks[r];
    cJSON *dev = cJSON_CreateObject();

    add_number(dev, "device_id", rank->device_id);
    add_number(dev, "rank_id", r);
    if (rank->device_ip[0] != '\0')
        cJSON_AddStringToObject(dev, "device_ip", rank->device_ip);
    if (rank->device_port != 0)
        add_number(dev, "device_port", rank->device_port);
    if (rank->host_port != 0)
        add_number(dev, "host_port", rank->host_port);
    if (rank->super_device_id >= 0)
        add_number(dev, "super_device_id", (uint64_t)rank->super_device_id);
    cJSON_AddItemToArray(devices, dev);
}

/* The table written back as a rank table, in canonical form. */
static char *write_back(const hc_rank_table_t *t)
{
    cJSON *root = cJSON_CreateObject(), *servers = cJSON_AddArrayToObject(root, "server_list");
    char *text;

    cJSON_AddStringToObject(root, "status", "completed");
    cJSON_AddStringToObject(root, "version", t->version);
    add_number(root, "server_count", t->nservers);
    for (uint32_t s = 0; s < t->nservers; s++) {
        cJSON *srv = cJSON_CreateObject(), *devices;
        cJSON_AddStringToObject(srv, "server_id", t->servers[s].server_id);
        if (t->servers[s].host_ip[0] != '\0')
            cJSON_AddStringToObject(srv, "host_ip", t->servers[s].host_ip);
        devices = cJSON_AddArrayToObject(srv, "device");
        for (uint32_t r = t->servers[s].first_rank; r < t->servers[s].first_rank + t->servers[s].nranks; r++)
            add_device(devices, t, r);
        cJSON_AddItemToArray(servers, srv);
    }
    if (t->nsuper_pods > 0) {
        cJSON *pods = cJSON_AddArrayToObject(root, "super_pod_list");
        for (uint32_t k = 0; k < t->nsuper_pods; k++) {
            cJSON *pod = cJSON_CreateObject(), *list;
            cJSON_AddStringToObject(pod, "super_pod_id", t->super_pods[k]);
            list = cJSON_AddArrayToObject(pod, "server_list");
            for (uint32_t s = 0; s < t->nservers; s++) {
                cJSON *entry;
                if (t->servers[s].super_pod != (int32_t)k)
                    continue;
                entry = cJSON_CreateObject();
                cJSON_AddStringToObject(entry, "server_id", t->servers[s].server_id);
                cJSON_AddItemToArray(list, entry);
            }
            cJSON_AddItemToArray(pods, pod);
        }
    }
    text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hc_rank_table_t *t = NULL, *again = NULL;
    hc_sockaddr_t addr;
    uint8_t d1[32], d2[32];
    HcclResult res = hc_rank_table_parse("fuzz", (const char *)data, size, &t);
    char *text;

    if (res != HCCL_SUCCESS) {
        hc_assert(res == HCCL_E_PARA || res == HCCL_E_MEMORY);
        hc_assert(t == NULL);
        return 0;
    }
    hc_assert(strcmp(t->version, "1.0") == 0 || strcmp(t->version, "1.2") == 0);
    hc_assert(t->nranks >= 1 && t->nranks <= 65536);
    check_servers(t);
    check_ranks(t);
    res = hc_rank_table_rendezvous(t, HC_RANK_TABLE_DEFAULT_BASE_PORT, &addr);
    hc_assert(res == HCCL_SUCCESS || res == HCCL_E_PARA);
    hc_rank_table_digest(t, NULL, d1);
    text = write_back(t);
    hc_assert(text != NULL);
    hc_assert(hc_rank_table_parse("written back", text, strlen(text), &again) == HCCL_SUCCESS);
    hc_rank_table_digest(again, NULL, d2);
    hc_assert(memcmp(d1, d2, sizeof(d1)) == 0);
    hc_assert(again->nranks == t->nranks && again->nservers == t->nservers && again->nsuper_pods == t->nsuper_pods);
    cJSON_free(text);
    hc_rank_table_free(again);
    hc_rank_table_free(t);
    return 0;
}
