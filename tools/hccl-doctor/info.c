/*
 * What a rank can learn about itself and its host: identity, CPUs, shared memory, ptrace scope,
 * huge pages, the libhccl file it runs, the network interface the library listens on (its address
 * comes from the peers' HcclHostGetLinkInfo) and the variables that choose it. Every field is read
 * from /proc, /sys, the environment or a system call; nothing is assumed.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <link.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "doctor.h"

/* The value the peers read from this process with process_vm_readv: proof that CMA works. */
static volatile uint64_t cma_canary;

static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    int ok;

    if (f == NULL)
        return -1;
    ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* Ranks share memory when they share a kernel (boot id), a network namespace (the host identity
 * the library uses) and a pid namespace (the segment is opened through /proc/PID/fd). */
static void host_identity(char *buf, size_t len)
{
    char boot[64] = "?";
    struct stat net = {0}, pid = {0};

    (void)read_line("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
    (void)stat("/proc/self/ns/net", &net);
    (void)stat("/proc/self/ns/pid", &pid);
    snprintf(buf, len, "%.13s/n%lx/p%lx", boot, (unsigned long)net.st_ino, (unsigned long)pid.st_ino);
}

static void cpus(doc_info_t *me)
{
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);

    me->cpus_online = online > 0 ? (uint32_t)online : 1;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return;
    for (uint32_t c = 0; c < DOC_MAX_CPUS && c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            me->cpu_mask[c / 8] |= (uint8_t)(1u << (c % 8));
            me->cpus_allowed++;
        }
}

/* The libhccl.so.N this process runs, and what identifies its build. */
typedef struct {
    uintptr_t addr;
    char *out;
    size_t len;
} build_search_t;

static int find_build_id(struct dl_phdr_info *info, size_t size, void *arg)
{
    build_search_t *s = arg;
    int mine = 0;

    (void)size;
    for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        mine = ph->p_type == PT_LOAD && s->addr >= lo && s->addr < lo + ph->p_memsz;
    }
    if (!mine)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        if (ph->p_type != PT_NOTE)
            continue;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
            const uint8_t *desc = p + sizeof(*nh) + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && desc + nh->n_descsz <= end) {
                for (uint32_t k = 0; k < nh->n_descsz && 2 * k + 2 < s->len; k++)
                    snprintf(s->out + 2 * k, 3, "%02x", desc[k]);
                return 1;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 1;
}

static void library(doc_info_t *me)
{
    Dl_info dl;
    build_search_t s = {.addr = (uintptr_t)(void *)HcclAllReduce, .out = me->lib_build, .len = sizeof(me->lib_build)};
    char real[PATH_MAX];
    struct stat st;

    (void)HcclHostGetVersion(&me->version);
    snprintf(me->lib_path, sizeof(me->lib_path), "?");
    if (dladdr((void *)HcclAllReduce, &dl) != 0 && dl.dli_fname != NULL) {
        const char *path = realpath(dl.dli_fname, real) != NULL ? real : dl.dli_fname;
        size_t len = strlen(path);
        /* Keep the end of a long path: the file name says the most. */
        memcpy(me->lib_path, path + (len >= sizeof(me->lib_path) ? len - sizeof(me->lib_path) + 1 : 0),
               len >= sizeof(me->lib_path) ? sizeof(me->lib_path) - 1 : len + 1);
    }
    dl_iterate_phdr(find_build_id, &s);
    if (me->lib_build[0] == '\0' && stat(me->lib_path, &st) == 0)
        snprintf(me->lib_build, sizeof(me->lib_build), "size %lld mtime %lld", (long long)st.st_size,
                 (long long)st.st_mtime);
}

