/*
 * Control messages of the TCP transport, on each pair's control socket so that they never wait
 * behind data: a failed rank's abort notice, a sub-communicator's root info (the mailbox), and the
 * goodbye of a rank that destroys its communicator. Any thread may queue one (ctl_lock); the
 * thread that holds the progress lock moves them onto the sockets.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "hc_check.h"
#include "hc_time.h"
#include "net_internal.h"

/* How long a rank keeps trying to deliver an abort notice or a goodbye before it gives up. */
#define FLUSH_BOUND_NS (500 * HC_NS_PER_MS)
/* Slices in which a mailbox reader drives progress or waits for the thread that does. */
#define MAIL_SLICE_MS 10

static char *copy_text(const uint8_t *payload, uint32_t len)
{
    char *text = malloc((size_t)len + 1);

    if (text != NULL) {
        memcpy(text, payload, len);
        text[len] = '\0';
    }
    return text;
}

void hc_net_ctl_received(hc_net_t *net, uint32_t peer, const hc_net_frame_t *hdr, const uint8_t *payload)
{
    net_peer_t *p = &net->peers[peer];

    if (hdr->type == HC_NET_FRAME_ABORT) {
        if (p->state != PEER_FAILED) {
            free(p->fail_text);
            p->fail_text = copy_text(payload, hdr->len);
            p->fail_status = hdr->status;
            p->fail = (hc_net_blame_t){.kind = hdr->kind, .partner = hdr->step, .seq = hdr->seq};
            p->state = PEER_FAILED;
            net->nfailed++;
        }
    } else if (hdr->type == HC_NET_FRAME_MAILBOX) {
        net_mail_t *m = calloc(1, sizeof(*m));
        if (m == NULL) {
            HC_ERROR("out of memory keeping a sub-communicator root info from rank %u", peer);
            return;
        }
        m->from = peer;
        m->tag = hdr->seq;
        memcpy(&m->info, payload, sizeof(m->info));
        pthread_mutex_lock(&net->ctl_lock);
        m->next = net->mail;
        net->mail = m;
        pthread_cond_broadcast(&net->ctl_cv);
        pthread_mutex_unlock(&net->ctl_lock);
    } else if (hdr->type == HC_NET_FRAME_BYE && p->state == PEER_OK) {
        p->state = PEER_BYE;
    }
}

void hc_net_ctl_drain(hc_net_t *net)
{
    net_send_t *queue;

    pthread_mutex_lock(&net->ctl_lock);
    queue = net->ctl_queue;
    net->ctl_queue = NULL;
    pthread_mutex_unlock(&net->ctl_lock);
    while (queue != NULL) {
        net_send_t *s = queue;
        queue = s->next;
        if (net->peers[s->peer].socks != NULL && hc_net_ctl_sock(net, s->peer)->fd >= 0)
            hc_net_sock_enqueue(hc_net_ctl_sock(net, s->peer), s);
        else
            hc_net_send_free(net, s);
    }
}

/* A control frame for peer, payload copied. NULL when out of memory (logged). Needs no lock: the
 * frame is not on any list yet. */
static net_send_t *ctl_frame(hc_net_t *net, uint32_t peer, uint16_t type, const hc_op_t *op, uint64_t seq,
                             const void *payload, uint32_t len)
{
    net_send_t *s = calloc(1, sizeof(*s));

    if (s == NULL || (len > 0 && (s->owned = malloc(len)) == NULL)) {
        free(s);
        HC_ERROR("out of memory queueing a control message for rank %u", peer);
        return NULL;
    }
    if (len > 0)
        memcpy(s->owned, payload, len);
    s->payload = s->owned;
    s->peer = peer;
    s->hdr = (hc_net_frame_t){.magic = HC_NET_MAGIC, .type = type, .src = hc_group_my_rank(&net->world),
                              .comm_id = net->comm_id, .seq = seq, .len = len};
    if (op != NULL) {
        s->hdr.sig = op->sig;
        s->hdr.sig_hash = op->sig_hash;
    }
    return s;
}

