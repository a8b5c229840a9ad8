/*
 * CANN rank tables (DESIGN.md 4): the JSON file HcclCommInitClusterInfo reads, versions "1.0" and
 * "1.2" (docs/multihost.md shows both):
 *
 *   { "status": "completed", "version": "1.0", "server_count": "2",
 *     "server_list": [ { "server_id": "node_0", "host_ip": "172.16.0.110",
 *                        "device": [ { "device_id": "0", "device_ip": "192.168.1.8", "rank_id": "0" } ] } ] }
 *
 * Version 1.2 adds device[].super_device_id and a super_pod_list grouping servers into super pods.
 * Every value is a string, as CANN writes them. The parser checks everything a rank relies on and
 * names the offending field in one log line; unknown fields (container_ip, hardware_type, ...) are
 * ignored.
 */
#ifndef HC_RANK_TABLE_H
#define HC_RANK_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include <hccl/hccl_types.h>

#include "hc_sock.h"

#define HC_RANK_TABLE_MAX_BYTES (16u << 20) /* a 65536-rank table is about 8 MiB */
#define HC_RANK_TABLE_NAME_BYTES 65         /* server_id and super_pod_id: at most 64 characters */
#define HC_RANK_TABLE_IP_BYTES 48
#define HC_RANK_TABLE_WHERE_BYTES 64        /* "super_pod_list[65535].server_list[65535]" */

/* CANN's default HCCL_IF_BASE_PORT: rank-table rendezvous ports start here when it is unset. */
#define HC_RANK_TABLE_DEFAULT_BASE_PORT 60000

typedef struct {
    uint32_t server;                        /* index into servers */
    uint32_t device_id;
    char device_ip[HC_RANK_TABLE_IP_BYTES]; /* "" when absent */
    uint32_t device_port, host_port;        /* 0 when absent */
    int64_t super_device_id;                /* -1 when absent */
    char where[HC_RANK_TABLE_WHERE_BYTES];  /* its place in the file, for messages */
} hc_rank_table_rank_t;

typedef struct {
    char server_id[HC_RANK_TABLE_NAME_BYTES];
    char host_ip[HC_RANK_TABLE_IP_BYTES];   /* "" when absent */
    uint32_t first_rank, nranks;            /* its ranks are first_rank .. first_rank + nranks - 1 */
    int32_t super_pod;                      /* index into super_pods; -1 without a super_pod_list */
} hc_rank_table_server_t;

typedef struct {
    char version[8];                        /* "1.0" or "1.2" */
    uint32_t nranks, nservers, nsuper_pods;
    hc_rank_table_rank_t *ranks;            /* indexed by rank_id */
    hc_rank_table_server_t *servers;        /* in file order */
    char (*super_pods)[HC_RANK_TABLE_NAME_BYTES];
} hc_rank_table_t;

/*
 * Parse and check a rank table held in memory (len bytes, need not be terminated). `origin` names
 * it in messages (the file's path). HCCL_E_PARA with one log line naming the field when it is not
 * a usable table; HCCL_E_MEMORY when allocation fails.
 */
HcclResult hc_rank_table_parse(const char *origin, const char *text, size_t len, hc_rank_table_t **table_p);

/* Read the file at path and parse it: HCCL_E_OPEN_FILE_FAILURE when it cannot be read. */
HcclResult hc_rank_table_load(const char *path, hc_rank_table_t **table_p);

void hc_rank_table_free(hc_rank_table_t *table);

/*
 * Where the lowest rank (rank 0) serves the rendezvous: its device_ip, else its server's host_ip,
 * else 127.0.0.1 when the table has one server; port its host_port, else base_port + device_id.
 * HCCL_E_PARA (logged, naming the field) when a table of several servers gives no address or the
 * port leaves 1..65535.
 */
HcclResult hc_rank_table_rendezvous(const hc_rank_table_t *table, uint32_t base_port, hc_sockaddr_t *addr_p);

/*
 * SHA-256 of what the ranks must agree on (version, and per rank its server, device, addresses and
 * ports) and of secret (may be NULL): equal tables give equal digests whatever their layout, key
 * order or white space.
 */
void hc_rank_table_digest(const hc_rank_table_t *table, const char *secret, uint8_t digest[32]);

#endif /* HC_RANK_TABLE_H */
