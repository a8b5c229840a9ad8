#!/usr/bin/env python3
"""Write the seed corpus of the fuzz targets (tests/fuzz/corpus/NAME/*.bin).

The seeds are committed; run this again only when a wire format changes. The layouts are those of
src/boot/boot_proto.h (little-endian structs) and src/boot/store_proto.h (big-endian), written out
here by hand: a seed that no longer matches still fuzzes, it only starts further from valid input.

usage: tests/fuzz/make_corpus.py [CORPUS_DIR]
"""
import os
import struct
import sys

ROOT_INFO_BYTES = 4108
ROOT_MAGIC, BOOT_MAGIC, BOOT_VERSION = 0x49524348, 0x42524348, 1
HELLO, TABLE, ERROR, GATHER, GATHERED, DONE = 1, 2, 3, 4, 5, 6
STORE_MAGIC, STORE_VERSION, SET, GET = 0x48435354, 1, 1, 2
STORE_TOKEN = b"hostccl-fuzz-tok"  # the token fuzz_store.c gives its server
TOKEN = bytes(range(0x10, 0x20))
AF_INET, AF_INET6 = 2, 10


def root_info(magic=ROOT_MAGIC, version=BOOT_VERSION, family=AF_INET, port=29500,
              addr=bytes([127, 0, 0, 1]), host=b"node-1", length=112):
    # The target zero-pads its input to ROOT_INFO_BYTES, so seeds stop after hc_root_wire_t (112 bytes).
    # hc_root_wire_t: magic, version, token[16], family, port, addr[16], root_pid, root_host[64]
    wire = struct.pack("<II16sHH16si64s", magic, version, TOKEN, family, port, addr.ljust(16, b"\0"),
                       4242, host[:64].ljust(64, b"\0") if len(host) < 64 else host[:64])
    return wire.ljust(length, b"\0")[:length]


def peer(host=b"node-1"):
    # hc_peer_t: host_id[32], hostname[64], pid, device
    return struct.pack("<32s64sii", bytes(range(32)), host[:64].ljust(64, b"\0") if len(host) < 64 else host[:64],
                       4243, 1)


def boot_msg(mtype, payload, magic=BOOT_MAGIC, version=BOOT_VERSION, status=0, length=None):
    # hc_boot_hdr_t: magic, version u16, type u16, status, len
    return struct.pack("<IHHII", magic, version, mtype, status, len(payload) if length is None else length) + payload


def hello(nranks=4, rank=1, host=b"node-1"):
    return struct.pack("<16sII", TOKEN, nranks, rank) + peer(host)


def store_req(rtype, key, value=b"", wait_ms=0, magic=STORE_MAGIC, version=STORE_VERSION, token=STORE_TOKEN,
              key_len=None, value_len=None):
    head = struct.pack(">IHH16sIII", magic, version, rtype, token, len(key) if key_len is None else key_len,
                       len(value) if value_len is None else value_len, wait_ms)
    return head + key + value


def rank_table(version="1.0", servers=2, per_server=2, pods=False, drop=None, extra=""):
    # A CANN rank table (src/boot/hc_rank_table.h) as text; drop removes one key everywhere.
    lines = []
    for s in range(servers):
        devices = []
        for d in range(per_server):
            r = s * per_server + d
            fields = [("device_id", d), ("device_ip", "10.0.%d.%d" % (s, d + 1)), ("rank_id", r)]
            if version == "1.2":
                fields.append(("super_device_id", r))
            if d == 0:
                fields.append(("host_port", 16666))
            devices.append("{" + ", ".join('"%s": "%s"' % kv for kv in fields if kv[0] != drop) + "}")
        lines.append('{"server_id": "node_%d", "host_ip": "172.16.0.%d", "device": [%s]}'
                     % (s, s + 1, ", ".join(devices)))
    text = ('{"status": "completed", "version": "%s", "server_count": "%d", "server_list": [%s]'
            % (version, servers, ",\n  ".join(lines)))
    if pods:
        text += (', "super_pod_list": [{"super_pod_id": "0", "server_list": [%s]}]'
                 % ", ".join('{"server_id": "node_%d"}' % s for s in range(servers)))
    return (text + extra + "}\n").encode()


NET_TOKEN = b"hostccl-fuzz-net"  # the token fuzz_net_stream.c gives its transport
NET_MAGIC, NET_SIG_HASH = 0x544E4348, 0x1122334455667788
DATA, ABORT, MAILBOX, BYE = 1, 2, 3, 4
COLL, P2P = 1, 2
ALLREDUCE, SEND, FP32 = 0, 12, 4
M64 = (1 << 64) - 1