static void ctl_queue_push(hc_net_t *net, net_send_t *s)
{
    uint64_t one = 1;

    pthread_mutex_lock(&net->ctl_lock);
    s->next = net->ctl_queue;
    net->ctl_queue = s;
    pthread_mutex_unlock(&net->ctl_lock);
    (void)!write(net->wake_fd, &one, sizeof(one)); /* the progressing thread, if any, sends it */
}

static int ctl_pending(hc_net_t *net)
{
    for (uint32_t r = 0; r < net->world.comm_size; r++)
        if (net->peers[r].socks != NULL && hc_net_ctl_sock(net, r)->head != NULL &&
            hc_net_ctl_sock(net, r)->fd >= 0)
            return 1;
    return net->ctl_queue != NULL;
}

/* Move queued control frames out, for a bounded time. Under progress_lock. */
static void ctl_flush(hc_net_t *net)
{
    int64_t deadline = hc_now_ns() + FLUSH_BOUND_NS;

    do {
        hc_net_ctl_drain(net);
        (void)hc_net_progress(net, 5); /* a broken data stream does not stop the control messages */
    } while (ctl_pending(net) && !hc_deadline_passed(deadline));
}

/* Send the queue now if no other thread is progressing (it sends it otherwise). */
static void ctl_kick(hc_net_t *net)
{
    if (pthread_mutex_trylock(&net->progress_lock) != 0)
        return;
    ctl_flush(net);
    pthread_mutex_unlock(&net->progress_lock);
}

void hc_net_fail(hc_net_t *net, const hc_op_t *op, HcclResult res, const char *why)
{
    uint32_t len = (uint32_t)strnlen(why, HC_NET_MAX_TEXT);
    hc_net_blame_t blame = net->blame;

    if (blame.kind == 0) /* nothing more precise than the op itself */
        blame = (hc_net_blame_t){.kind = HC_NET_COLL, .partner = UINT32_MAX, .seq = op != NULL ? op->coll_seq : 0};
    for (uint32_t r = 0; r < net->world.comm_size; r++) {
        net_send_t *s;
        if (net->peers[r].socks == NULL || hc_net_ctl_sock(net, r)->fd < 0)
            continue;
        s = ctl_frame(net, r, HC_NET_FRAME_ABORT, op, blame.seq, why, len);
        if (s == NULL)
            break;
        s->hdr.status = (int32_t)res;
        s->hdr.kind = (uint16_t)blame.kind;
        s->hdr.step = blame.partner;
        ctl_queue_push(net, s);
    }
    pthread_mutex_lock(&net->progress_lock);
    ctl_flush(net);
    pthread_mutex_unlock(&net->progress_lock);
}

HcclResult hc_net_mailbox_post(hc_net_t *net, uint64_t tag, const HcclRootInfo *info, const uint32_t *members,
                               uint32_t nmembers)
{
    for (uint32_t i = 0; i < nmembers; i++) {
        net_send_t *s;
        if (members[i] >= net->world.comm_size || net->peers[members[i]].socks == NULL)
            continue; /* this rank, or a member the engine reaches another way */
        s = ctl_frame(net, members[i], HC_NET_FRAME_MAILBOX, NULL, tag, info, sizeof(*info));
        if (s == NULL)
            return HCCL_E_MEMORY;
        ctl_queue_push(net, s);
    }
    ctl_kick(net);
    return HCCL_SUCCESS;
}

/* Take the entry for (leader, tag) if it arrived. Under ctl_lock. */
static int take_mail(hc_net_t *net, uint32_t leader, uint64_t tag, HcclRootInfo *info_p)
{
    for (net_mail_t **link = &net->mail; *link != NULL; link = &(*link)->next) {
        net_mail_t *m = *link;
        if (m->from == leader && m->tag == tag) {
            *info_p = m->info;
            *link = m->next;
            free(m);
            return 1;
        }
    }
    return 0;
}

/* One slice of waiting for mail: drive progress if nobody does, else wait for the one who does. */
static void mail_slice(hc_net_t *net)
{
    if (pthread_mutex_trylock(&net->progress_lock) == 0) {
        hc_net_ctl_drain(net);
        (void)hc_net_progress(net, MAIL_SLICE_MS);
        pthread_mutex_unlock(&net->progress_lock);
        return;
    }
    pthread_mutex_lock(&net->ctl_lock);
    if (net->mail == NULL) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += MAIL_SLICE_MS * HC_NS_PER_MS;
        if (ts.tv_nsec >= HC_NS_PER_S) {
            ts.tv_sec++;
            ts.tv_nsec -= HC_NS_PER_S;
        }
        pthread_cond_timedwait(&net->ctl_cv, &net->ctl_lock, &ts);
    }
    pthread_mutex_unlock(&net->ctl_lock);
}