static void memory(doc_info_t *me)
{
    struct statvfs vfs;
    char line[128];
    FILE *f;
    int fd;

    if (statvfs("/dev/shm", &vfs) == 0) {
        me->shm_size = (uint64_t)vfs.f_blocks * vfs.f_frsize;
        me->shm_free = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    }
    /* hostccl's segments and arena are memfd files: try one the way the library makes them. */
    fd = memfd_create("hccl-doctor", MFD_CLOEXEC);
    if (fd >= 0) {
        void *p = ftruncate(fd, 1 << 20) == 0 ? mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                                              : MAP_FAILED;
        if (p != MAP_FAILED) {
            memset(p, 1, 1 << 20);
            munmap(p, 1 << 20);
            me->memfd_ok = 1;
        }
        close(fd);
    }
    snprintf(me->thp, sizeof(me->thp), "?");
    if (read_line("/sys/kernel/mm/transparent_hugepage/enabled", line, sizeof(line)) == 0) {
        char *l = strchr(line, '['), *r = l != NULL ? strchr(l, ']') : NULL;
        if (l != NULL && r != NULL)
            snprintf(me->thp, sizeof(me->thp), "%.*s", (int)(r - l - 1), l + 1);
    }
    f = fopen("/proc/meminfo", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        unsigned long long v;
        if (sscanf(line, "HugePages_Total: %llu", &v) == 1)
            me->hugepages_total = v;
        else if (sscanf(line, "HugePages_Free: %llu", &v) == 1)
            me->hugepages_free = v;
        else if (sscanf(line, "Hugepagesize: %llu", &v) == 1)
            me->hugepage_kb = v;
    }
    if (f != NULL)
        fclose(f);
}

/* Does name match an entry of a HCCL_SOCKET_IFNAME list ("eth,ib", "=eth0", "^docker,lo", "^=lo")? */
static int ifname_selected(const char *list, const char *name)
{
    char buf[256], *tok, *save = NULL;
    int exclude = list[0] == '^', exact, any = 0;

    list += exclude;
    exact = list[0] == '=';
    snprintf(buf, sizeof(buf), "%s", list + exact);
    for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save))
        any |= exact ? strcmp(name, tok) == 0 : strncmp(name, tok, strlen(tok)) == 0;
    return exclude ? !any : any;
}

static void ifa_host(const struct ifaddrs *it, char *buf, size_t len)
{
    buf[0] = '\0';
    if (it->ifa_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)it->ifa_addr)->sin_addr, buf, (socklen_t)len);
    else if (it->ifa_addr->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)it->ifa_addr)->sin6_addr, buf,
                  (socklen_t)len);
}

/* The interface hostccl's bootstrap would pick when no peer told us (docs/env.md): HCCL_IF_IP,
 * then HCCL_SOCKET_IFNAME, then the first up non-loopback IPv4 interface, then loopback. */
static struct ifaddrs *own_pick(struct ifaddrs *all)
{
    const char *ip = getenv("HCCL_IF_IP"), *names = getenv("HCCL_SOCKET_IFNAME");
    struct ifaddrs *it, *lo = NULL;

    for (it = all; it != NULL; it = it->ifa_next) {
        char addr[DOC_ADDR_LEN];
        if (it->ifa_addr == NULL || it->ifa_addr->sa_family != AF_INET || !(it->ifa_flags & IFF_UP))
            continue;
        ifa_host(it, addr, sizeof(addr));
        if (it->ifa_flags & IFF_LOOPBACK)
            lo = lo != NULL ? lo : it;
        if (ip != NULL && ip[0] != '\0') {
            if (strcmp(addr, ip) == 0)
                return it;
        } else if (names != NULL && names[0] != '\0') {
            if (ifname_selected(names, it->ifa_name))
                return it;
        } else if (!(it->ifa_flags & IFF_LOOPBACK)) {
            return it;
        }
    }
    return lo;
}

/* The interface that holds address `host`, or NULL. */
static struct ifaddrs *holding(struct ifaddrs *all, const char *host)
{
    for (struct ifaddrs *it = all; it != NULL; it = it->ifa_next) {
        char addr[DOC_ADDR_LEN];
        if (it->ifa_addr == NULL)
            continue;
        ifa_host(it, addr, sizeof(addr));
        if (strcmp(addr, host) == 0)
            return it;
    }
    return NULL;
}

static void link_facts(doc_info_t *me, const char *ifname)
{
    char path[96], line[32];
    struct ifreq req;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);

    memset(&req, 0, sizeof(req));
    snprintf(req.ifr_name, sizeof(req.ifr_name), "%s", ifname);
    if (fd >= 0 && ioctl(fd, SIOCGIFMTU, &req) == 0)
        me->mtu = (uint32_t)req.ifr_mtu;
    if (fd >= 0)
        close(fd);
    /* Virtual links (veth, loopback) have no speed: reading fails or gives -1. */
    snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
    me->if_speed_mbps = read_line(path, line, sizeof(line)) == 0 ? atoi(line) : -1;
}

/* The interface of the address the library listens on (lib_addr, from the peers' links), or else
 * the one its bootstrap would pick; and the variables that choose it. */