def siphash24(key, data):
    # SipHash-2-4 (src/net/net_wire.c): the comm id on the wire is a keyed hash of a fixed string.
    def rotl(x, b):
        return ((x << b) | (x >> (64 - b))) & M64
    k0, k1 = struct.unpack("<QQ", key)
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rnd():
        v[0] = (v[0] + v[1]) & M64; v[1] = rotl(v[1], 13) ^ v[0]; v[0] = rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & M64; v[3] = rotl(v[3], 16) ^ v[2]
        v[0] = (v[0] + v[3]) & M64; v[3] = rotl(v[3], 21) ^ v[0]
        v[2] = (v[2] + v[1]) & M64; v[1] = rotl(v[1], 17) ^ v[2]; v[2] = rotl(v[2], 32)
    words = len(data) // 8
    for i in range(words):
        m = struct.unpack_from("<Q", data, 8 * i)[0]
        v[3] ^= m; rnd(); rnd(); v[0] ^= m
    last = (len(data) & 0xFF) << 56
    for i, b in enumerate(data[8 * words:]):
        last |= b << (8 * i)
    v[3] ^= last; rnd(); rnd(); v[0] ^= last
    v[2] ^= 0xFF
    for _ in range(4):
        rnd()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


NET_COMM_ID = siphash24(NET_TOKEN, b"hostccl communicator id")


def net_frame(ftype=DATA, kind=COLL, step=0, seq=1, offset=0, total=8192, length=None, status=0,
              sig_hash=NET_SIG_HASH, coll=ALLREDUCE, count=1024, payload=None, magic=NET_MAGIC, src=1):
    # hc_net_frame_t (src/net/net_wire.h), then its payload
    # chunks of 4096 bytes (the target's HOSTCCL_NET_CHUNK_BYTES)
    length = (min(4096, total - offset) if ftype == DATA else len(payload or b"")) if length is None else length
    payload = bytes((offset + i) & 0xFF for i in range(length)) if payload is None else payload
    head = struct.pack("<IHHIIQQQQIiQIIIIQQ", magic, ftype, kind, src, step, NET_COMM_ID, seq, offset, total,
                       length, status, sig_hash, coll, FP32, 0, 0, count, 0)
    return head + payload


def net_record(sock, data):
    # fuzz_net_stream.c's input records: u16 length, u8 socket, bytes (split when longer)
    out = b""
    while data:
        out += struct.pack("<HB", min(len(data), 65535), sock) + data[:65535]
        data = data[65535:]
    return out


def net_input(nsocks=2, post=1, coll=1, records=()):
    return bytes([nsocks - 1, post, coll]) + b"".join(net_record(s, d) for s, d in records)


