/*
 * The CANN rank table (src/boot/rank_table.c, api_cluster.c): good tables of both versions parse
 * into the right ranks, servers and rendezvous address; every kind of bad table is refused with the
 * right code and a log line naming the field; the derived token depends on what the ranks must
 * agree on and on nothing else; HcclCommInitClusterInfo builds a working communicator and refuses
 * bad input without touching the network. JSON in this file uses ' for " (unquote()).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include <acl/acl.h>
#include <hccl/hccl.h>

#include <pthread.h>

#include "hc_boot.h"
#include "hc_log.h"
#include "hc_rank_table.h"
#include "hc_sha256.h"

static char *unquote(const char *text)
{
    char *s = strdup(text);

    for (char *p = s; *p != '\0'; p++)
        if (*p == '\'')
            *p = '"';
    return s;
}

static HcclResult parse(const char *text, hc_rank_table_t **table_p)
{
    char *json = unquote(text);
    HcclResult res = hc_rank_table_parse("t.json", json, strlen(json), table_p);

    free(json);
    return res;
}

#define DEV(id, ip, rank) "{'device_id':'" id "','device_ip':'" ip "','rank_id':'" rank "'}"
#define HEAD(version, count) "{'status':'completed','version':'" version "','server_count':'" count "',"

static const char table_10[] =
    HEAD("1.0", "2") "'server_list':["
    "{'server_id':'node_0','host_ip':'172.16.0.110','container_ip':'x','device':["
    DEV("0", "192.168.1.8", "0") "," DEV("1", "192.168.1.9", "1") "]},"
    "{'server_id':'node_1','host_ip':'172.16.0.111','device':["
    DEV("1", "192.168.2.9", "3") "," DEV("0", "192.168.2.8", "2") "]}]}";

static const char table_12[] =
    HEAD("1.2", "2") "'server_list':["
    "{'server_id':'node_0','host_ip':'172.16.0.110','device':["
    "{'device_id':'0','device_ip':'192.168.1.8','super_device_id':'0','rank_id':'0'},"
    "{'device_id':'1','device_ip':'192.168.1.9','super_device_id':'1','rank_id':'1'}]},"
    "{'server_id':'node_1','host_ip':'172.16.0.111','device':["
    "{'device_id':'0','device_ip':'192.168.2.8','super_device_id':'2','rank_id':'2'},"
    "{'device_id':'1','device_ip':'192.168.2.9','super_device_id':'3','rank_id':'3','host_port':'16667'}]}],"
    "'super_pod_list':[{'super_pod_id':'0','server_list':[{'server_id':'node_0'},{'server_id':'node_1'}]}]}";

static void test_sha256_vectors(void **state)
{
    static const struct {
        const char *msg;
        size_t repeat;
        const char *hex;
    } vectors[] = {
        {"", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    };
    (void)state;
    for (size_t v = 0; v < sizeof(vectors) / sizeof(vectors[0]); v++) {
        hc_sha256_t ctx;
        uint8_t digest[HC_SHA256_BYTES];
        char hex[2 * HC_SHA256_BYTES + 1];
        hc_sha256_init(&ctx);
        for (size_t i = 0; i < vectors[v].repeat; i++)
            hc_sha256_update(&ctx, vectors[v].msg, strlen(vectors[v].msg));
        hc_sha256_final(&ctx, digest);
        for (int i = 0; i < HC_SHA256_BYTES; i++)
            snprintf(hex + 2 * i, 3, "%02x", digest[i]);
        assert_string_equal(hex, vectors[v].hex);
    }
}

static void test_parse_10(void **state)
{
    hc_rank_table_t *t = NULL;
    (void)state;
    assert_int_equal(parse(table_10, &t), HCCL_SUCCESS);
    assert_string_equal(t->version, "1.0");
    assert_int_equal(t->nranks, 4);
    assert_int_equal(t->nservers, 2);
    assert_string_equal(t->servers[1].server_id, "node_1");
    assert_string_equal(t->servers[1].host_ip, "172.16.0.111");
    assert_int_equal(t->servers[1].first_rank, 2);
    assert_int_equal(t->servers[1].nranks, 2);
    assert_int_equal(t->servers[0].super_pod, -1);
    /* Devices listed out of order on node_1 land at their rank_id. */
    assert_int_equal(t->ranks[3].server, 1);
    assert_int_equal(t->ranks[3].device_id, 1);
    assert_string_equal(t->ranks[3].device_ip, "192.168.2.9");
    assert_string_equal(t->ranks[3].where, "server_list[1].device[0]");
    assert_int_equal(t->ranks[2].device_id, 0);
    assert_int_equal(t->ranks[0].host_port, 0);
    assert_int_equal(t->ranks[0].super_device_id, -1);
    hc_rank_table_free(t);
}