static void interface(doc_info_t *me, const char *lib_addr)
{
    const char *vars[] = {"HCCL_IF_IP", "HCCL_SOCKET_IFNAME", "HCCL_IF_BASE_PORT"};
    char *dst[] = {me->env_if_ip, me->env_ifname, me->env_base_port};
    size_t len[] = {sizeof(me->env_if_ip), sizeof(me->env_ifname), sizeof(me->env_base_port)};
    struct ifaddrs *all, *pick = NULL;
    char host[DOC_ADDR_LEN];

    for (int i = 0; i < 3; i++)
        snprintf(dst[i], len[i], "%s", getenv(vars[i]) != NULL ? getenv(vars[i]) : "");
    if (getifaddrs(&all) != 0)
        return;
    if (lib_addr != NULL) {
        doc_addr_host(lib_addr, host, sizeof(host));
        pick = holding(all, host);
        me->if_from_library = 1;
        snprintf(me->ifaddr, sizeof(me->ifaddr), "%s", host);
        snprintf(me->ifname, sizeof(me->ifname), "?");
    } else {
        pick = own_pick(all);
    }
    if (pick != NULL) {
        snprintf(me->ifname, sizeof(me->ifname), "%s", pick->ifa_name);
        ifa_host(pick, me->ifaddr, sizeof(me->ifaddr));
        link_facts(me, pick->ifa_name);
    }
    freeifaddrs(all);
}

void doc_info_collect(doctor_t *doc, doc_info_t *me, const char *lib_addr)
{
    char scope[16];
    uint64_t canary = 0;

    memset(me, 0, sizeof(*me));
    me->rank = doc->rank;
    me->pid = (int32_t)getpid();
    me->uid = (uint32_t)getuid();
    gethostname(me->hostname, sizeof(me->hostname) - 1);
    host_identity(me->host_id, sizeof(me->host_id));
    while (getrandom(&canary, sizeof(canary), 0) != (ssize_t)sizeof(canary) && errno == EINTR)
        continue;
    cma_canary = canary | 1; /* never 0, so an unread value cannot pass */
    me->canary = cma_canary;
    me->canary_addr = (uint64_t)(uintptr_t)&cma_canary;
    cpus(me);
    if (getloadavg(&me->loadavg1, 1) != 1)
        me->loadavg1 = -1;
    me->ptrace_scope = read_line("/proc/sys/kernel/yama/ptrace_scope", scope, sizeof(scope)) == 0 ? atoi(scope) : -1;
    memory(me);
    library(me);
    interface(me, lib_addr);
}

/* Can this process read the peer's memory with process_vm_readv (the library's single-copy path
 * for plain memory)? The same test the library makes when it creates a communicator. */
int doc_cma_probe(const doc_info_t *peer)
{
    uint64_t seen = 0;
    struct iovec local = {.iov_base = &seen, .iov_len = sizeof(seen)};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)peer->canary_addr, .iov_len = sizeof(seen)};

    if (peer->pid == (int32_t)getpid())
        return 1;
    return process_vm_readv(peer->pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof(seen) && seen == peer->canary;
}

uint32_t doc_info_cpu_count(const doc_info_t *info)
{
    return info->cpus_allowed;
}

/* Two ranks cannot run at the same time when the CPUs they may use together number fewer than two. */
int doc_info_share_cpus(const doc_info_t *a, const doc_info_t *b)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < DOC_MAX_CPUS / 8; i++)
        n += (uint32_t)__builtin_popcount((unsigned)(a->cpu_mask[i] | b->cpu_mask[i]));
    return n < 2;
}

/* "0-3,8" */
void doc_info_cpu_list(const doc_info_t *info, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (uint32_t c = 0; c < DOC_MAX_CPUS && used + 1 < len;) {
        uint32_t end = c;
        if (!(info->cpu_mask[c / 8] & (1u << (c % 8)))) {
            c++;
            continue;
        }
        while (end + 1 < DOC_MAX_CPUS && (info->cpu_mask[(end + 1) / 8] & (1u << ((end + 1) % 8))))
            end++;
        if (end > c)
            used += (size_t)snprintf(buf + used, len - used, "%s%u-%u", used ? "," : "", c, end);
        else
            used += (size_t)snprintf(buf + used, len - used, "%s%u", used ? "," : "", c);
        c = end + 1;
    }
}