def seeds():
    ranks = struct.pack("<8I", 1, 3, 5, 6, 7, 9, 10, 65535)
    run = struct.pack("<200I", *range(200))
    value = bytes(range(256)) * 2
    return {
        "root_info": {
            "valid_ipv4": root_info(),
            "valid_full_length": root_info(length=ROOT_INFO_BYTES),
            "valid_ipv6": root_info(family=AF_INET6, addr=bytes(15) + b"\1"),
            "host_unterminated": root_info(host=b"h" * 64),
            "bad_magic": root_info(magic=0x12345678),
            "bad_version": root_info(version=2),
            "bad_family": root_info(family=7),
            "short": root_info(length=40),
        },
        "rendezvous": {
            "hello": boot_msg(HELLO, hello()),
            "hello_rank_out_of_range": boot_msg(HELLO, hello(rank=4)),
            "hello_nranks_zero": boot_msg(HELLO, hello(nranks=0, rank=0)),
            "hello_nranks_too_many": boot_msg(HELLO, hello(nranks=65537, rank=0)),
            "hello_host_unterminated": boot_msg(HELLO, hello(host=b"h" * 64)),
            "hello_short": boot_msg(HELLO, hello()[:100]),
            "hello_len_lies": boot_msg(HELLO, hello(), length=64),
            "gather_ranks": boot_msg(GATHER, ranks, status=512),
            "gather_run_small_text": boot_msg(GATHER, run, status=40),
            "gather_too_long": boot_msg(GATHER, bytes(4097)),
            "done": boot_msg(DONE, b""),
            # Whole sessions for the server driven end to end: a rank of one joins (the seed's
            # token is the fuzz server's), relays an all-gather and leaves; a stalled partial hello.
            "session_one_rank": boot_msg(HELLO, hello(nranks=1, rank=0)) + boot_msg(GATHER, b"abcdefgh")
            + boot_msg(DONE, b""),
            "session_partial_hello": boot_msg(HELLO, hello(nranks=1, rank=0))[:40],
            "done_with_payload": boot_msg(DONE, b"x"),
            "table_from_client": boot_msg(TABLE, b""),
            "bad_magic": boot_msg(HELLO, hello(), magic=0),
            "bad_version": boot_msg(HELLO, hello(), version=2),
        },
        "rank_table": {
            "v10_2x2": rank_table(),
            "v10_1x1": rank_table(servers=1, per_server=1),
            "v10_3x4": rank_table(servers=3, per_server=4),
            "v12_pods": rank_table(version="1.2", pods=True),
            "v12_no_pods": rank_table(version="1.2", servers=1, per_server=3),
            "no_device_ip": rank_table(drop="device_ip"),
            "no_rank_id": rank_table(drop="rank_id"),
            "unknown_fields": rank_table(extra=', "hardware_type": "x", "deploy_mode": "lab"'),
            "not_json": b"status: completed\n",
            "group_list": b'{"status": "completed", "group_count": "1", "group_list": []}',
        },
        "net_stream": {
            "coll_whole": net_input(records=[(0, net_frame()), (0, net_frame(offset=4096))]),
            "coll_two_sockets": net_input(records=[(0, net_frame()), (1, net_frame(offset=4096))]),
            "coll_early": net_input(post=1 | 4, records=[(1, net_frame()), (0, net_frame(offset=4096))]),
            "coll_twice": net_input(records=[(0, net_frame()), (1, net_frame())]),
            "coll_wrong_length": net_input(records=[(0, net_frame(total=16384)), (1, net_frame(total=16384))]),
            "coll_mismatch": net_input(records=[(0, net_frame(sig_hash=7, count=2048))]),
            "coll_later": net_input(records=[(0, net_frame(seq=2)), (0, net_frame())]),
            "coll_stale": net_input(coll=2, records=[(0, net_frame(seq=1))]),
            "p2p": net_input(post=2, records=[(0, net_frame(kind=P2P, seq=1, total=100, coll=SEND, count=25))]),
            "p2p_count_mismatch": net_input(post=2, records=[(0, net_frame(kind=P2P, seq=1, total=100, coll=SEND,
                                                                            count=50))]),
            "p2p_unexpected": net_input(post=0, records=[(1, net_frame(kind=P2P, seq=3, total=64, count=16))]),
            "abort": net_input(records=[(2, net_frame(ABORT, status=1, payload=b"allreduce #1 mismatch"))]),
            "mailbox": net_input(records=[(2, net_frame(MAILBOX, seq=77, payload=bytes(4108)))]),
            "bye_then_data": net_input(records=[(2, net_frame(BYE, payload=b"")), (0, net_frame())]),
            "bad_magic": net_input(records=[(0, net_frame(magic=0))]),
            "chunk_outside": net_input(records=[(0, net_frame(offset=4000, total=8192, length=200))]),
            "one_socket": net_input(nsocks=1, records=[(0, net_frame()), (1, net_frame(ABORT, payload=b"x"))]),
        },
        "store": {
            "set_get": store_req(SET, b"hccl/root/0", value) + store_req(GET, b"hccl/root/0"),
            "overwrite": store_req(SET, b"k", b"one") + store_req(SET, b"k", b"two") + store_req(GET, b"k"),
            "get_missing_now": store_req(GET, b"missing") + store_req(SET, b"missing", b"v"),
            "get_missing_wait": store_req(GET, b"later", wait_ms=1000) + store_req(SET, b"later", b"v"),
            "wrong_token": store_req(SET, b"k", b"v", token=bytes(16)),
            "bad_version": store_req(SET, b"k", b"v", version=9),
            "not_a_store_client": b"GET /store HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n",
            "key_too_long": store_req(SET, b"k" * 257, b"v"),
            "value_too_long": store_req(SET, b"k", value_len=65537),
            "get_with_value": store_req(GET, b"k", b"v"),
            "unknown_type": store_req(3, b"k"),
            "empty_key": store_req(SET, b""),
            "key_with_space": store_req(SET, b"a b", b"v"),
            "cut_in_body": store_req(SET, b"key", b"value")[:-3],
            "cut_in_header": store_req(SET, b"key", b"value")[:20],
            "env_store_address": b"127.0.0.1:29500",
            "env_store_address_v6": b"[::1]:29500",
            "env_store_token": b"00112233445566778899AABBCCDDEEFF",
        },
    }


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    for target, files in seeds().items():
        folder = os.path.join(top, target)
        os.makedirs(folder, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(folder, name + ".bin"), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