static void test_parse_12(void **state)
{
    hc_rank_table_t *t = NULL;
    (void)state;
    assert_int_equal(parse(table_12, &t), HCCL_SUCCESS);
    assert_string_equal(t->version, "1.2");
    assert_int_equal(t->nsuper_pods, 1);
    assert_string_equal(t->super_pods[0], "0");
    assert_int_equal(t->servers[0].super_pod, 0);
    assert_int_equal(t->servers[1].super_pod, 0);
    assert_int_equal(t->ranks[2].super_device_id, 2);
    assert_int_equal(t->ranks[3].host_port, 16667);
    hc_rank_table_free(t);
}

/* One bad table: its result and a word the log line must contain (the field's path). */
typedef struct {
    const char *name;
    const char *json;
    const char *field;
} bad_row_t;

#define S2(devs0, devs1) "'server_list':[{'server_id':'a','device':[" devs0 "]},{'server_id':'b','device':[" devs1 "]}]}"
#define OK2 S2(DEV("0", "10.0.0.1", "0"), DEV("0", "10.0.0.2", "1"))
#define POD3(pods) HEAD("1.2", "3") "'server_list':[{'server_id':'a','device':[" DEV("0", "10.0.0.1", "0") "]}," \
    "{'server_id':'b','device':[" DEV("0", "10.0.0.2", "1") "]},{'server_id':'c','device':[" DEV("0", "10.0.0.3", "2") \
    "]}],'super_pod_list':[" pods "]}"