HcclResult hc_net_mailbox_fetch(hc_net_t *net, uint32_t leader, uint64_t tag, int64_t deadline_ns,
                                HcclRootInfo *info_p)
{
    for (;;) {
        int found;
        pthread_mutex_lock(&net->ctl_lock);
        found = take_mail(net, leader, tag, info_p);
        pthread_mutex_unlock(&net->ctl_lock);
        if (found)
            return HCCL_SUCCESS;
        if (net->peers[leader].state != PEER_OK || hc_net_peer_gone(net, leader)) {
            HC_ERROR("sub-communicator: leader rank %u (%s) left before posting the root info", leader,
                     net->world.peers[leader].hostname);
            return HCCL_E_REMOTE;
        }
        if (hc_deadline_passed(deadline_ns)) {
            HC_ERROR("sub-communicator: leader rank %u (%s) did not call HcclCreateSubCommConfig within "
                     "HCCL_CONNECT_TIMEOUT",
                     leader, net->world.peers[leader].hostname);
            return HCCL_E_TIMEOUT;
        }
        mail_slice(net);
    }
}

/* Say goodbye on every control socket, so that peers tell an orderly exit from a crash. */
void hc_net_say_bye(hc_net_t *net)
{
    for (uint32_t r = 0; r < net->world.comm_size; r++) {
        net_send_t *s;
        if (net->peers[r].socks == NULL || hc_net_ctl_sock(net, r)->fd < 0)
            continue;
        s = ctl_frame(net, r, HC_NET_FRAME_BYE, NULL, 0, NULL, 0);
        if (s == NULL)
            break;
        ctl_queue_push(net, s);
    }
    pthread_mutex_lock(&net->progress_lock);
    ctl_flush(net);
    pthread_mutex_unlock(&net->progress_lock);
}

HcclResult hc_net_ctl_init(hc_net_t *net)
{
    pthread_condattr_t attr;

    net->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (net->wake_fd < 0) {
        HC_ERROR("eventfd failed: %s", strerror(errno));
        return hc_result_from_errno(errno);
    }
    pthread_mutex_init(&net->ctl_lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&net->ctl_cv, &attr);
    pthread_condattr_destroy(&attr);
    return HCCL_SUCCESS;
}

void hc_net_ctl_fini(hc_net_t *net)
{
    while (net->mail != NULL) {
        net_mail_t *m = net->mail;
        net->mail = m->next;
        free(m);
    }
    while (net->ctl_queue != NULL) {
        net_send_t *s = net->ctl_queue;
        net->ctl_queue = s->next;
        free(s->owned);
        free(s);
    }
    if (net->wake_fd >= 0)
        close(net->wake_fd);
    pthread_cond_destroy(&net->ctl_cv);
    pthread_mutex_destroy(&net->ctl_lock);
}

/* Some lower rank failed (its notice came), or none can any more (all gone or failed). */
static int lower_decided(hc_net_t *net, int *lower_failed_p)
{
    int undecided = 0;

    *lower_failed_p = 0;
    for (uint32_t r = 0; r < hc_group_my_rank(&net->world); r++) {
        if (net->peers[r].socks == NULL)
            continue;
        if (net->peers[r].state == PEER_FAILED)
            *lower_failed_p = 1;
        else if (!hc_net_peer_gone(net, r))
            undecided = 1;
    }
    return *lower_failed_p || !undecided;
}

int hc_net_report_turn(hc_net_t *net, int64_t settle_ns)
{
    int64_t deadline = hc_now_ns() + settle_ns;
    int lower_failed = 0;

    pthread_mutex_lock(&net->progress_lock);
    while (!lower_decided(net, &lower_failed) && !hc_deadline_passed(deadline))
        (void)hc_net_progress(net, 5);
    pthread_mutex_unlock(&net->progress_lock);
    return !lower_failed;
}