static const bad_row_t bad_rows[] = {
    {"empty", "", "is empty"},
    {"not json", "status: completed", "not valid JSON: parsing stopped at line 1"},
    {"truncated", HEAD("1.0", "2") "'server_list':[", "not valid JSON"},
    {"trailing garbage", HEAD("1.0", "2") OK2 " x", "not valid JSON"},
    {"array at the top", "[]", "top level must be a JSON object"},
    {"no status", "{'version':'1.0','server_count':'2'," OK2, "status: missing"},
    {"initializing", "{'status':'initializing','version':'1.0','server_count':'2'," OK2, "not \"completed\""},
    {"no version", "{'status':'completed','server_count':'2'," OK2, "version: missing"},
    {"version 2.0", HEAD("2.0", "2") OK2, "version: is \"2.0\""},
    {"group_list template", "{'status':'completed','group_count':'1','group_list':[]}", "group_list template"},
    {"no server_count", "{'status':'completed','version':'1.0'," OK2, "server_count: missing"},
    {"server_count word", HEAD("1.0", "two") OK2, "server_count: \"two\" is not a decimal number"},
    {"server_count number", "{'status':'completed','version':'1.0','server_count':2," OK2, "server_count: must be a string"},
    {"server_count wrong", HEAD("1.0", "3") OK2, "server_count: says 3 but server_list has 2"},
    {"no server_list", "{'status':'completed','version':'1.0','server_count':'1'}", "server_list: missing"},
    {"server_list object", HEAD("1.0", "1") "'server_list':{}}", "server_list: must be an array"},
    {"server_list empty", HEAD("1.0", "1") "'server_list':[]}", "server_list: is empty"},
    {"server not object", HEAD("1.0", "1") "'server_list':['a']}", "server_list[0]: must be an object"},
    {"no server_id", HEAD("1.0", "1") "'server_list':[{'device':[" DEV("0", "10.0.0.1", "0") "]}]}",
     "server_list[0].server_id: missing"},
    {"server_id twice", HEAD("1.0", "2") "'server_list':[{'server_id':'a','device':[" DEV("0", "10.0.0.1", "0") "]},"
     "{'server_id':'a','device':[" DEV("0", "10.0.0.2", "1") "]}]}", "server_list[1]: server_id \"a\" is a duplicate"},
    {"server_id long", HEAD("1.0", "1") "'server_list':[{'server_id':'"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx','device':[" DEV("0", "10.0.0.1", "0") "]}]}",
     "server_id must have 1 to 64 characters"},
    {"no device", HEAD("1.0", "1") "'server_list':[{'server_id':'a'}]}", "server_list[0].device: missing"},
    {"device empty", HEAD("1.0", "2") S2("", DEV("0", "10.0.0.2", "0")), "server_list[0].device: must be a non-empty"},
    {"no device_id", HEAD("1.0", "2") S2("{'rank_id':'0'}", DEV("0", "10.0.0.2", "1")),
     "server_list[0].device[0].device_id: missing"},
    {"device_id negative", HEAD("1.0", "2") S2(DEV("-1", "10.0.0.1", "0"), DEV("0", "10.0.0.2", "1")),
     "device[0].device_id: \"-1\" is not a decimal"},
    {"no rank_id", HEAD("1.0", "2") S2("{'device_id':'0'}", DEV("0", "10.0.0.2", "1")),
     "server_list[0].device[0].rank_id: missing"},
    {"rank_id too big", HEAD("1.0", "2") S2(DEV("0", "10.0.0.1", "0"), DEV("0", "10.0.0.2", "9")),
     "server_list[1].device[0]: rank_id 9 is out of range"},
    {"rank_id twice", HEAD("1.0", "2") S2(DEV("0", "10.0.0.1", "0"), DEV("0", "10.0.0.2", "0")),
     "server_list[1].device[0]: rank_id 0 is a duplicate: server_list[0].device[0] has it too"},
    {"rank_id interleaved", HEAD("1.0", "2") S2(DEV("0", "10.0.0.1", "0") "," DEV("1", "10.0.0.1", "2"),
                                                DEV("0", "10.0.0.2", "1") "," DEV("1", "10.0.0.2", "3")),
     "server_list[0]: rank_ids are interleaved"},
    {"device_id twice", HEAD("1.0", "2") S2(DEV("0", "10.0.0.1", "0") "," DEV("0", "10.0.0.1", "1"),
                                            DEV("0", "10.0.0.2", "2")),
     "server_list[0].device[1]: device_id 0 is a duplicate"},
    {"device_ip bad", HEAD("1.0", "2") S2(DEV("0", "10.0.0.300", "0"), DEV("0", "10.0.0.2", "1")),
     "device[0]: device_ip \"10.0.0.300\" is not a numeric"},
    {"host_ip bad", HEAD("1.0", "1") "'server_list':[{'server_id':'a','host_ip':'node-a','device':["
     DEV("0", "10.0.0.1", "0") "]}]}", "server_list[0]: host_ip \"node-a\""},
    {"host_port range", HEAD("1.0", "1") "'server_list':[{'server_id':'a','device':[{'device_id':'0',"
     "'rank_id':'0','host_port':'70000'}]}]}", "host_port: 70000 is out of range"},
    {"pods empty", POD3(""), "super_pod_list: must be a non-empty array"},
    {"pod unknown server", POD3("{'super_pod_id':'0','server_list':[{'server_id':'a'},{'server_id':'b'},"
                                "{'server_id':'z'}]}"), "super_pod_list[0].server_list[2]: server_id \"z\""},
    {"server in two pods", POD3("{'super_pod_id':'0','server_list':[{'server_id':'a'},{'server_id':'b'}]},"
                                "{'super_pod_id':'1','server_list':[{'server_id':'b'},{'server_id':'c'}]}"),
     "server \"b\" is already in super pod \"0\""},
    {"server in no pod", POD3("{'super_pod_id':'0','server_list':[{'server_id':'a'},{'server_id':'b'}]}"),
     "server_list[2]: server \"c\" is in no super pod"},
    {"pods interleaved", POD3("{'super_pod_id':'0','server_list':[{'server_id':'a'},{'server_id':'c'}]},"
                              "{'super_pod_id':'1','server_list':[{'server_id':'b'}]}"),
     "server_list[2]: super pod \"0\" is interleaved"},
    {"pod id twice", POD3("{'super_pod_id':'0','server_list':[{'server_id':'a'}]},"
                          "{'super_pod_id':'0','server_list':[{'server_id':'b'},{'server_id':'c'}]}"),
     "super_pod_list[1]: super_pod_id \"0\" is a duplicate"},
    {"super_device_id twice", HEAD("1.2", "2") S2("{'device_id':'0','super_device_id':'5','rank_id':'0'}",
                                                  "{'device_id':'0','super_device_id':'5','rank_id':'1'}"),
     "super_device_id 5 is a duplicate in its super pod"},
};

static void test_bad_tables(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_rows) / sizeof(bad_rows[0]); i++) {
        hc_rank_table_t *t = (hc_rank_table_t *)1;
        HcclResult res = parse(bad_rows[i].json, &t);
        const char *msg = hc_log_last_error();
        if (res != HCCL_E_PARA || strstr(msg, bad_rows[i].field) == NULL || strstr(msg, "t.json") == NULL)
            fail_msg("%s: got %d, log \"%s\"; expected HCCL_E_PARA and \"%s\"", bad_rows[i].name, res, msg,
                     bad_rows[i].field);
        assert_ptr_equal(t, (hc_rank_table_t *)1); /* outputs are written only on success */
    }
}

static void test_rendezvous(void **state)
{
    hc_rank_table_t *t = NULL;
    hc_sockaddr_t addr;
    char text[HC_SOCKADDR_STR_BYTES];
    (void)state;

    assert_int_equal(parse(table_10, &t), HCCL_SUCCESS);
    assert_int_equal(hc_rank_table_rendezvous(t, 60000, &addr), HCCL_SUCCESS);
    assert_string_equal(hc_sockaddr_str(&addr, text, sizeof(text)), "192.168.1.8:60000");
    t->ranks[0].device_id = 3;                /* base + device_id */
    t->ranks[0].device_ip[0] = '\0';          /* no device_ip: the server's host_ip */
    assert_int_equal(hc_rank_table_rendezvous(t, 50000, &addr), HCCL_SUCCESS);
    assert_string_equal(hc_sockaddr_str(&addr, text, sizeof(text)), "172.16.0.110:50003");
    t->ranks[0].host_port = 40000;            /* host_port wins over the base */
    assert_int_equal(hc_rank_table_rendezvous(t, 50000, &addr), HCCL_SUCCESS);
    assert_string_equal(hc_sockaddr_str(&addr, text, sizeof(text)), "172.16.0.110:40000");
    t->servers[0].host_ip[0] = '\0';          /* two servers and no address for rank 0 */
    assert_int_equal(hc_rank_table_rendezvous(t, 50000, &addr), HCCL_E_PARA);
    assert_non_null(strstr(hc_log_last_error(), "server_list[0].device[0] has no device_ip"));
    t->nservers = 1;                          /* one server: loopback */
    assert_int_equal(hc_rank_table_rendezvous(t, 50000, &addr), HCCL_SUCCESS);
    assert_string_equal(hc_sockaddr_str(&addr, text, sizeof(text)), "127.0.0.1:40000");
    t->ranks[0].host_port = 0;
    t->ranks[0].device_id = 600;
    assert_int_equal(hc_rank_table_rendezvous(t, 65000, &addr), HCCL_E_PARA);
    assert_non_null(strstr(hc_log_last_error(), "65600 is not a port"));
    hc_rank_table_free(t);
}

static void digest_of(const char *text, const char *secret, uint8_t digest[32])
{
    hc_rank_table_t *t = NULL;

    assert_int_equal(parse(text, &t), HCCL_SUCCESS);
    hc_rank_table_digest(t, secret, digest);
    hc_rank_table_free(t);
}

static void test_digest(void **state)
{
    uint8_t base[32], other[32];
    /* table_10 re-laid: keys reordered, white space, an unknown field, devices in rank order. */
    static const char relaid[] =
        "{ 'server_list' : [ {'device':[" DEV("0", "192.168.1.8", "0") ",\n" DEV("1", "192.168.1.9", "1") "],"
        "'server_id':'node_0', 'host_ip':'172.16.0.110'},\n{'host_ip':'172.16.0.111','server_id':'node_1',"
        "'hardware_type':'x','device':[" DEV("0", "192.168.2.8", "2") "," DEV("1", "192.168.2.9", "3") "]}],"
        "'version':'1.0','server_count':'2','status':'completed'}\n";
    char *changed = strdup(table_10);
    (void)state;

    digest_of(table_10, NULL, base);
    digest_of(relaid, NULL, other);
    assert_memory_equal(base, other, 32);
    digest_of(table_10, "s3cret", other);
    assert_memory_not_equal(base, other, 32);
    memcpy(strstr(changed, "192.168.2.9"), "192.168.2.7", 11);
    digest_of(changed, NULL, other);
    assert_memory_not_equal(base, other, 32);
    free(changed);
}

/* ---- the rendezvous at a fixed address ------------------------------------------------------------- */

typedef struct {
    const HcclRootInfo *info;
    uint32_t rank;
    hc_boot_t *boot;
    HcclResult res;
} joiner_t;

static void *join_one(void *arg)
{
    joiner_t *j = arg;
    hc_peer_t self, *peers = NULL;

    j->res = hc_boot_self(0, &self);
    if (j->res == HCCL_SUCCESS)
        j->res = hc_boot_join(j->info, 2, j->rank, &self, &j->boot, &peers);
    free(peers);
    return NULL;
}

static void *leave_one(void *arg)
{
    hc_boot_close(((joiner_t *)arg)->boot);
    return NULL;
}

/* Once every rank has joined, the rendezvous stops listening: the next communicator of the same
 * table can bind the same address while this one still relays (and its ranks are refused, so they
 * retry, instead of queueing in a listener nobody accepts on). */
static void test_rendezvous_frees_port(void **state)
{
    uint8_t token[32] = {1, 2, 3};
    hc_sockaddr_t any, addr;
    HcclRootInfo info;
    joiner_t j[2];
    pthread_t threads[2];
    int fd = -1;
    (void)state;

    assert_int_equal(hc_sockaddr_parse("127.0.0.1:0", &any), HCCL_SUCCESS);
    assert_int_equal(hc_sock_listen(&any, 1, &fd, &addr), HCCL_SUCCESS); /* a free port */
    hc_sock_close(&fd);
    assert_int_equal(hc_boot_root_at(&addr, token, 1, "test", &info), HCCL_SUCCESS);
    for (uint32_t r = 0; r < 2; r++) {
        j[r] = (joiner_t){.info = &info, .rank = r};
        assert_int_equal(pthread_create(&threads[r], NULL, join_one, &j[r]), 0);
    }
    for (int r = 0; r < 2; r++) {
        pthread_join(threads[r], NULL);
        assert_int_equal(j[r].res, HCCL_SUCCESS);
    }
    assert_int_equal(hc_sock_listen(&addr, 1, &fd, &any), HCCL_SUCCESS);
    hc_sock_close(&fd);
    /* Each rank leaves from its own thread, as ranks do: closing waits for the server, which ends
     * only when both have left. */
    for (int r = 0; r < 2; r++)
        assert_int_equal(pthread_create(&threads[r], NULL, leave_one, &j[r]), 0);
    for (int r = 0; r < 2; r++)
        pthread_join(threads[r], NULL);
}

/* ---- through the API ----------------------------------------------------------------------------- */

static char g_dir[64];

static const char *write_table(const char *name, const char *text)
{
    static char path[128];
    char *json = unquote(text);
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", g_dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    free(json);
    return path;
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof(g_dir), "/tmp/hc_rank_table.XXXXXX");
    if (mkdtemp(g_dir) == NULL)
        return -1;
    return aclInit(NULL) == ACL_SUCCESS && aclrtSetDevice(0) == ACL_SUCCESS ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
    aclFinalize();
    return system(cmd) == 0 ? 0 : -1;
}

static void test_api_errors(void **state)
{
    HcclComm comm = NULL;
    HcclCommConfig config;
    (void)state;

    assert_int_equal(HcclCommInitClusterInfo(NULL, 0, &comm), HCCL_E_PTR);
    assert_int_equal(HcclCommInitClusterInfo(write_table("ok.json", table_10), 0, NULL), HCCL_E_PTR);
    assert_int_equal(HcclCommInitClusterInfoConfig(write_table("ok.json", table_10), 0, NULL, &comm), HCCL_E_PTR);
    assert_int_equal(HcclCommInitClusterInfo("/nonexistent/rank_table.json", 0, &comm), HCCL_E_OPEN_FILE_FAILURE);
    assert_non_null(strstr(hc_log_last_error(), "/nonexistent/rank_table.json"));
    assert_int_equal(HcclCommInitClusterInfo(g_dir, 0, &comm), HCCL_E_OPEN_FILE_FAILURE); /* a directory */
    assert_int_equal(HcclCommInitClusterInfo(write_table("bad.json", "{'status':'completed'"), 0, &comm),
                     HCCL_E_PARA);
    assert_int_equal(HcclCommInitClusterInfo(write_table("ok.json", table_10), 4, &comm), HCCL_E_PARA);
    assert_non_null(strstr(hc_log_last_error(), "rank 4 is not in rank table"));
    HcclCommConfigInit(&config);
    assert_int_equal(HcclCommInitClusterInfoConfig(write_table("ok.json", table_10), 7, &config, &comm), HCCL_E_PARA);
    assert_null(comm);
}

/* A one-rank table on loopback: a communicator that reduces, twice from the same table (the second
 * rendezvous binds the same port once the first has finished). The port is one the kernel found
 * free (a port made from the pid could be another test's connection). */
static void test_api_one_rank(void **state)
{
    char text[512];
    hc_sockaddr_t any, addr;
    int fd = -1;
    (void)state;

    assert_int_equal(hc_sockaddr_parse("127.0.0.1:0", &any), HCCL_SUCCESS);
    assert_int_equal(hc_sock_listen(&any, 1, &fd, &addr), HCCL_SUCCESS);
    hc_sock_close(&fd);
    snprintf(text, sizeof(text), HEAD("1.0", "1") "'server_list':[{'server_id':'me','device':[{'device_id':'0',"
             "'device_ip':'127.0.0.1','host_port':'%d','rank_id':'0'}]}]}",
             ntohs(((const struct sockaddr_in *)(const void *)&addr.ss)->sin_port));
    for (int round = 0; round < 2; round++) {
        HcclComm comm = NULL;
        HcclCommConfig config;
        char name[COMM_NAME_MAX_LENGTH];
        uint32_t size = 0;
        float x[3] = {1.5f, -2.0f, 3.25f};
        aclrtStream stream;
        HcclCommConfigInit(&config);
        snprintf(config.hcclCommName, sizeof(config.hcclCommName), "table_round_%d", round);
        assert_int_equal(HcclCommInitClusterInfoConfig(write_table("one.json", text), 0, &config, &comm),
                         HCCL_SUCCESS);
        assert_int_equal(HcclGetRankSize(comm, &size), HCCL_SUCCESS);
        assert_int_equal(size, 1);
        assert_int_equal(HcclGetCommName(comm, name), HCCL_SUCCESS);
        assert_string_equal(name, config.hcclCommName);
        assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
        assert_int_equal(HcclAllReduce(x, x, 3, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream), HCCL_SUCCESS);
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        assert_true(x[0] == 1.5f && x[1] == -2.0f && x[2] == 3.25f);
        assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
        assert_int_equal(HcclCommDestroy(comm), HCCL_SUCCESS);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors), cmocka_unit_test(test_parse_10),  cmocka_unit_test(test_parse_12),
        cmocka_unit_test(test_bad_tables),     cmocka_unit_test(test_rendezvous), cmocka_unit_test(test_digest),
        cmocka_unit_test(test_rendezvous_frees_port), cmocka_unit_test(test_api_errors),
        cmocka_unit_test(test_api_one_rank),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
